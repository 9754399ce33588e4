"""Mechanical rules for teaching content, checked by ``trainer validate`` as warnings.

A spec can load, its stub fail and its solution pass, and still teach badly. These
habits are easy to fall into and easy to detect without judgement:

- ``longest_answer_share`` / ``shortest_answer_share``: across the catalogue, the right
  answer is the longest (or the shortest) choice of too many questions, a cue a
  learner can use without reading them (:mod:`.answers`);
- ``near_duplicate``: a question's text is nearly the same as one in another
  exercise (or in a shared quiz), so the catalogue asks the same thing twice;
- ``concept_repeat``: a question asks another exercise's idea in other words: the
  two share distinctive words in their questions and in their right answers
  (:mod:`.concepts`);
- ``code_in_last_hint``: the last hint contains code, where it should give the
  formula in math notation and leave the code to ``trainer solution``;
- ``answer_before_last_hint``: an earlier hint gives code or the complete formula
  (:mod:`.teaching`);
- ``stage_not_in_statement``: the statement does not name a stage the exercise runs;
- ``derivation_missing``, ``derivation_too_wide``, ``code_in_derivation``: the worked
  derivation shown after a pass is missing, has a line too wide for an 80-column
  terminal, or holds code (:mod:`.derivation`).

The functions here are pure: they take :class:`~trainer.spec.Exercise` objects
(and the texts of shared questions) and return warnings. They never fail a spec;
``trainer validate`` shows them and still exits 0. The rules are documented in
``docs/spec-format.md``; keep the two in step.
"""

from __future__ import annotations

import difflib
import functools
from collections import Counter
from collections.abc import Iterable, Sequence

from trainer.content_rules.answers import (
    MAX_SHARE,
    RULE_LONGEST_SHARE,
    RULE_SHORTEST_SHARE,
    AnswerShares,
    answer_share_warnings,
    right_answer_is_longest,
    right_answer_is_shortest,
)
from trainer.content_rules.base import ContentWarning, OtherQuestion
from trainer.content_rules.code import code_in, span_is_code
from trainer.content_rules.concepts import RULE_CONCEPT_REPEAT, concept_repeat_warnings, keywords
from trainer.content_rules.derivation import (
    RULE_CODE_IN_DERIVATION,
    RULE_DERIVATION_MISSING,
    RULE_DERIVATION_TOO_WIDE,
    derivation_warnings,
)
from trainer.content_rules.teaching import (
    RULE_ANSWER_BEFORE_LAST_HINT,
    RULE_STAGE_NOT_IN_STATEMENT,
    answer_before_last_hint_warnings,
    stage_naming_warnings,
)
from trainer.spec import Exercise

# Two question texts whose difflib ratio reaches this, once normalised, are near-duplicates.
NEAR_DUPLICATE_RATIO = 0.75

RULE_NEAR_DUPLICATE = "near_duplicate"
RULE_CODE_IN_LAST_HINT = "code_in_last_hint"
RULES = (
    RULE_LONGEST_SHARE,
    RULE_SHORTEST_SHARE,
    RULE_NEAR_DUPLICATE,
    RULE_CONCEPT_REPEAT,
    RULE_CODE_IN_LAST_HINT,
    RULE_ANSWER_BEFORE_LAST_HINT,
    RULE_STAGE_NOT_IN_STATEMENT,
    RULE_DERIVATION_MISSING,
    RULE_DERIVATION_TOO_WIDE,
    RULE_CODE_IN_DERIVATION,
)

__all__ = [
    "MAX_SHARE",
    "RULES",
    "AnswerShares",
    "ContentWarning",
    "OtherQuestion",
    "code_in",
    "content_warnings",
    "keywords",
    "questions_of",
    "right_answer_is_longest",
    "right_answer_is_shortest",
    "shared_questions",
    "span_is_code",
]


# --- a question is nearly the same as one elsewhere ------------------------------


def normalise(text: str) -> str:
    """Lower case, with every run of whitespace turned into one space."""
    return " ".join(text.lower().split())


def similarity(first: str, second: str) -> float:
    """difflib's ratio of two texts after :func:`normalise`, from 0 (unlike) to 1 (equal)."""
    a, b = sorted((normalise(first), normalise(second)))
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def questions_of(exercises: Iterable[Exercise]) -> list[OtherQuestion]:
    """Every quiz question of ``exercises``, named by exercise id and position."""
    return [
        OtherQuestion(
            exercise.id,
            f"quiz[{index}]",
            question.question,
            question.choices[question.answer - 1],
        )
        for exercise in exercises
        for index, question in enumerate(exercise.quiz)
    ]


def near_duplicate_warnings(
    exercise: Exercise,
    others: Sequence[OtherQuestion],
    threshold: float = NEAR_DUPLICATE_RATIO,
) -> list[ContentWarning]:
    """Questions of ``exercise`` nearly the same as a question of another owner.

    Questions owned by ``exercise`` itself (same id) are skipped, so the whole
    catalogue can be passed as ``others``.
    """
    warnings = []
    for index, question in enumerate(exercise.quiz):
        for other in others:
            if other.owner == exercise.id:
                continue
            ratio = _ratio_if_close(question.question, other.text, threshold)
            if ratio is not None:
                warnings.append(
                    ContentWarning(
                        RULE_NEAR_DUPLICATE,
                        f"quiz[{index}]",
                        f"the question is nearly the same as {other.owner} {other.where} "
                        f"({ratio:.0%} alike): ask it once, where it matters most, or ask "
                        "something specific to this exercise",
                    )
                )
    return warnings


def _ratio_if_close(first: str, second: str, threshold: float) -> float | None:
    """:func:`similarity` when it reaches ``threshold``, else None.

    The catalogue compares every question with every other one, each pair twice: the
    bounds difflib's ``real_quick_ratio`` and ``quick_ratio`` compute (the lengths, the
    letters in common) come from each text's letters, counted once, and a pair's answer
    is kept for its second time."""
    a, b = sorted((_normalised(first), _normalised(second)))
    return _close_ratio(a, b, threshold)


@functools.lru_cache(maxsize=4096)
def _normalised(text: str) -> str:
    return normalise(text)


@functools.lru_cache(maxsize=4096)
def _letters(text: str) -> Counter[str]:
    return Counter(text)


@functools.lru_cache(maxsize=65536)
def _close_ratio(a: str, b: str, threshold: float) -> float | None:
    total = len(a) + len(b)
    if total and 2.0 * min(len(a), len(b)) / total < threshold:
        return None  # difflib's real_quick_ratio
    if total and 2.0 * (_letters(a) & _letters(b)).total() / total < threshold:
        return None  # difflib's quick_ratio
    ratio = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    return ratio if ratio >= threshold else None


def shared_questions(data: object, owner: str) -> list[OtherQuestion]:
    """The question texts of a shared quiz file, parsed from YAML, for the near-duplicate rule.

    Accepts a list of questions or a mapping with a ``quiz`` (or ``questions``)
    list, each question a mapping with a ``question`` text. Anything else gives
    no questions: a shared quiz is validated where it is used, not here.
    """
    items: object = data
    if isinstance(data, dict):
        items = data.get("quiz", data.get("questions"))
    if not isinstance(items, list):
        return []
    return [
        OtherQuestion(owner, f"quiz[{index}]", item["question"], _right_choice(item))
        for index, item in enumerate(items)
        if isinstance(item, dict) and isinstance(item.get("question"), str)
    ]


def _right_choice(item: dict[str, object]) -> str:
    """The text of a shared question's right choice, or "" when it cannot be read."""
    choices, answer = item.get("choices"), item.get("answer")
    if isinstance(choices, list) and isinstance(answer, int) and 1 <= answer <= len(choices):
        return str(choices[answer - 1])
    return ""


# --- the last hint contains code --------------------------------------------------


def code_in_last_hint_warnings(exercise: Exercise) -> list[ContentWarning]:
    if not exercise.hints:
        return []
    found = code_in(exercise.hints[-1])
    if not found:
        return []
    shown = ", ".join(f"`{piece}`" if piece != "a fenced code block" else piece for piece in found)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return [
        ContentWarning(
            RULE_CODE_IN_LAST_HINT,
            f"hints[{len(exercise.hints) - 1}]",
            f"the last hint contains code ({shown}): give the complete formula in math "
            "notation and leave the code to `trainer solution`",
        )
    ]


# --- all rules ---------------------------------------------------------------------


def content_warnings(
    exercise: Exercise,
    others: Sequence[OtherQuestion] = (),
    shares: AnswerShares | None = None,
) -> list[ContentWarning]:
    """Every rule over one exercise; ``others`` are the questions to compare with, and
    ``shares`` the answer lengths of its whole catalogue (without them, that rule
    has nothing to go on and is skipped)."""
    return [
        *(answer_share_warnings(exercise, shares) if shares is not None else []),
        *near_duplicate_warnings(exercise, others),
        *concept_repeat_warnings(exercise, others),
        *code_in_last_hint_warnings(exercise),
        *answer_before_last_hint_warnings(exercise),
        *stage_naming_warnings(exercise),
        *derivation_warnings(exercise),
    ]
