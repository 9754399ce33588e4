"""A study plan: the exercises in an order that respects every ``requires``, the
interview core first, spread over the days left from the learner's progress.

The plan kept in progress (``State.plan``) is its settings and its order; the
days are worked out afresh each time (:func:`schedule`): what is passed is
marked on the day it was passed, and what is left is packed from today on,
:data:`DIFFICULTY_MINUTES` per exercise, up to the hours of each day. A learner
who falls behind or runs ahead sees the rest of the plan move with them.
docs/study-plan.md says which exercises are the core and why.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from trainer import history
from trainer.errors import TrainerError
from trainer.spec import Exercise
from trainer.state import State

# What an exercise of each level of the difficulty rubric (docs/spec-format.md) takes
# a learner who knows the calculus: reading, writing, a few failed checks and the quiz.
DIFFICULTY_MINUTES = {"easy": 20, "medium": 30, "hard": 45, "expert": 75}

# The backward passes interviews ask for most, in the order they build on each other
# (docs/study-plan.md says why each).
INTERVIEW_CORE = (
    "sigmoid",
    "relu",
    "linear",
    "mse_loss",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "layer_norm",
    "batch_norm",
    "attention",
)
DEFAULT_DAYS = 14
DEFAULT_HOURS = 2.0


def minutes_of(exercise: Exercise) -> int:
    return DIFFICULTY_MINUTES.get(exercise.difficulty, 45)


def _with_prerequisites(chosen: set[str], by_id: dict[str, Exercise]) -> set[str]:
    found: set[str] = set()
    todo = list(chosen)
    while todo:
        exercise_id = todo.pop()
        if exercise_id in found or exercise_id not in by_id:
            continue
        found.add(exercise_id)
        todo += by_id[exercise_id].requires
    return found


def core_of(exercises: Sequence[Exercise]) -> set[str]:
    """The interview core among ``exercises``, with everything it requires."""
    by_id = {e.id: e for e in exercises}
    return _with_prerequisites({i for i in INTERVIEW_CORE if i in by_id}, by_id)


def plan_order(catalogue: Sequence[Exercise], track: str | None = None) -> list[str]:
    """The exercises of the plan (of one track, with what they require from others),
    the interview core first, each after everything it requires; otherwise in the
    order of ``trainer list``."""
    by_id = {e.id: e for e in catalogue}
    chosen = {e.id for e in catalogue if track is None or e.track == track}
    included = _with_prerequisites(chosen, by_id)
    core = core_of(catalogue) & included
    position = {e.id: index for index, e in enumerate(catalogue)}
    waiting = {i: {r for r in by_id[i].requires if r in included} for i in included}

    def key(exercise_id: str) -> tuple[int, int]:
        return (exercise_id not in core, position[exercise_id])

    ready = [(key(i), i) for i in included if not waiting[i]]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, exercise_id = heapq.heappop(ready)
        order.append(exercise_id)
        for other, needs in waiting.items():
            if exercise_id in needs:
                needs.discard(exercise_id)
                if not needs:
                    heapq.heappush(ready, (key(other), other))
    return order + sorted(included - set(order), key=key)  # a cycle: last, as listed


def make_plan(
    catalogue: Sequence[Exercise], days: int, hours: float, track: str | None
) -> dict[str, Any]:
    """A new plan starting today (what ``State.plan`` keeps)."""
    if days < 1 or hours <= 0:
        raise TrainerError("a plan needs at least 1 day and some hours a day.")
    now = history.CLOCK()
    return {
        "made": now,
        "start": history.date_of(now),
        "days": days,
        "hours": hours,
        "track": track,
        "order": plan_order(catalogue, track),
    }


@dataclass
class PlanDay:
    number: int  # 1-based
    day: str  # YYYY-MM-DD
    done: list[str] = field(default_factory=list)  # passed on that day
    todo: list[str] = field(default_factory=list)  # planned, not passed yet
    minutes: int = 0  # the estimate of what is planned on it, done or not


@dataclass
class Schedule:
    start: str
    end: str
    days: list[PlanDay]
    hours: float
    track: str | None
    core: list[str]  # the core exercises in the plan, in plan order
    today: int | None  # the number of today's day, None before or after the plan
    done_before: list[str]  # passed before the plan began
    left_over: list[str]  # what does not fit in the days left
    left_over_minutes: int
    next_up: str | None  # the first exercise of the plan not passed yet
    total: int

    @property
    def passed(self) -> int:
        return len(self.done_before) + sum(len(d.done) for d in self.days)

    def today_work(self) -> PlanDay | None:
        return self.days[self.today - 1] if self.today is not None else None


def schedule(plan: dict[str, Any], state: State, catalogue: Sequence[Exercise]) -> Schedule:
    """The days of ``plan`` at the clock's time, from the learner's progress."""
    by_id = {e.id: e for e in catalogue}
    order = [i for i in plan.get("order", []) if i in by_id]
    start = date.fromisoformat(str(plan["start"]))
    count = max(int(plan.get("days", DEFAULT_DAYS)), 1)
    capacity = max(int(float(plan.get("hours", DEFAULT_HOURS)) * 60), 1)
    today = date.fromisoformat(history.date_of(history.CLOCK()))
    days = [PlanDay(n + 1, (start + timedelta(days=n)).isoformat()) for n in range(count)]
    done_before: list[str] = []
    todo: list[str] = []
    for exercise_id in order:
        progress = state.exercises.get(exercise_id)
        if progress is None or not progress.passed:
            todo.append(exercise_id)
            continue
        when = progress.passed_at
        index = (date.fromisoformat(history.date_of(when)) - start).days if when else -1
        if 0 <= index < count:
            days[index].done.append(exercise_id)
            days[index].minutes += minutes_of(by_id[exercise_id])
        elif index >= count:
            days[-1].done.append(exercise_id)
        else:
            done_before.append(exercise_id)
    first = max((today - start).days, 0)
    left_over: list[str] = []
    day = first
    for exercise_id in todo:
        minutes = minutes_of(by_id[exercise_id])
        while day < count and days[day].minutes and days[day].minutes + minutes > capacity:
            day += 1
        if day >= count:
            left_over.append(exercise_id)
            continue
        days[day].todo.append(exercise_id)
        days[day].minutes += minutes
    number = (today - start).days + 1
    core = set(core_of(catalogue))
    return Schedule(
        start=start.isoformat(),
        end=days[-1].day,
        days=days,
        hours=capacity / 60,
        track=plan.get("track"),
        core=[i for i in order if i in core],
        today=number if 1 <= number <= count else None,
        done_before=done_before,
        left_over=left_over,
        left_over_minutes=sum(minutes_of(by_id[i]) for i in left_over),
        next_up=todo[0] if todo else None,
        total=len(order),
    )


def next_in_plan(state: State, catalogue: Sequence[Exercise]) -> str | None:
    """The first exercise of the plan not passed yet (None without a plan, or when
    every exercise of it is passed)."""
    if state.plan is None:
        return None
    known = {e.id for e in catalogue}
    for exercise_id in state.plan.get("order", []):
        if exercise_id in known:
            progress = state.exercises.get(exercise_id)
            if progress is None or not progress.passed:
                return str(exercise_id)
    return None
