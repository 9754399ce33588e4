"""Learner experience: next, reset, solution, interview, watch, progress and help."""

from __future__ import annotations

import json
import multiprocessing
import queue
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CATALOG, REPO, run_cli
from trainer import interview as interviews
from trainer.commands.common import complete_exercise
from trainer.state import StateStore
from trainer.watch import watch_loop
from trainer.workspace import scratch_text

# What the commands say and record, on the worker's warm checking server.
pytestmark = pytest.mark.usefixtures("warm_commands")

COMMANDS = [
    "start",
    "check",
    "hint",
    "quiz",
    "list",
    "next",
    "reset",
    "solution",
    "watch",
    "interview",
]


def _state(workspace: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((workspace / ".trainer-state.json").read_text())
    return state


def _pass(exercise_id: str, workspace: Path) -> None:
    run_cli("start", exercise_id)
    (workspace / f"{exercise_id}.py").write_text(
        (REPO / "solutions" / f"{exercise_id}.py").read_text()
    )
    assert run_cli("check", exercise_id).exit_code == 0


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command):
    result = run_cli(command, "--help")
    assert result.exit_code == 0
    assert f"Example: trainer {command}" in result.stdout


def test_shell_completion_offers_exercise_ids():
    assert complete_exercise("sig") == ["sigmoid"]
    assert "linear" in complete_exercise("")


def test_next_starts_the_first_exercise_not_yet_passed(isolated_workspace):
    first = CATALOG.all[0]
    result = run_cli("next")
    assert result.exit_code == 0
    assert (isolated_workspace / f"{first.id}.py").is_file()
    _pass(first.id, isolated_workspace)
    run_cli("next")
    assert _state(isolated_workspace)["current"] == CATALOG.all[1].id


def test_reset_restores_the_stub_and_keeps_a_backup_it_names(isolated_workspace):
    run_cli("start", "sigmoid")
    scratch = isolated_workspace / "sigmoid.py"
    scratch.write_text("# an attempt worth keeping\n")
    result = run_cli("reset")
    assert result.exit_code == 0
    (backup,) = (isolated_workspace / ".backups").glob("sigmoid-*.py")
    assert backup.read_text() == "# an attempt worth keeping\n"
    assert backup.name in result.stdout
    assert scratch.read_text() == scratch_text(CATALOG.get("sigmoid"))


def test_the_solution_is_refused_before_a_pass_without_force():
    run_cli("start", "sigmoid")
    result = run_cli("solution")
    assert result.exit_code == 2
    assert "you have not passed `sigmoid` yet" in result.stderr
    assert "--force" in result.stderr


def test_the_solution_with_force_is_shown_and_recorded_as_seen(isolated_workspace):
    run_cli("start", "sigmoid")
    result = run_cli("solution", "--force")
    assert result.exit_code == 0
    assert "class MySigmoid" in result.stdout
    assert "What to notice" in result.stdout
    assert _state(isolated_workspace)["exercises"]["sigmoid"]["solution_seen"] is True


def test_the_solution_after_a_pass_needs_no_confirmation(isolated_workspace):
    _pass("sigmoid", isolated_workspace)
    result = run_cli("solution", "sigmoid")
    assert result.exit_code == 0
    assert "class MySigmoid" in result.stdout
    assert _state(isolated_workspace)["exercises"]["sigmoid"]["solution_seen"] is False


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(interviews, "CLOCK", fake)
    return fake


def test_an_interview_on_an_exercise_without_follow_ups_counts_checks_and_hints_and_ends_on_a_pass(
    isolated_workspace, clock
):
    result = run_cli("interview", "relu", "--minutes", "30")
    assert result.exit_code == 0
    assert "Interview started on relu: 30 minutes" in result.stdout
    clock.now += 60
    failing = run_cli("check")
    assert failing.exit_code == 1
    summary = failing.stdout.strip().splitlines()[-1]  # in the summary line, not above the table
    assert summary.startswith("✘") and summary.endswith("Interview: 29:00 left.")
    run_cli("hint")
    clock.now += 125
    interview_file = isolated_workspace / "interview" / "relu.py"
    interview_file.write_text((REPO / "solutions" / "relu.py").read_text())
    passing = run_cli("check")
    assert passing.exit_code == 0
    assert "Interview on relu: passed" in passing.stdout
    assert re.search(r"Time taken\s*│\s*3:05 of 30:00", passing.stdout)
    assert re.search(r"Checks run\s*│\s*2", passing.stdout)
    assert re.search(r"Hints used\s*│\s*1", passing.stdout)
    state = _state(isolated_workspace)
    assert state["interview"] is None
    best = state["exercises"]["relu"]["best_interview"]
    assert best["passed"] is True and best["seconds"] == 185
    assert "✔ 3:05" in run_cli("list").stdout


def test_an_interview_whose_time_is_up_ends_at_the_next_command(isolated_workspace, clock):
    run_cli("interview", "linear", "--minutes", "10")
    clock.now += 11 * 60
    result = run_cli("list")
    assert "Interview on linear: time up" in result.stdout
    assert _state(isolated_workspace)["interview"] is None
    assert "✘ 10:00" in run_cli("list").stdout


def test_an_interview_can_be_stopped_and_only_one_runs_at_a_time(isolated_workspace, clock):
    run_cli("interview", "sigmoid")
    second = run_cli("interview", "linear")
    assert second.exit_code == 2
    assert "an interview on `sigmoid` is under way" in second.stderr
    stopped = run_cli("interview", "--stop")
    assert stopped.exit_code == 0
    assert "Interview on sigmoid: stopped" in stopped.stdout
    again = run_cli("interview", "--stop")
    assert again.exit_code == 2
    assert "no interview is under way" in again.stderr


def test_an_interview_without_an_id_picks_an_exercise_not_yet_passed(isolated_workspace, clock):
    _pass("sigmoid", isolated_workspace)
    run_cli("interview")
    chosen = _state(isolated_workspace)["interview"]["exercise"]
    assert chosen != "sigmoid"
    assert chosen in CATALOG.ids()


def test_an_interview_leaves_an_edited_scratch_file_as_it_is(isolated_workspace, clock):
    run_cli("start", "sigmoid")
    (isolated_workspace / "sigmoid.py").write_text("# practice run\n")
    run_cli("interview", "sigmoid")
    assert (isolated_workspace / "sigmoid.py").read_text() == "# practice run\n"
    assert not (isolated_workspace / ".backups").exists()


def _increment_checks(workspace: str, times: int) -> None:
    store = StateStore(Path(workspace))
    for _ in range(times):
        with store.update() as state:
            state.progress("sigmoid").checks += 1


def test_concurrent_state_updates_are_never_lost(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_increment_checks, args=(str(workspace), 25)) for _ in range(8)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    state = _state(workspace)
    assert state["exercises"]["sigmoid"]["checks"] == 8 * 25


def test_a_state_file_of_another_shape_is_moved_aside_with_a_notice(isolated_workspace):
    run_cli("start", "sigmoid")
    (isolated_workspace / ".trainer-state.json").write_text('{"version": 1, "exercises": []}')
    result = run_cli("list")
    assert result.exit_code == 0
    assert "is damaged" in result.stderr
    assert "Your scratch files are untouched" in result.stderr


def test_watch_rechecks_when_the_file_is_saved_and_stops_on_q(tmp_path):
    scratch = tmp_path / "sigmoid.py"
    scratch.write_text("# first\n")
    keys: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    seen: list[str] = []
    changed = threading.Event()

    def on_change() -> None:
        seen.append(scratch.read_text())
        if len(seen) == 2:
            changed.set()

    runner = threading.Thread(
        target=watch_loop, args=(lambda: scratch, on_change, lambda k: k != "q", keys, stop)
    )
    runner.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # let the watcher start before the save
    scratch.write_text("# second\n")
    assert changed.wait(timeout=10), "no re-check after the save"
    keys.put("q")
    runner.join(timeout=5)
    assert not runner.is_alive()
    assert seen == ["# first\n", "# second\n"]


def test_watch_ignores_keys_typed_while_a_check_runs(tmp_path):
    scratch = tmp_path / "sigmoid.py"
    scratch.write_text("x\n")
    keys: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    handled: list[str] = []

    def slow_check() -> None:
        keys.put("c")  # typed during the check: dropped

    def on_key(key: str) -> bool:
        handled.append(key)
        return key != "q"

    runner = threading.Thread(
        target=watch_loop, args=(lambda: scratch, slow_check, on_key, keys, stop)
    )
    runner.start()
    time.sleep(0.3)
    keys.put("q")
    runner.join(timeout=5)
    assert handled == ["q"]


def test_a_key_typed_as_soon_as_the_prompt_shows_is_handled(tmp_path):
    scratch = tmp_path / "sigmoid.py"
    scratch.write_text("x\n")
    keys: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    handled: list[str] = []

    def prompt() -> None:
        keys.put("q")  # the learner reads the prompt and types at once

    def on_key(key: str) -> bool:
        handled.append(key)
        return key != "q"

    runner = threading.Thread(
        target=watch_loop,
        args=(lambda: scratch, lambda: None, on_key, keys, stop),
        kwargs={"prompt": prompt},
    )
    runner.start()
    runner.join(timeout=5)
    assert not runner.is_alive()
    assert handled == ["q"]
