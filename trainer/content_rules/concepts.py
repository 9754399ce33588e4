"""Concept repeats: two exercises that ask the same idea in other words.

String similarity (``near_duplicate``) misses a repeat worded anew: "what does
backward receive for the unused output?" asked of two exercises, with two right
answers that both say "a tensor of zeros shaped like it". What stays is the
vocabulary: two questions that share distinctive words, *and* whose right answers
share distinctive words, ask one idea twice. Words every exercise uses (backward,
gradient, tensor, shape...) are not distinctive; neither are the little words.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from trainer.content_rules.base import ContentWarning, OtherQuestion
from trainer.spec import Exercise

RULE_CONCEPT_REPEAT = "concept_repeat"

# Shared distinctive words it takes, in the questions and in the right answers.
SHARED_IN_QUESTIONS = 2
SHARED_IN_ANSWERS = 2

_LITTLE_WORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "and",
        "or",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "for",
        "with",
        "on",
        "at",
        "by",
        "as",
        "from",
        "into",
        "than",
        "then",
        "there",
        "their",
        "them",
        "they",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "does",
        "do",
        "did",
        "done",
        "not",
        "no",
        "nor",
        "but",
        "if",
        "else",
        "so",
        "such",
        "can",
        "could",
        "may",
        "might",
        "must",
        "shall",
        "should",
        "will",
        "would",
        "has",
        "have",
        "had",
        "having",
        "was",
        "were",
        "been",
        "being",
        "one",
        "two",
        "three",
        "four",
        "each",
        "every",
        "any",
        "all",
        "some",
        "only",
        "also",
        "other",
        "another",
        "same",
        "more",
        "most",
        "less",
        "least",
        "very",
        "much",
        "many",
        "own",
        "both",
        "either",
        "neither",
        "here",
        "just",
        "about",
        "after",
        "before",
        "above",
        "below",
        "over",
        "under",
        "again",
        "further",
        "once",
        "up",
        "down",
        "out",
        "off",
        "your",
        "you",
        "we",
        "our",
        "us",
        "his",
        "her",
        "he",
        "she",
        "me",
        "my",
        "whatever",
        "whichever",
        "still",
        "even",
        "get",
        "gets",
        "give",
        "gives",
        "given",
        "make",
        "makes",
        "made",
        "take",
        "takes",
        "use",
        "uses",
        "used",
    ]
)
# What nearly every question of a backward exercise says: no sign of one idea.
_EVERYDAY_WORDS = frozenset(
    [
        "backward",
        "forward",
        "gradient",
        "grad",
        "grad_output",
        "input",
        "output",
        "return",
        "value",
        "element",
        "tensor",
        "shape",
        "torch",
        "autograd",
        "function",
        "number",
        "float",
        "dtype",
        "result",
        "choice",
        "right",
        "wrong",
        "true",
        "false",
        "like",
    ]
)
_WORD = re.compile(r"[a-z][a-z0-9_]+")


def _stem(word: str) -> str:
    """A crude stem, enough to match "zeros" with "zero" and "shaped" with "shape"."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    if word.endswith("e") and len(word) >= 5:
        return word[:-1]
    return word


@functools.lru_cache(maxsize=4096)  # each question is compared with every other one
def keywords(text: str) -> frozenset[str]:
    """The distinctive words of ``text``, stemmed."""
    return frozenset(
        _stem(w)
        for w in _WORD.findall(text.lower())
        if len(w) >= 3 and not {w, w.removesuffix("s")} & (_LITTLE_WORDS | _EVERYDAY_WORDS)
    )


def concept_repeat_warnings(
    exercise: Exercise, others: Sequence[OtherQuestion]
) -> list[ContentWarning]:
    """Questions of ``exercise`` that share distinctive words with a question of another
    owner, both in the question and in the right answer."""
    warnings = []
    theirs = [(o, keywords(o.text), keywords(o.answer)) for o in others if o.answer]
    for index, question in enumerate(exercise.quiz):
        asked = keywords(question.question)
        answered = keywords(question.choices[question.answer - 1])
        for other, other_asked, other_answered in theirs:
            if other.owner == exercise.id:
                continue
            in_questions = sorted(asked & other_asked)
            in_answers = sorted(answered & other_answered)
            if len(in_questions) >= SHARED_IN_QUESTIONS and len(in_answers) >= SHARED_IN_ANSWERS:
                warnings.append(
                    ContentWarning(
                        RULE_CONCEPT_REPEAT,
                        f"quiz[{index}]",
                        f"asks the idea of {other.owner} {other.where} again: the questions "
                        f"share {', '.join(in_questions)} and the right answers "
                        f"{', '.join(in_answers)}. Ask an idea every exercise shares once, in "
                        "the concepts quiz, and ask here what is special about this op",
                    )
                )
    return warnings
