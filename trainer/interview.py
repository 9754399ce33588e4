"""Timed interview mode: one exercise against the clock, with checks and hints counted.

The clock is :data:`CLOCK` so that tests can move time. After a pass, an exercise
with follow-ups gets one: the interviewer asks its next follow-up not passed yet
(it is taken up, as ``trainer followup`` does), and the checks grade it in the time
that is left. An interview ends on a pass (of the follow-up, when one was asked), on
``trainer interview --stop``, or when any command notices the time is up; its
summary says whether the follow-up was answered, and is kept as the exercise's
best interview when it beats it.
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
    reason: str  # "passed" (the exercise, in time), "stopped" or "time up"
    seconds: float  # to the pass, or to the end without one
    minutes: float
    checks: int
    hints: int
    follow_up: str | None = None  # the follow-up asked after the pass
    # "answered" (passed in time), "stopped" or "time up"; None when none was asked.
    follow_up_outcome: str | None = None
    follow_up_seconds: float | None = None  # from the pass to its answer or the end

    @property
    def passed(self) -> bool:
        return self.reason == "passed"

    @property
    def follow_up_answered(self) -> bool:
        return self.follow_up_outcome == "answered"

    @property
    def follow_up_words(self) -> str | None:
        """What became of the follow-up asked: "no_jacobian: answered 3:10 after the pass",
        "no_jacobian: not answered (time up 9:00 after the pass)"; None when none was asked."""
        if self.follow_up is None:
            return None
        spent = f"{format_duration(self.follow_up_seconds or 0.0)} after the pass"
        if self.follow_up_answered:
            return f"{self.follow_up}: answered {spent}"
        return f"{self.follow_up}: not answered ({self.follow_up_outcome} {spent})"


@dataclass(frozen=True)
class InterviewCheck:
    """What counting a check did to the interview under way on its exercise."""

    left: float | None = None  # seconds left; None when no interview is on the exercise
    ended: InterviewSummary | None = None  # the summary, when this check ended it
    asked: str | None = None  # the follow-up this check's pass made the interviewer ask


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
    follow_ups: Sequence[str] = (),
) -> InterviewCheck:
    """Count a check of ``exercise_id`` in the progress file and in an interview under
    way on it, in one locked update; a pass passes the exercise. In an interview, the
    first pass asks the next of ``follow_ups`` (the exercise's, in order) not passed
    yet and takes it up; the interview ends on a pass when there is none, else on the
    pass that answers it. The study record keeps its day and ``diagnosis``
    (:mod:`trainer.history`); a check of a review's file (``reviewing``) records the
    review's result when it is its first.
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
            return InterviewCheck()
        interview.checks += 1
        left = remaining_seconds(interview)
        if not passed:
            return InterviewCheck(left)
        if interview.follow_up is None:
            asked = next((f for f in follow_ups if f not in progress.follow_ups_passed), None)
            if asked is not None:
                interview.follow_up = asked
                interview.passed_after = round(CLOCK() - interview.started_at, 1)
                progress.follow_up = asked  # taken up, as `trainer followup` does
                return InterviewCheck(left, asked=asked)
        return InterviewCheck(left, _finish(state, "passed"))


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
    elapsed = round(max(min(CLOCK() - interview.started_at, interview.minutes * 60), 0.0), 1)
    asked, passed_after = interview.follow_up, interview.passed_after
    if asked is not None and passed_after is not None:  # the exercise was passed before
        summary = InterviewSummary(
            exercise=interview.exercise,
            reason="passed",
            seconds=passed_after,
            minutes=interview.minutes,
            checks=interview.checks,
            hints=max(progress.hints_shown - interview.hints_at_start, 0),
            follow_up=asked,
            follow_up_outcome="answered" if reason == "passed" else reason,
            follow_up_seconds=round(max(elapsed - passed_after, 0.0), 1),
        )
    else:
        summary = InterviewSummary(
            exercise=interview.exercise,
            reason=reason,
            seconds=elapsed,
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
