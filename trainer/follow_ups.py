"""The interviewer's follow-ups after a pass (issue 31): which comes next, taking one
up, and recording a check of it. The checking itself is the engine's (the
``follow_up_*`` stages, switched on by ``Exercise.with_follow_up``)."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.spec import Exercise, FollowUp
from trainer.state import Progress, StateStore


@dataclass(frozen=True)
class FollowUpStatus:
    """Where a learner stands with an exercise's follow-ups."""

    active: FollowUp | None  # taken up with `trainer followup`, graded by every check
    passed: tuple[str, ...]  # ids, in the spec's order
    total: int

    @property
    def tally(self) -> str | None:
        """How many are passed of how many ("1/2", as `trainer list` shows it); None for
        an exercise without follow-ups."""
        return f"{len(self.passed)}/{self.total}" if self.total else None

    @property
    def all_passed(self) -> bool:
        return bool(self.total) and len(self.passed) == self.total


def status(exercise: Exercise, progress: Progress) -> FollowUpStatus:
    ids = [f.id for f in exercise.follow_ups]
    active = next((f for f in exercise.follow_ups if f.id == progress.follow_up), None)
    passed = tuple(i for i in ids if i in progress.follow_ups_passed)
    return FollowUpStatus(active, passed, len(ids))


def next_follow_up(exercise: Exercise, progress: Progress) -> FollowUp | None:
    """The follow-up to ask now: the one taken up and not passed, else the first not
    passed; None when every one is passed (or there are none)."""
    for follow_up in exercise.follow_ups:
        if follow_up.id == progress.follow_up and follow_up.id not in progress.follow_ups_passed:
            return follow_up
    return next((f for f in exercise.follow_ups if f.id not in progress.follow_ups_passed), None)


def take_up(store: StateStore, exercise: Exercise, follow_up: FollowUp) -> None:
    """From now on, every check of ``exercise`` grades ``follow_up`` too."""
    with store.update() as state:
        state.progress(exercise.id).follow_up = follow_up.id


def checked_exercise(exercise: Exercise, progress: Progress) -> Exercise:
    """The exercise as a check sends it: with the follow-up taken up active."""
    if progress.follow_up is None or progress.follow_up not in {f.id for f in exercise.follow_ups}:
        return exercise
    return exercise.with_follow_up(progress.follow_up)


def record(store: StateStore, exercise: Exercise, passed: bool) -> str | None:
    """A check of ``exercise`` (with its follow-up active) passed or not: the follow-up
    it passed, recorded, or None."""
    active = exercise.active_follow_up
    if not passed or active is None:
        return None
    with store.update() as state:
        progress = state.progress(exercise.id)
        if active not in progress.follow_ups_passed:
            progress.follow_ups_passed.append(active)
    return active
