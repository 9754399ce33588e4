"""`trainer plan` (issue 32): an order that respects every `requires:`, the interview
core first, spread over the days from progress and difficulty; `next` follows it."""

from __future__ import annotations

from pathlib import Path

import pytest

import trainer.history
import trainer.interview
from tests.conftest import CATALOG, run_cli
from trainer import console, interview
from trainer.state import State, StateStore
from trainer.study_plan import (
    DIFFICULTY_MINUTES,
    INTERVIEW_CORE,
    core_of,
    make_plan,
    plan_order,
    schedule,
)

DAY = 86400.0
T0 = 1_760_000_000.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [T0]
    monkeypatch.setattr(trainer.history, "CLOCK", lambda: now[0])
    monkeypatch.setattr(trainer.interview, "CLOCK", lambda: now[0])
    return now


@pytest.mark.parametrize("track", [None, "losses", "attention", "function_api"])
def test_the_plan_puts_each_exercise_after_what_it_requires_and_the_core_first(track):
    order = plan_order(CATALOG.all, track)
    by_id = {e.id: e for e in CATALOG.all}
    for index, exercise_id in enumerate(order):
        assert set(by_id[exercise_id].requires) <= set(order[:index]), exercise_id
    core = core_of(CATALOG.all) & set(order)
    assert set(order[: len(core)]) == core
    if track is not None:
        assert all(by_id[i].track == track or i in _required(track) for i in order)


def _required(track: str) -> set[str]:
    by_id = {e.id: e for e in CATALOG.all}
    found: set[str] = set()
    todo = [r for e in CATALOG.all if e.track == track for r in e.requires]
    while todo:
        found.add(todo[-1])
        todo += by_id[todo.pop()].requires
    return found


def test_every_exercise_of_the_interview_core_is_in_the_catalogue():
    assert set(INTERVIEW_CORE) <= set(CATALOG.ids())


def test_the_plan_spreads_the_exercises_over_the_days_within_the_hours(clock: list[float]):
    plan = make_plan(CATALOG.all, 14, 2.0, None)
    days = schedule(plan, State(), CATALOG.all)
    placed = [i for d in days.days for i in d.todo]
    assert placed + days.left_over == plan["order"]
    for day in days.days:
        assert day.minutes <= 120 or len(day.todo) == 1
    cramped = schedule(make_plan(CATALOG.all, 2, 1.0, None), State(), CATALOG.all)
    assert cramped.left_over and cramped.left_over_minutes == sum(
        DIFFICULTY_MINUTES[CATALOG.get(i).difficulty] for i in cramped.left_over
    )


def test_passes_are_marked_on_their_day_and_what_is_left_moves_to_today(
    isolated_workspace: Path, clock: list[float]
):
    isolated_workspace.mkdir()
    store = StateStore(isolated_workspace)
    with store.update() as state:
        state.plan = make_plan(CATALOG.all, 10, 1.0, None)
    first, second = state.plan["order"][:2]
    interview.record_check(store, first, True)
    clock[0] += 2 * DAY
    days = schedule(store.load().plan or {}, store.load(), CATALOG.all)
    assert days.days[0].done == [first] and days.today == 3
    assert days.days[1].todo == [] and days.days[2].todo[0] == second
    assert days.next_up == second
    with console.captured(80) as shown:
        console.study_plan(days)
    lines = shown.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.startswith(" →   3") and second in line for line in lines)
    assert any(f"✓ {first}" in line for line in lines)
    assert f"Today, day 3 of 10: {second}" in " ".join(shown.getvalue().split())


def test_plan_without_options_shows_the_plan_made_and_with_options_makes_another(
    clock: list[float],
):
    made = run_cli("plan", "--days", "5", "--hours-per-day", "3", "--track", "losses")
    assert made.exit_code == 0, made.stderr
    assert "Made a study plan: 5 days" in made.stdout and "3 hours a day" in made.stdout
    clock[0] += DAY
    shown = run_cli("plan")
    assert "Your study plan: 5 days" in shown.stdout and "Today, day 2 of 5" in shown.stdout
    assert "Made a study plan: 14 days" in run_cli("plan", "--days", "14").stdout


def test_next_follows_the_plan_and_the_list_again_once_it_is_cleared(
    isolated_workspace: Path, clock: list[float]
):
    assert run_cli("start", "sigmoid").exit_code == 0
    interview.record_check(StateStore(isolated_workspace), "sigmoid", True)
    in_plan = next(i for i in plan_order(CATALOG.all, "losses") if i != "sigmoid")
    in_list = next(e.id for e in CATALOG.all if e.id != "sigmoid")
    assert in_plan != in_list  # the test tells the two orders apart
    assert run_cli("plan", "--track", "losses").exit_code == 0
    result = run_cli("next")
    assert f"Following your study plan (`trainer plan`): `{in_plan}` is next." in result.stderr
    assert StateStore(isolated_workspace).load().current == in_plan
    assert "The study plan is cleared" in run_cli("plan", "--clear").stdout
    run_cli("next")
    assert StateStore(isolated_workspace).load().current == in_list


def test_a_plan_for_an_unknown_track_is_refused():
    result = run_cli("plan", "--track", "poetry")
    assert result.exit_code == 2 and "'poetry' is not a track" in result.stderr
