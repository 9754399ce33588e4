"""The worked derivation after a pass (issue 31 §4): shown by the first pass of an
exercise, not by later ones, and by `trainer explain` any time after a pass."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CATALOG, REPO, run_cli
from trainer import console
from trainer.explain import (
    Derivation,
    NotPassedYet,
    after_check,
    derivation_of,
    explanation,
    first_pass_derivation,
    is_first_pass,
)
from trainer.interview import record_check
from trainer.spec import Exercise
from trainer.state import Progress, StateStore

SIGMOID = CATALOG.get("sigmoid")
SOLUTION = (REPO / "solutions" / "sigmoid.py").read_text()
TITLE = "How the gradient is derived: sigmoid"


@pytest.fixture
def store(isolated_workspace: Path) -> StateStore:
    isolated_workspace.mkdir()
    return StateStore(isolated_workspace)


def _without(exercise_id: str = "sigmoid") -> Exercise:
    """A copy of the exercise, its derivation taken away (the catalogue's is untouched)."""
    return dataclasses.replace(CATALOG.get(exercise_id), derivation="")


# The core: first pass, later pass -----------------------------------------------------


def test_the_first_pass_carries_the_derivation_and_a_later_pass_only_says_where_it_is(
    store: StateStore,
):
    record_check(store, "sigmoid", False, "no_grad_output")
    assert after_check(store, SIGMOID, passed=False) is None

    record_check(store, "sigmoid", True)
    first = after_check(store, SIGMOID, passed=True)
    assert first is not None and first.first_pass
    assert first.derivation == derivation_of(SIGMOID)
    assert first_pass_derivation(store, SIGMOID, True) == SIGMOID.derivation.strip()

    record_check(store, "sigmoid", True)
    later = after_check(store, SIGMOID, passed=True)
    assert later is not None and not later.first_pass and later.derivation is None
    assert first_pass_derivation(store, SIGMOID, True) is None


def test_a_pass_after_failed_checks_is_still_the_first_pass():
    progress = Progress(passed=True, checks=4, checks_to_pass=4)
    assert is_first_pass(progress)
    assert not is_first_pass(Progress(passed=True, checks=5, checks_to_pass=4))


def test_an_exercise_passed_by_an_older_version_has_had_its_first_pass():
    # The study record's count of checks to the first pass is unknown there.
    assert not is_first_pass(Progress(passed=True, checks=3, checks_to_pass=None))


def test_a_pass_without_a_workspace_records_nothing_and_shows_no_derivation(
    isolated_workspace: Path,
):
    assert after_check(StateStore(isolated_workspace), SIGMOID, passed=True) is None
    assert not isolated_workspace.exists()


def test_an_exercise_without_a_derivation_has_nothing_to_show_after_a_pass(store: StateStore):
    bare = _without()
    record_check(store, "sigmoid", True)
    assert derivation_of(bare) is None
    assert after_check(store, bare, passed=True) is None


def test_the_derivation_is_refused_before_a_pass_unless_forced(store: StateStore):
    with pytest.raises(NotPassedYet) as refused:
        explanation(SIGMOID, store)
    assert "you have not passed `sigmoid` yet" in refused.value.message
    assert "`trainer hint sigmoid`" in refused.value.message
    early = explanation(SIGMOID, store, force=True)
    assert early.passed is False and early.text == SIGMOID.derivation.strip()
    record_check(store, "sigmoid", True)
    assert explanation(SIGMOID, store).passed is True


def test_every_derivation_of_the_catalogue_is_text_without_the_reference_s_code():
    for exercise in CATALOG.all:
        shown = derivation_of(exercise)
        assert shown is not None, exercise.id
        solution = CATALOG.solution_path(exercise).read_text(encoding="utf-8")
        code = [
            line.strip()
            for line in solution.splitlines()
            if line.strip().startswith(("return ", "grad")) and len(line.strip()) > 12
        ]
        assert code, exercise.id
        for line in code:
            assert line not in shown.text, (exercise.id, line)


# What the console draws --------------------------------------------------------------------


def test_the_derivation_is_drawn_in_a_box_at_80_columns_and_plain_where_a_line_would_not_fit():
    shown = Derivation("sigmoid", SIGMOID.title, SIGMOID.derivation.strip())
    with console.captured(80) as boxed:
        console.derivation(shown)
    lines = boxed.getvalue().splitlines()
    assert lines[0].startswith("╭─ " + TITLE)
    assert all(len(line) <= 80 for line in lines)
    assert "│   ∂L/∂x = g ⊙ y ⊙ (1 − y)." in boxed.getvalue()
    with console.captured(50) as narrow:
        console.derivation(shown)
    text = narrow.getvalue()
    assert text.startswith(TITLE + "\n") and "╭" not in text
    for line in shown.text.splitlines():  # whole lines: the terminal wraps them, nothing is cut
        assert line in text


# The command line ------------------------------------------------------------------------


def test_explain_before_a_pass_says_so_points_to_the_hints_and_records_nothing(
    isolated_workspace: Path,
):
    assert run_cli("start", "sigmoid").exit_code == 0
    result = run_cli("explain")
    assert result.exit_code == 2
    assert "you have not passed `sigmoid` yet" in result.stderr
    assert "`trainer hint sigmoid` reveals the next hint" in result.stderr
    assert "`trainer explain sigmoid --force`" in result.stderr
    assert TITLE not in result.stdout
    state = json.loads((isolated_workspace / ".trainer-state.json").read_text())
    assert state["exercises"]["sigmoid"]["hints_shown"] == 0


def test_explain_with_force_before_a_pass_shows_it_and_counts_every_hint_as_seen(
    isolated_workspace: Path,
):
    assert run_cli("start", "sigmoid").exit_code == 0
    result = run_cli("explain", "sigmoid", "--force")
    assert result.exit_code == 0
    assert TITLE + " (not passed yet)" in result.stdout
    state = json.loads((isolated_workspace / ".trainer-state.json").read_text())
    progress = state["exercises"]["sigmoid"]
    assert progress["hints_shown"] == len(SIGMOID.hints)
    assert progress["solution_seen"] is False  # the derivation has no code


def test_explain_after_a_pass_shows_the_current_exercise_s_derivation_and_no_code(
    isolated_workspace: Path,
):
    assert run_cli("start", "sigmoid").exit_code == 0
    record_check(StateStore(isolated_workspace), "sigmoid", True)
    result = run_cli("explain")
    assert result.exit_code == 0, result.stderr
    assert TITLE in result.stdout and "(not passed yet)" not in result.stdout
    assert "∂L/∂x = g ⊙ y ⊙ (1 − y)." in result.stdout
    assert "return grad_output" not in result.stdout and "saved_tensors" not in result.stdout
    state = json.loads((isolated_workspace / ".trainer-state.json").read_text())
    assert state["exercises"]["sigmoid"]["hints_shown"] == 0


def test_explain_of_an_exercise_without_a_derivation_says_so_and_points_to_the_solution(
    monkeypatch: pytest.MonkeyPatch,
):
    from trainer.session import Session

    bare = _without("relu")
    monkeypatch.setattr(Session, "exercise", lambda self, exercise_id: bare)
    result = run_cli("explain", "relu", "--force")
    assert result.exit_code == 2
    assert "`relu` has no worked derivation" in result.stderr
    assert "`trainer solution relu`" in result.stderr


@pytest.mark.usefixtures("warm_commands")
def test_check_shows_the_derivation_on_the_first_pass_and_on_later_passes_where_it_is(
    isolated_workspace: Path,
):
    """End to end: `trainer check` of a right file, twice."""
    assert run_cli("start", "sigmoid").exit_code == 0
    (isolated_workspace / "sigmoid.py").write_text(SOLUTION)
    first = run_cli("check")
    assert first.exit_code == 0, first.stdout
    assert TITLE in first.stdout
    assert "∂L/∂x = g ⊙ y ⊙ (1 − y)." in first.stdout
    # Under the report's summary, before what to do next.
    passed_at = first.stdout.index("stages passed")
    assert passed_at < first.stdout.index(TITLE) < first.stdout.index("trainer quiz sigmoid")
    assert "See it again: trainer explain sigmoid" in first.stdout

    again = run_cli("check")
    assert again.exit_code == 0, again.stdout
    assert TITLE not in again.stdout
    assert "See it again: trainer explain sigmoid" in again.stdout


@pytest.mark.usefixtures("warm_commands")
def test_a_failed_check_says_nothing_of_the_derivation(isolated_workspace: Path):
    assert run_cli("start", "sigmoid").exit_code == 0
    result = run_cli("check")  # the untouched stub
    assert result.exit_code == 1
    assert TITLE not in result.stdout and "trainer explain" not in result.stdout


# Python and the notebook --------------------------------------------------------------------


@pytest.fixture
def api_server(warm_commands: None) -> Iterator[None]:
    from trainer.api import close_service

    yield
    close_service()


@pytest.mark.usefixtures("api_server")
def test_the_check_api_carries_the_derivation_on_the_first_pass_only(isolated_workspace: Path):
    from trainer import check

    isolated_workspace.mkdir()
    first = check("sigmoid", SOLUTION)
    assert first.passed and first.derivation == SIGMOID.derivation.strip()
    again = check("sigmoid", SOLUTION)
    assert again.passed and again.derivation is None


@pytest.mark.usefixtures("api_server")
def test_a_notebook_check_shows_the_derivation_under_the_report_on_the_first_pass(
    isolated_workspace: Path,
):
    from tests.test_notebook import FakeShell
    from trainer.api import Report
    from trainer.notebook import TrainerMagics, parse
    from trainer.notebook_view import Shown

    shown: list[object] = []
    magic = TrainerMagics(FakeShell(), display=shown.append)
    first = magic.run(parse("check sigmoid", cell=True), SOLUTION)
    assert first is not None and first.passed
    last = shown[-1]
    assert isinstance(last, Shown) and last.html is not None
    assert TITLE in last.text and "<pre>" in last.html
    shown.clear()
    magic.run(parse("check sigmoid", cell=True), SOLUTION)
    assert not [s for s in shown if isinstance(s, Shown) and TITLE in s.text]
    assert any(isinstance(s, Report) for s in shown)
