"""`trainer stats` and the study record it reads (issue 32): each check's diagnosis,
bounded and readable by the version before it."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

import trainer.history
import trainer.interview
from tests.conftest import CATALOG, REPO, run_cli
from trainer import history, interview
from trainer.charts import stats_text
from trainer.state import MAX_DAYS, MAX_DIAGNOSES, State, StateStore, parse_state
from trainer.stats import compute

PREVIOUS = REPO / "tests" / "snapshots" / "state_before_the_study_record.py.txt"
DAY = 86400.0
T0 = 1_760_000_000.0  # a Thursday in October 2025, noon UTC give or take


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [T0]
    monkeypatch.setattr(trainer.history, "CLOCK", lambda: now[0])
    monkeypatch.setattr(trainer.interview, "CLOCK", lambda: now[0])
    return now


def _previous_state_module() -> types.ModuleType:
    """trainer/state.py as it was before the study record (the last released reader)."""
    module = types.ModuleType("previous_state")
    sys.modules["previous_state"] = module  # dataclasses look their module up
    try:
        exec(compile(PREVIOUS.read_text(), str(PREVIOUS), "exec"), module.__dict__)
    finally:
        del sys.modules["previous_state"]
    return module


def _store(tmp_path: Path) -> StateStore:
    tmp_path.mkdir(exist_ok=True)
    return StateStore(tmp_path)


def test_a_failed_check_counts_its_diagnosis_and_a_pass_its_time_in_progress(
    tmp_path: Path, clock: list[float]
):
    store = _store(tmp_path / "ws")
    with store.update() as state:
        history.mark_started(state, "sigmoid")
    clock[0] += 600
    interview.record_check(store, "sigmoid", False, "no_grad_output")
    interview.record_check(store, "sigmoid", False, "no_grad_output")
    interview.record_check(store, "sigmoid", False, "stage:load")
    clock[0] += 300
    interview.record_check(store, "sigmoid", True, None)
    progress = store.load().exercises["sigmoid"]
    assert progress.diagnoses == {"no_grad_output": 2, "stage:load": 1}
    assert progress.passed_at is not None and progress.started_at is not None
    assert progress.passed_at - progress.started_at == 900
    assert store.load().days == {history.date_of(T0): 4}


def test_the_diagnosis_of_a_check_is_its_first_failures_mistake_else_its_stage():
    from trainer.checking.report import CheckReport, StageResult, Verdict

    named = StageResult("backward", Verdict.FAIL, "wrong", diagnosis={"mistake": "sign_flipped"})
    unnamed = StageResult("load", Verdict.FAIL, "SyntaxError")
    passed = StageResult("load", Verdict.PASS, "ok")
    assert history.diagnosis_of(CheckReport("relu", "r.py", "0", 0, [passed, named])) == (
        "sign_flipped"
    )
    assert history.diagnosis_of(CheckReport("relu", "r.py", "0", 0, [unnamed])) == "stage:load"
    assert history.diagnosis_of(CheckReport("relu", "r.py", "0", 0, [passed])) is None


def test_the_study_record_stays_bounded_however_long_it_is_used(tmp_path: Path):
    state = State()
    for day in range(MAX_DAYS + 50):
        state.days[f"day-{day:04d}"] = 1
    for number in range(MAX_DIAGNOSES + 10):
        state.progress("relu").diagnoses[f"mistake_{number}"] = 1
    for _ in range(150):
        history.record_interview(state, {"exercise": "relu", "reason": "passed"})
    loaded = parse_state(state.to_json())
    assert len(loaded.days) == MAX_DAYS and "day-0449" in loaded.days
    assert len(loaded.exercises["relu"].diagnoses) == MAX_DIAGNOSES
    assert len(loaded.interviews) == 100


def test_a_progress_file_written_by_this_version_loads_in_the_previous_one(
    tmp_path: Path, clock: list[float]
):
    previous = _previous_state_module()
    store = _store(tmp_path / "ws")
    with store.update() as state:
        history.mark_started(state, "linear")
        state.current = "linear"
    interview.record_check(store, "linear", False, "transposed")
    interview.record_check(store, "linear", True, None)
    text = (tmp_path / "ws" / ".trainer-state.json").read_text()
    assert '"diagnoses"' in text and '"days"' in text
    old = previous.parse_state(text)
    assert old.current == "linear"
    assert old.exercises["linear"].passed and old.exercises["linear"].checks == 2


def test_a_progress_file_of_the_previous_version_loads_in_this_one(tmp_path: Path):
    previous = _previous_state_module()
    old = previous.State(current="relu")
    old.progress("relu").passed = True
    old.progress("relu").checks = 3
    old.progress("relu").hints_shown = 1
    state = parse_state(old.to_json())
    assert state.current == "relu"
    assert state.exercises["relu"].passed and state.exercises["relu"].checks == 3
    assert state.exercises["relu"].diagnoses == {} and state.days == {}


def test_a_study_field_of_another_shape_is_dropped_not_taken_for_damage():
    text = json.dumps(
        {
            "version": 1,
            "current": "relu",
            "exercises": {"relu": {"passed": True, "diagnoses": ["x"], "passed_at": "soon"}},
            "days": "many",
            "plan": [1],
        }
    )
    state = parse_state(text)
    assert state.exercises["relu"].passed and state.exercises["relu"].diagnoses == {}
    assert state.exercises["relu"].passed_at is None and state.days == {} and state.plan is None


def _history(store: StateStore, clock: list[float]) -> None:
    """Three exercises that forget grad_output, one with a sign flipped, over three days."""
    for exercise, mistakes in (
        ("sigmoid", ["no_grad_output", "no_grad_output"]),
        ("silu", ["no_grad_output", "sign_flipped"]),
        ("tanh", ["no_grad_output"]),
    ):
        with store.update() as state:
            history.mark_started(state, exercise)
        for mistake in mistakes:
            clock[0] += 600
            interview.record_check(store, exercise, False, mistake)
        clock[0] += 600
        interview.record_check(store, exercise, True, None)
        clock[0] += DAY


def test_weak_spots_count_a_diagnosis_across_exercises_and_point_to_practice(
    tmp_path: Path, clock: list[float]
):
    store = _store(tmp_path / "ws")
    _history(store, clock)
    stats = compute(store.load(), CATALOG.all, CATALOG.shared_quiz("concepts"), now=clock[0])
    first = stats.weak_spots[0]
    assert (first.diagnosis, first.times, first.exercises) == ("no_grad_output", 4, 3)
    assert first.words == "backward does not multiply by grad_output"
    assert first.question == 2  # "A backward ... forgets grad_output": the concepts quiz
    assert first.exercise is not None and first.exercise not in ("sigmoid", "silu", "tanh")
    text = "\n".join(stats_text(stats, 80))
    assert "backward does not multiply by grad_output: 4 times in 3 exercises" in text
    assert "concepts quiz question 2" in text


def test_stats_count_completion_per_track_the_streak_and_time_per_exercise(
    tmp_path: Path, clock: list[float]
):
    store = _store(tmp_path / "ws")
    _history(store, clock)
    stats = compute(store.load(), CATALOG.all, now=clock[0])
    activations = next(t for t in stats.tracks if t.title == "Activations")
    assert activations.passed == 3
    assert (stats.streak, stats.longest_streak) == (3, 3)
    assert stats.checks_per_pass == pytest.approx(8 / 3)
    assert dict(stats.times) == {"sigmoid": 1800, "silu": 1800, "tanh": 1200}
    later = compute(store.load(), CATALOG.all, now=clock[0] + 3 * DAY)
    assert (later.streak, later.longest_streak) == (0, 3)


def test_an_interview_result_is_kept_with_its_day(tmp_path: Path, clock: list[float]):
    store = _store(tmp_path / "ws")
    interview.begin(store, CATALOG.get("relu"), 40.0)
    clock[0] += 300
    interview.record_check(store, "relu", True, None)
    stats = compute(store.load(), CATALOG.all, now=clock[0])
    assert [(i.exercise, i.passed, i.seconds) for i in stats.interviews] == [("relu", True, 300.0)]
    assert "relu: passed in 5 min of 40 min" in "\n".join(stats_text(stats, 80))


def test_stats_command_shows_charts_and_weak_spots_within_80_columns(
    isolated_workspace: Path, clock: list[float]
):
    isolated_workspace.mkdir()
    _history(StateStore(isolated_workspace), clock)
    lines = stats_text(
        compute(StateStore(isolated_workspace).load(), CATALOG.all, now=clock[0]), 80
    )
    assert max(len(line) for line in lines) <= 80
    result = run_cli("stats")
    assert result.exit_code == 0
    for words in ("Passed 3 of", "Checks per day", "Streak:", "Weak spots", "Activations"):
        assert words in result.stdout


def test_stats_of_a_fresh_workspace_say_where_to_begin():
    result = run_cli("stats")
    assert result.exit_code == 0
    assert "No checks yet: `trainer next` starts the first exercise." in result.stdout


def test_the_notebook_shows_the_same_stats_as_the_command(
    isolated_workspace: Path, clock: list[float]
):
    from tests.test_notebook import FakeShell
    from trainer.notebook import TrainerMagics
    from trainer.notebook_view import WIDTH

    isolated_workspace.mkdir()
    _history(StateStore(isolated_workspace), clock)
    shown: list[object] = []
    TrainerMagics(FakeShell(), display=shown.append).trainer("stats")
    concepts = CATALOG.shared_quiz("concepts")
    expected = stats_text(
        compute(StateStore(isolated_workspace).load(), CATALOG.all, concepts), WIDTH
    )
    assert repr(shown[0]) == "\n".join(expected)
    assert "Weak spots" in repr(shown[0]) and "<pre>" in (getattr(shown[0], "html", "") or "")


def test_a_real_failed_check_records_the_mistake_the_report_names(
    warm_commands: None, isolated_workspace: Path
):
    assert run_cli("start", "sigmoid").exit_code == 0
    wrong = REPO / "solutions" / "wrong" / "sigmoid" / "forgets_grad_output.py"
    (isolated_workspace / "sigmoid.py").write_text(wrong.read_text())
    assert run_cli("check", "sigmoid").exit_code == 1
    progress = StateStore(isolated_workspace).load().exercises["sigmoid"]
    assert progress.diagnoses == {"no_grad_output": 1}


def test_every_weak_spot_pointer_finds_its_question_in_the_concepts_quiz():
    from trainer.stats import CONCEPT_QUESTIONS

    concepts = CATALOG.shared_quiz("concepts")
    assert concepts is not None
    for mistake, words in CONCEPT_QUESTIONS.items():
        assert any(words in q.question for q in concepts.quiz), mistake
