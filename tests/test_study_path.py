"""Issue 32's "done when": forty days of study on a fake clock (tests/study_history.py),
then what `stats`, `review`, `plan` and `next` say on day 41."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

import trainer.history
import trainer.interview
from tests import study_history
from tests.conftest import CATALOG, run_cli
from trainer.review import agenda
from trainer.state import StateStore
from trainer.study_plan import schedule

T0 = 1_760_000_000.0


@pytest.fixture
def forty_days(isolated_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> StateStore:
    now = [T0]
    monkeypatch.setattr(trainer.history, "CLOCK", lambda: now[0])
    monkeypatch.setattr(trainer.interview, "CLOCK", lambda: now[0])

    def set_clock(moment: float) -> None:
        now[0] = moment

    study_history.build(isolated_workspace, set_clock, T0)
    return StateStore(isolated_workspace)


def _said(result_text: str) -> str:
    return " ".join(result_text.split())


def test_forty_days_of_study_give_the_stats_review_plan_and_next_they_should(
    forty_days: StateStore, isolated_workspace: Path
):
    state = forty_days.load()
    passed = sorted(i for i, p in state.exercises.items() if p.passed)
    assert len(passed) == 18

    stats = _said(run_cli("stats").stdout)
    assert f"Passed 18 of {len(CATALOG.all)} exercises." in stats
    assert "Streak: 5 days (longest 6 days)." in stats
    assert "Per pass: 2.4 checks and 0.0 hints." in stats  # reviews' checks are not counted
    assert "Reviews: 51 clean, 22 failed." in stats
    assert "linear: passed in 25 min of 40 min" in stats
    assert "layer_norm: time up (40 min)" in stats
    assert "backward does not multiply by grad_output: 10 times in 9 exercises" in stats
    assert "the gradient is transposed: 6 times in 6 exercises" in stats
    assert "practise: concepts quiz question 2 (trainer quiz concepts)" in stats

    due = agenda(state, CATALOG.all).exercises
    first = due[0].exercise.id
    scratch = isolated_workspace / f"{first}.py"
    before = hashlib.sha256(scratch.read_bytes()).hexdigest()
    review = _said(run_cli("review").stdout)
    assert f"Review of {first}, from a fresh stub in" in review
    assert f"Also due: {', '.join(d.exercise.id for d in due[1:])}." in review
    assert hashlib.sha256(scratch.read_bytes()).hexdigest() == before
    assert (isolated_workspace / "review" / f"{first}.py").is_file()

    plan_state = forty_days.load()
    assert plan_state.plan is not None
    days = schedule(plan_state.plan, plan_state, CATALOG.all)
    plan = _said(run_cli("plan").stdout)
    assert (
        "Your study plan: 60 days" in plan and f"18 of {len(CATALOG.all)} exercises passed" in plan
    )
    assert plan.count("✓ ") == 18 + 1  # and the heading "Exercises (✓ passed)"
    assert days.next_up is not None and days.today == 41
    today = ", ".join(days.days[40].todo)
    assert f"Today, day 41 of 60: {today}" in plan

    listed = _said(run_cli("list").stdout)
    assert f"Due for review: {', '.join(d.exercise.id for d in due)}" in listed

    result = run_cli("next")
    assert f"Following your study plan (`trainer plan`): `{days.next_up}` is next." in _said(
        result.stderr
    )
    assert forty_days.load().current == days.next_up


def test_the_readme_shows_plan_review_and_stats_captured_at_80_columns():
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Two weeks before an interview") :]
    section = section[: section.index("## What a check does")]
    blocks = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    shown = "".join(blocks)
    for command in ("$ trainer plan", "$ trainer stats", "$ trainer review", "$ trainer next"):
        assert command in shown
    for line in shown.splitlines():
        assert len(line) <= 80, line
