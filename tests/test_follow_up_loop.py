"""The follow-up loop beyond `check` and `followup` (issue 31 §2): `trainer list` counts
the follow-ups passed, the interview asks one after a pass, and the notebook and the
`check()` API do what the command line does."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CATALOG
from trainer import console
from trainer.state import State, StateStore


def _follow_up_passed(workspace: Path) -> State:
    workspace.mkdir(exist_ok=True)
    with StateStore(workspace).update() as state:
        state.current = "softmax"
        progress = state.progress("softmax")
        progress.passed = True
        progress.follow_ups_passed = ["no_jacobian"]
    return StateStore(workspace).load()


# trainer list ---------------------------------------------------------------------------


def _line_of(text: str, exercise: str) -> str:
    (line,) = [line for line in text.splitlines() if re.search(rf"\s{exercise}\s", line + " ")]
    return line


def test_list_shows_how_many_follow_ups_are_passed_of_how_many_at_80_columns(
    isolated_workspace: Path,
):
    state = _follow_up_passed(isolated_workspace)
    with console.captured(80) as shown:
        console.exercise_list(CATALOG.all, state, isolated_workspace)
    text = shown.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.splitlines()[0].split()[-1] == "F-ups"
    assert _line_of(text, "softmax").endswith("passed     0/3      –  –       1/2")
    assert _line_of(text, "tanh").endswith(f"0/{len(CATALOG.get('tanh').follow_ups)}")
    assert _line_of(text, "relu").endswith("–  –")  # no follow-ups: nothing to count


@pytest.fixture
def short_terminal() -> Iterator[io.StringIO]:
    """`console.out` as a terminal of 80 × 40: too short for a line per exercise."""
    from rich.console import Console

    buffer = io.StringIO()
    saved = console.out._console
    console.out._console = Console(
        file=buffer, width=80, height=40, force_terminal=True, color_system=None
    )
    try:
        yield buffer
    finally:
        console.out._console = saved


def test_the_list_on_a_short_terminal_counts_the_follow_ups_of_a_passed_exercise(
    isolated_workspace: Path, short_terminal: io.StringIO
):
    state = _follow_up_passed(isolated_workspace)
    console.exercise_list(CATALOG.all, state, isolated_workspace)
    text = short_terminal.getvalue()
    assert "✔ passed, 1/2 follow-ups, ○ started, seen: solution, → current" in text
    assert "→ softmax ✔ 1/2" in text
    assert "sigmoid ✔" not in text and "sigmoid 0/" not in text  # not passed: no count yet


def test_the_notebook_list_has_a_follow_ups_column(isolated_workspace: Path):
    from trainer.notebook_view import exercise_list

    table, _ = exercise_list(CATALOG.all, _follow_up_passed(isolated_workspace))
    assert "<th" in (table.html or "") and ">Follow-ups</th>" in (table.html or "")
    row = _line_of(table.text, "softmax")
    assert re.search(r"✔ passed\s+1/2\s+0/3", row), row
    assert "1/2" in _line_of(table.text, "softmax") and "/2" not in _line_of(table.text, "relu")
