"""Hints, revealed one at a time; the count shown is kept in the progress file."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.spec import Exercise
from trainer.state import StateStore


@dataclass(frozen=True)
class HintReveal:
    number: int  # 1-based
    text: str
    last: bool


def reveal_next_hint(exercise: Exercise, store: StateStore) -> HintReveal:
    """The next unseen hint; once all are seen, the last one again."""
    with store.update() as state:
        progress = state.progress(exercise.id)
        progress.hints_shown = min(progress.hints_shown + 1, len(exercise.hints))
        number = progress.hints_shown
    return HintReveal(
        number=number, text=exercise.hints[number - 1], last=number == len(exercise.hints)
    )


def reveal_all_hints(exercise: Exercise, store: StateStore) -> None:
    with store.update() as state:
        state.progress(exercise.id).hints_shown = len(exercise.hints)
