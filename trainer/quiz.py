"""Quiz logic: the order of the choices, reading an answer and keeping the best score.
Asking is the CLI's job."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from trainer.spec import Exercise, QuizQuestion
from trainer.state import StateStore


def shuffled(questions: Sequence[QuizQuestion], seed: int | None) -> list[QuizQuestion]:
    """The questions with their choices in a random order (the same for the same seed),
    each ``answer`` renumbered to where its choice went."""
    chooser = random.Random(seed)
    result = []
    for question in questions:
        order = list(range(len(question.choices)))
        chooser.shuffle(order)
        result.append(
            dataclasses.replace(
                question,
                choices=tuple(question.choices[i] for i in order),
                answer=order.index(question.answer - 1) + 1,
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


def record_score(exercise: Exercise, store: StateStore, score: int) -> int:
    """Save ``score`` if it is the best so far; return the best."""
    with store.update() as state:
        progress = state.progress(exercise.id)
        if progress.quiz_best is None or score > progress.quiz_best:
            progress.quiz_best = score
        progress.quiz_total = len(exercise.quiz)
        return progress.quiz_best
