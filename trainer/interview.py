"""Timed interview mode: one exercise against the clock, with checks and hints counted.

The clock is :data:`CLOCK` so that tests can move time. An interview ends on a
pass, on ``trainer interview --stop``, or when any command notices the time is
up; its summary is kept as the exercise's best interview when it beats it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from trainer import history
from trainer.errors import TrainerError
from trainer.spec import Exercise
from trainer.state import Interview, State, StateStore

if TYPE_CHECKING:
    import random

CLOCK: Callable[[], float] = time.time
DEFAULT_MINUTES = 40.0  # the time `trainer interview` allows unless told


@dataclass(frozen=True)
class InterviewSummary:
    exercise: str
    reason: str  # "passed", "stopped" or "time up"
    seconds: float
    minutes: float
    checks: int
    hints: int

    @property
    def passed(self) -> bool:
        return self.reason == "passed"


def pick_exercise(exercises: Sequence[Exercise], state: State, chooser: random.Random) -> Exercise:
    """A random exercise not yet passed; any exercise when all are passed."""
    open_ones = [e for e in exercises if not state.progress(e.id).passed]
    return chooser.choice(open_ones or list(exercises))


def begin(store: StateStore, exercise: Exercise, minutes: float) -> Interview:
    with store.update() as state:
        if state.interview is not None and not _is_over(state.interview):
            left = remaining_seconds(state.interview)
            raise TrainerError(
                f"an interview on `{state.interview.exercise}` is under way "
                f"({format_duration(left)} left). Finish it, or end it with "
                "`trainer interview --stop`."
            )
        interview = Interview(
            exercise=exercise.id,
            started_at=CLOCK(),
            minutes=minutes,
            checks=0,
            hints_at_start=state.progress(exercise.id).hints_shown,
        )
        state.interview = interview
        state.current = exercise.id
        history.mark_started(state, exercise.id)
    return interview


def remaining_seconds(interview: Interview) -> float:
    return interview.started_at + interview.minutes * 60 - CLOCK()


def _is_over(interview: Interview) -> bool:
    return remaining_seconds(interview) <= 0


def record_check(
    store: StateStore,
    exercise_id: str,
    passed: bool,
    diagnosis: str | None = None,
    reviewing: bool = False,
) -> tuple[float | None, InterviewSummary | None]:
    """Count a check of ``exercise_id`` in the progress file and in an interview under
    way on it, in one locked update; a pass passes the exercise and ends the interview.
    The study record keeps its day and ``diagnosis`` (:mod:`trainer.history`); a check
    of a review's file (``reviewing``) records the review's result when it is its first.

    Returns the seconds left (None when no interview is on this exercise) and
    the summary when this check ended the interview.
    """
    with store.update() as state:
        history.record_check(state, exercise_id, passed, diagnosis)
        if reviewing:  # imported here: every command imports this module at start
            from trainer.review import record_result

            record_result(state, exercise_id, passed)
        progress = state.progress(exercise_id)
        progress.checks += 1
        progress.passed = progress.passed or passed
        interview = state.interview
        if interview is None or interview.exercise != exercise_id:
            return None, None
        interview.checks += 1
        left = remaining_seconds(interview)
        if passed:
            return left, _finish(state, "passed")
        return left, None


def stop(store: StateStore, reason: str = "stopped") -> InterviewSummary | None:
    with store.update() as state:
        if state.interview is None:
            return None
        return _finish(state, reason)


def expire_if_due(store: StateStore) -> InterviewSummary | None:
    """End an interview whose time is up; called by every command."""
    state = store.load()
    if state.interview is None or not _is_over(state.interview):
        return None
    with store.update() as state:
        if state.interview is None or not _is_over(state.interview):
            return None
        return _finish(state, "time up")


def _finish(state: State, reason: str) -> InterviewSummary:
    interview = state.interview
    assert interview is not None
    progress = state.progress(interview.exercise)
    elapsed = min(CLOCK() - interview.started_at, interview.minutes * 60)
    summary = InterviewSummary(
        exercise=interview.exercise,
        reason=reason,
        seconds=round(max(elapsed, 0.0), 1),
        minutes=interview.minutes,
        checks=interview.checks,
        hints=max(progress.hints_shown - interview.hints_at_start, 0),
    )
    best = progress.best_interview
    if summary.passed and (not best or not best.get("passed") or summary.seconds < best["seconds"]):
        progress.best_interview = {**asdict(summary), "passed": True}
    elif best is None:
        progress.best_interview = {**asdict(summary), "passed": False}
    history.record_interview(state, asdict(summary))
    state.interview = None
    return summary


def format_duration(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    return f"{seconds // 60}:{seconds % 60:02d}"
