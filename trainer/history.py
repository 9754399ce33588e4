"""The study record: what each check, start and interview adds to progress.

Every function here changes a :class:`~trainer.state.State` inside the caller's
locked update (``StateStore.update``), so a record is written atomically with the
rest of the progress. The clock is :data:`CLOCK`, which tests move.

A failed check is recorded by its *diagnosis*: the classic mistake its first
failing stage names (``no_grad_output``), else that stage (``stage:load``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from trainer.state import MAX_DIAGNOSES, MAX_INTERVIEWS, State

CLOCK: Callable[[], float] = time.time
DAY = 86400.0
STAGE_PREFIX = "stage:"  # a diagnosis that is a stage, not a named mistake


class _Failure(Protocol):
    id: str
    diagnosis: dict[str, Any] | None


class _Report(Protocol):
    @property
    def first_failure(self) -> Any: ...


def diagnosis_of(report: _Report) -> str | None:
    """The diagnosis of a check: its first failure's mistake, else the stage; None on a pass."""
    failure: _Failure | None = report.first_failure
    if failure is None:
        return None
    mistake = (failure.diagnosis or {}).get("mistake")
    if isinstance(mistake, str) and mistake:
        return mistake
    return f"{STAGE_PREFIX}{failure.id}"


def date_of(moment: float) -> str:
    """The learner's local date of a moment, as YYYY-MM-DD."""
    return time.strftime("%Y-%m-%d", time.localtime(moment))


def mark_started(state: State, exercise_id: str, now: float | None = None) -> None:
    """The exercise is started: the first start is kept (not for one an older version
    started, whose start is unknown)."""
    progress = state.progress(exercise_id)
    if not progress.started and progress.started_at is None:
        progress.started_at = CLOCK() if now is None else now
    progress.started = True


def record_check(
    state: State, exercise_id: str, passed: bool, diagnosis: str | None = None
) -> bool:
    """Count one check: its day, its diagnosis when it failed, the first pass.

    Returns True when this check is the exercise's first pass.
    """
    now = CLOCK()
    mark_started(state, exercise_id, now)
    progress = state.progress(exercise_id)
    day = date_of(now)
    state.days[day] = state.days.get(day, 0) + 1
    if not passed and diagnosis is not None:
        counts = progress.diagnoses
        if diagnosis in counts or len(counts) < MAX_DIAGNOSES:
            counts[diagnosis] = counts.get(diagnosis, 0) + 1
    first_pass = passed and not progress.passed
    if first_pass:
        progress.passed_at = now
        progress.checks_to_pass = progress.checks + 1  # the caller counts this one next
        progress.hints_to_pass = progress.hints_shown
    return first_pass


def record_interview(state: State, summary: dict[str, Any]) -> None:
    """Keep a finished interview (the newest :data:`~trainer.state.MAX_INTERVIEWS`)."""
    state.interviews.append({"at": CLOCK(), **summary})
    del state.interviews[:-MAX_INTERVIEWS]
