"""The length of the right answer, across a catalogue: neither the longest nor the
shortest choice may be right in more than :data:`MAX_SHARE` of its questions.

A rule on each question alone ("the right answer is never the longest") only moves
the cue: authors then leave right answers bare and give the distractors their
reasons, and picking the shortest choice wins. Both ends are held to one share.
Ties count: a right answer no other choice is longer than is a longest one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trainer.content_rules.base import ContentWarning
from trainer.spec import Exercise

# The most a catalogue's right answers may be its questions' longest (or shortest) choice.
MAX_SHARE = 0.35
# Below this many questions a share says nothing (2 of 3 is 67%): the rule waits.
MIN_QUESTIONS = 20

RULE_LONGEST_SHARE = "longest_answer_share"
RULE_SHORTEST_SHARE = "shortest_answer_share"


def right_answer_is_longest(choices: Sequence[str], answer: int) -> bool:
    """True when no choice is longer than choice ``answer`` (1-based)."""
    right = len(choices[answer - 1])
    return len(choices) > 1 and all(len(c) <= right for c in choices)


def right_answer_is_shortest(choices: Sequence[str], answer: int) -> bool:
    """True when no choice is shorter than choice ``answer`` (1-based)."""
    right = len(choices[answer - 1])
    return len(choices) > 1 and all(len(c) >= right for c in choices)


@dataclass(frozen=True)
class AnswerShares:
    """How many questions of a catalogue there are, and in how many the right answer
    is the longest choice, and the shortest."""

    questions: int
    longest: int
    shortest: int

    @classmethod
    def of(cls, exercises: Iterable[Exercise]) -> AnswerShares:
        questions = [q for e in exercises for q in e.quiz]
        return cls(
            questions=len(questions),
            longest=sum(right_answer_is_longest(q.choices, q.answer) for q in questions),
            shortest=sum(right_answer_is_shortest(q.choices, q.answer) for q in questions),
        )

    def too_many(self, count: int) -> bool:
        return self.questions >= MIN_QUESTIONS and count / self.questions > MAX_SHARE


def answer_share_warnings(exercise: Exercise, shares: AnswerShares) -> list[ContentWarning]:
    """Where the catalogue's longest (or shortest) share is above :data:`MAX_SHARE`, each
    question of ``exercise`` that adds to it: the places to change."""
    ends = (
        (RULE_LONGEST_SHARE, "longest", shares.longest, right_answer_is_longest, "shorter"),
        (RULE_SHORTEST_SHARE, "shortest", shares.shortest, right_answer_is_shortest, "longer"),
    )
    warnings = []
    for rule, end, count, test, fix in ends:
        if not shares.too_many(count):
            continue
        for index, question in enumerate(exercise.quiz):
            if test(question.choices, question.answer):
                warnings.append(
                    ContentWarning(
                        rule,
                        f"quiz[{index}]",
                        f"the right answer (choice {question.answer}) is the {end} choice, as "
                        f"in {count} of the catalogue's {shares.questions} questions "
                        f"({count / shares.questions:.0%}, more than {MAX_SHARE:.0%}): a "
                        f"learner who always picks the {end} choice beats chance. Make the "
                        f"right answer {fix} than another choice here, or in other questions",
                    )
                )
    return warnings
