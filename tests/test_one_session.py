"""One core session (trainer/session.py) for the CLI, the notebook's magics and the Python
API: it returns data and prints nothing, and each edge shows what it noticed."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import trainer.history
from tests.conftest import REPO, run_cli
from trainer import interview as interviews
from trainer.errors import WorkspaceError
from trainer.notebook import TrainerMagics
from trainer.notebook_view import Shown
from trainer.session import Session

PACKAGE = REPO / "trainer"


def test_the_package_has_one_session_class_and_the_cli_the_magics_and_the_api_all_use_it():
    defined = [
        path.relative_to(REPO).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name == "Session"
    ]
    assert defined == ["trainer/session.py"]
    import trainer.api
    import trainer.commands.common
    import trainer.notebook

    for module in (trainer.commands.common, trainer.notebook, trainer.api):
        assert module.Session is Session, module.__name__


def test_the_core_session_starts_an_exercise_and_prints_nothing(isolated_workspace, capsys):
    session = Session()
    result = session.start(session.catalog.get("sigmoid"))
    assert result.path == isolated_workspace / "sigmoid.py" and result.path.is_file()
    assert session.store.load().current == "sigmoid"
    assert session.exercise(None).id == "sigmoid"
    assert capsys.readouterr() == ("", "")


def test_the_session_takes_its_notices_once_for_the_edge_to_show(isolated_workspace, capsys):
    isolated_workspace.mkdir()
    (isolated_workspace / ".trainer-state.json").write_text("{not json", encoding="utf-8")
    session = Session()
    session.store.load()
    notices = session.take_notices()
    assert notices and "progress" in " ".join(notices).lower()
    assert session.take_notices() == []
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(("command", "other"), [("trainer", "%trainer"), ("%trainer", None)])
def test_the_session_says_what_to_do_next_as_commands_are_typed_where_it_is_used(
    isolated_workspace, command, other
):
    with pytest.raises(WorkspaceError) as raised:
        Session(command=command).exercise(None)
    words = raised.value.message
    assert f"`{command} start sigmoid`" in words and f"`{command} list`" in words
    if other is not None:
        assert other not in words


# What opening a session noticed, shown by each edge ---------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class _Shell:
    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {}

    def set_next_input(self, s: str, replace: bool = False) -> None:
        pass


def test_an_interview_whose_time_ran_out_ends_at_the_next_magic_as_at_the_next_command(
    isolated_workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    clock = _Clock()
    monkeypatch.setattr(interviews, "CLOCK", clock)
    run_cli("interview", "linear", "--minutes", "10")
    clock.now += 11 * 60
    shown: list[object] = []
    TrainerMagics(_Shell(), display=shown.append).trainer("list")
    said = "\n".join(repr(item) for item in shown if isinstance(item, Shown))
    assert "Interview on linear: time up." in said
    assert "checks run: 0; hints used: 0" in said
    assert Session().store.load().interview is None


def test_the_first_check_of_an_open_review_returns_when_the_next_is_due_and_prints_nothing(
    isolated_workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    now = [1_760_000_000.0]
    monkeypatch.setattr(trainer.history, "CLOCK", lambda: now[0])
    monkeypatch.setattr(interviews, "CLOCK", lambda: now[0])
    run_cli("start", "sigmoid")
    interviews.record_check(Session().store, "sigmoid", True)
    now[0] += 2 * 86400
    assert run_cli("review").exit_code == 0
    capsys.readouterr()
    session = Session()
    exercise = session.exercise("sigmoid")
    review = session.review_file(exercise)
    assert review is not None
    first = session.record_check(exercise, False, None, review)
    assert first.review_due is not None and first.review_due > now[0]
    assert session.record_check(exercise, False, None, review).review_due is None
    assert capsys.readouterr() == ("", "")
