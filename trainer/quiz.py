"""Quiz logic: the order of the choices, reading an answer and keeping the best score.
Asking is the CLI's job."""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence

from trainer.spec import Exercise, QuizQuestion, SharedQuiz
from trainer.state import StateStore

# "Choice 2", "choices 1 and 4", "choice 3 or 4" in an explanation: renumbered with the choices.
_CHOICE_REFERENCE = re.compile(r"\b([Cc]hoices?) (\d+)((?:,? (?:and|or) \d+)*)")


def shuffled(questions: Sequence[QuizQuestion], seed: int | None) -> list[QuizQuestion]:
    """The questions with their choices in a random order (the same for the same seed),
    each ``answer``, and each "choice N" an explanation names, renumbered to match."""
    chooser = random.Random(seed)
    result = []
    for question in questions:
        order = list(range(len(question.choices)))
        chooser.shuffle(order)
        new_number = {old + 1: new + 1 for new, old in enumerate(order)}

        def renumber(match: re.Match[str], new_number: dict[int, int] = new_number) -> str:
            return re.sub(
                r"\d+", lambda d: str(new_number.get(int(d.group()), d.group())), match.group()
            )

        result.append(
            dataclasses.replace(
                question,
                choices=tuple(question.choices[i] for i in order),
                answer=new_number[question.answer],
                explanation=_CHOICE_REFERENCE.sub(renumber, question.explanation),
            )
        )
    return result


def parse_choice(text: str, question: QuizQuestion) -> int | None:
    """The 1-based choice the learner typed, or None when it is not a valid choice."""
    text = text.strip().rstrip(".)")
    if not text.isdigit():
        return None
    choice = int(text)
    return choice if 1 <= choice <= len(question.choices) else None


def record_score(exercise: Exercise | SharedQuiz, store: StateStore, score: int) -> int:
    """Save ``score`` if it is the best so far; return the best."""
    with store.update() as state:
        progress = state.progress(exercise.id)
        if progress.quiz_best is None or score > progress.quiz_best:
            progress.quiz_best = score
        progress.quiz_total = len(exercise.quiz)
        return progress.quiz_best
