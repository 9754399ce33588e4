"""Mechanical rules for teaching content, checked by ``trainer validate`` as warnings.

A spec can load, its stub fail and its solution pass, and still teach badly. Three
habits are easy to fall into and easy to detect without judgement:

- ``longest_answer``: the right answer of a question is its longest choice, a cue
  a learner can use without reading the question;
- ``near_duplicate``: a question's text is nearly the same as one in another
  exercise (or in a shared quiz), so the catalogue asks the same thing twice;
- ``code_in_last_hint``: the last hint contains code, where it should give the
  formula in math notation and leave the code to ``trainer solution``.

The functions here are pure: they take :class:`~trainer.spec.Exercise` objects
(and the texts of shared questions) and return warnings. They never fail a spec;
``trainer validate`` shows them and still exits 0. The rules are documented in
``docs/spec-format.md``; keep the two in step.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trainer.spec import Exercise

# Two question texts whose difflib ratio reaches this, once normalised, are near-duplicates.
NEAR_DUPLICATE_RATIO = 0.75

RULE_LONGEST_ANSWER = "longest_answer"
RULE_NEAR_DUPLICATE = "near_duplicate"
RULE_CODE_IN_LAST_HINT = "code_in_last_hint"
RULES = (RULE_LONGEST_ANSWER, RULE_NEAR_DUPLICATE, RULE_CODE_IN_LAST_HINT)


@dataclass(frozen=True)
class ContentWarning:
    """One broken rule: which rule, where in the spec (a field path), and what to do."""

    rule: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class OtherQuestion:
    """A question of another exercise or of a shared quiz, for the near-duplicate rule."""

    owner: str  # an exercise id, or the name of a shared quiz
    where: str  # its field path there, e.g. "quiz[2]"
    text: str


# --- the right answer is the longest choice ---------------------------------------


def right_answer_is_longest(choices: Sequence[str], answer: int) -> bool:
    """True when choice ``answer`` (1-based) is strictly longer than every other choice."""
    right = len(choices[answer - 1])
    return all(right > len(c) for i, c in enumerate(choices, start=1) if i != answer)


def longest_answer_warnings(exercise: Exercise) -> list[ContentWarning]:
    warnings = []
    for index, question in enumerate(exercise.quiz):
        if len(question.choices) > 1 and right_answer_is_longest(question.choices, question.answer):
            warnings.append(
                ContentWarning(
                    RULE_LONGEST_ANSWER,
                    f"quiz[{index}]",
                    f"the right answer (choice {question.answer}) is the longest choice, a cue "
                    "that gives it away: make a wrong choice as long and as careful",
                )
            )
    return warnings


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
        OtherQuestion(exercise.id, f"quiz[{index}]", question.question)
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
    """:func:`similarity` when it reaches ``threshold``, else None (cheap bounds first)."""
    a, b = sorted((normalise(first), normalise(second)))
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
        return None
    ratio = matcher.ratio()
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
        OtherQuestion(owner, f"quiz[{index}]", item["question"])
        for index, item in enumerate(items)
        if isinstance(item, dict) and isinstance(item.get("question"), str)
    ]


# --- the last hint contains code --------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
# Python that is not math: a module or ctx attribute, a statement keyword, a method
# call, a keyword argument, a tensor transpose attribute, the matrix-product operator.
_PYTHON_SIGNS = (
    re.compile(r"\b(?:torch|ctx|F|nn|np|math|self)\.[A-Za-z_]"),
    re.compile(r"\b(?:return|import|def|lambda|raise|yield)\b"),
    re.compile(r"[\w)\]]\.[A-Za-z_]\w*\("),  # x.sum(  (a).mean(  t[0].clone(
    re.compile(r"[(,]\s*[A-Za-z_]\w*=(?!=)"),  # (dim=1  , keepdim=True
    re.compile(r"[\w)\]]\.m?T\b"),  # w.T  x.mT
    re.compile(r"\s@\s"),  # a @ b
)
# A target that reads as a variable of a program rather than a symbol of maths:
# a tuple (a, b = ...), a subscript or attribute (g[i] = ..., ctx.k = ...), or a
# name of four or more characters (grad = ..., du_dx = ...). One-letter names and
# short subscripted symbols (y = ..., y_i = ..., dL = ...) are maths.
_PROGRAM_NAME = re.compile(r"^[A-Za-z_]\w{3,}$")


def _is_assignment(span: str) -> bool:
    """True when ``span`` parses as a Python assignment to a program-like target."""
    try:
        module = ast.parse(span.strip())
    except (SyntaxError, ValueError, RecursionError):
        return False
    if len(module.body) != 1:
        return len(module.body) > 1  # several statements: a program
    statement = module.body[0]
    if isinstance(statement, ast.AugAssign | ast.AnnAssign):
        return True
    if not isinstance(statement, ast.Assign):
        return False
    for target in statement.targets:
        if isinstance(target, ast.Tuple | ast.List | ast.Subscript | ast.Attribute | ast.Starred):
            return True
        if isinstance(target, ast.Name) and _PROGRAM_NAME.match(target.id):
            return True
    return False


def span_is_code(span: str) -> bool:
    """True when an inline code span holds Python rather than maths.

    ``x.sum(dim=0)``, ``return g * y``, ``grad = probs.clone()`` and ``w.T @ g``
    are code; ``g · s · (1 − s)``, ``dL/dx = g · (1 − y²)``, ``y = 0.5 * x`` and
    ``y_i · (δ_ij − y_j)`` are maths.
    """
    if any(sign.search(span) for sign in _PYTHON_SIGNS):
        return True
    return _is_assignment(span)


def code_in(text: str) -> list[str]:
    """The pieces of Markdown ``text`` that are code: fenced blocks and code spans of Python."""
    if _FENCE.search(text):
        return ["a fenced code block"]
    return [span.strip() for _, span in _CODE_SPAN.findall(text) if span_is_code(span)]


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
    exercise: Exercise, others: Sequence[OtherQuestion] = ()
) -> list[ContentWarning]:
    """Every rule over one exercise; ``others`` are the questions to compare with."""
    return [
        *longest_answer_warnings(exercise),
        *near_duplicate_warnings(exercise, others),
        *code_in_last_hint_warnings(exercise),
    ]
