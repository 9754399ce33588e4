"""A bug of ours is never the learner's failure (issue 26 §3).

A fault is injected at each place of the engine (:mod:`tests.faults`): a stage's
body, the checker outside the stages, the checking server before it is ready and
while it serves, a learner-side request handler (serve.py and api_calls.py) and
the reply it sends, the CLI's runner and a command. Each check ends with exit
code 3, in a bug's words, with the traceback kept in a file whose path is
printed, and no stage failed because of it. A learner's code that raises stays
the learner's failure.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.faults import FAULT_WORDS, PLACES, server_code, sitecustomize, with_fault
from tests.terminal import Terminal, plain
from trainer.bugs import BUG_REPORTS_ENV, BUG_WORDS
from trainer.checking import runner, server

GOOD = (REPO / "solutions" / "sigmoid.py").read_text()


@pytest.fixture
def reports() -> Path:
    """Where the bug reports go: the folder every test gets (tests/conftest.py)."""
    return Path(os.environ[BUG_REPORTS_ENV])


def _inject(monkeypatch: pytest.MonkeyPatch, place: str, returns: str | None = None) -> None:
    """Every checking server this test starts has a fault of ours at ``place``."""
    code = server_code(PLACES[place], returns)
    monkeypatch.setattr(server, "bootstrap", with_fault(server.bootstrap, code))


def _check(tmp_path: Path, *options: str, exercise: str = "sigmoid") -> CliResult:
    source = (REPO / "solutions" / f"{exercise}.py").read_text()
    path = tmp_path / f"{exercise}.py"
    path.write_text(source)
    return run_cli("check", exercise, "--file", str(path), *options)


def _kept(shown: str, reports: Path) -> str:
    """The bug report the command wrote, whose path it printed (maybe wrapped); its text."""
    (path,) = reports.iterdir()
    assert str(path) in "".join(shown.split()), shown
    return path.read_text()


def _assert_a_bug(result: CliResult, reports: Path, where: str) -> str:
    """Exit 3, a bug's words naming ``where``, the traceback kept, no stage failed."""
    shown = result.stdout + result.stderr
    assert result.exit_code == 3, shown
    flat = " ".join(shown.split())
    assert f"{BUG_WORDS} (in {where}" in flat, shown
    assert not re.search(r"✘ [A-Z0-9]", shown), shown  # no stage failed, no verdict given
    kept = _kept(shown, reports)
    assert FAULT_WORDS in kept, kept
    return kept


# -- the checking engine ------------------------------------------------------------------


def test_a_bug_in_a_stage_body_is_ours_and_names_the_stage(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    _inject(monkeypatch, "stage body")
    result = _check(tmp_path)
    kept = _assert_a_bug(result, reports, "the stage Backward parity")
    assert "trusted/checker.py" in kept  # the stage's guard, in the checker
    assert "✔ Forward parity" in result.stdout  # the stages before it keep their verdicts


def test_a_bug_under_torchs_autograd_in_the_proxy_is_ours_not_the_learners(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    """The stages catch only the learner's faults: a bug of ours raised inside autograd's
    engine (the proxy's backward) is not taken for a learner's wrong return."""
    _inject(monkeypatch, "proxy backward")
    kept = _assert_a_bug(_check(tmp_path), reports, "the stage Backward parity")
    assert "trusted/proxy.py" in kept


def test_a_bug_in_the_checker_between_stages_is_ours(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    _inject(monkeypatch, "checker")
    kept = _assert_a_bug(_check(tmp_path), reports, "the checker")
    assert "reset" in kept


def test_a_checker_that_ends_before_the_check_begins_is_our_bug(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    """Killed or ended, not raised: no traceback, but no learner code had run yet."""
    code = server_code(PLACES["checker start"], returns="__import__('os')._exit(9)")
    monkeypatch.setattr(server, "bootstrap", with_fault(server.bootstrap, code))
    result = _check(tmp_path)
    shown = result.stdout + result.stderr
    assert result.exit_code == 3, shown
    assert f"{BUG_WORDS} (in the checker: the checker exited with code 9" in " ".join(shown.split())
    assert not re.search(r"✘ [A-Z0-9]", shown), shown
    assert "before the check began" in _kept(shown, reports)


def test_a_bug_in_the_checking_server_before_it_is_ready_is_ours_not_a_missing_torch(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    _inject(monkeypatch, "server start")
    result = _check(tmp_path)
    kept = _assert_a_bug(result, reports, "the checking server")
    assert "torch installed" not in result.stdout + result.stderr
    assert "warm_up" in kept


def test_a_bug_in_the_checking_server_while_serving_is_ours(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    _inject(monkeypatch, "server")
    result = _check(tmp_path)
    kept = _assert_a_bug(result, reports, "the checking server")
    assert "_start_checker" in kept
    assert "could not start a check" not in result.stdout + result.stderr


def test_a_bug_in_a_learner_side_handler_is_ours_with_both_sides_traceback(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    _inject(monkeypatch, "learner handler")
    kept = _assert_a_bug(
        _check(tmp_path), reports, "the learner process's handler of `forward`, during the stage"
    )
    assert "_Server.forward, line" in kept  # the learner process's side
    assert "trusted/proxy.py" in kept  # and the checker's, which asked


def test_a_bug_in_a_learner_side_api_handler_is_ours(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    _inject(monkeypatch, "learner api handler")
    kept = _assert_a_bug(
        _check(tmp_path, exercise="exp_inplace"),
        reports,
        "the learner process's handler of `api_mark_dirty`, during the stage",
    )
    assert "handle_mark_dirty, line" in kept


def test_a_reply_a_learner_side_handler_cannot_send_is_our_bug_not_a_crash_of_the_learner(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    _inject(monkeypatch, "learner handler", returns="object()")  # not JSON
    result = _check(tmp_path)
    shown = result.stdout + result.stderr
    assert result.exit_code == 3, shown
    assert "the learner process's handler of `forward`" in " ".join(shown.split())
    assert "is not JSON serializable" in _kept(shown, reports)


def test_a_bug_in_the_clis_runner_is_ours_and_the_json_report_carries_it(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch, warm_commands: None
):
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(FAULT_WORDS)

    monkeypatch.setattr(runner, "_stages", broken)
    result = _check(tmp_path, "--json")
    assert result.exit_code == 3, result.stdout + result.stderr
    document = result.json()
    bug = document["bug"]
    assert bug["where"] == "the CLI's runner"
    assert bug["error"] == f"RuntimeError: {FAULT_WORDS}"
    assert FAULT_WORDS in Path(bug["path"]).read_text()
    assert document["passed"] is False
    assert {s["verdict"] for s in document["stages"]} == {"skip"}
    assert {s["message"] for s in document["stages"]} == {"skipped: the checker hit a bug"}


def test_a_check_without_a_bug_says_so_in_its_json(tmp_path: Path, warm_commands: None):
    result = _check(tmp_path, "--json")
    assert result.exit_code == 0
    assert result.json()["bug"] is None


def test_a_bug_in_a_command_is_ours_with_its_traceback_kept(
    reports: Path, monkeypatch: pytest.MonkeyPatch
):
    import trainer.console

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(FAULT_WORDS)

    monkeypatch.setattr(trainer.console, "exercise_list", broken)
    result = run_cli("list")
    assert result.exit_code == 3
    words = f"{BUG_WORDS} (in `trainer list`: RuntimeError: {FAULT_WORDS})"
    assert words in " ".join(result.stderr.split())
    assert "exercise_list" in _kept(result.stderr, reports)


def test_a_bug_is_not_recorded_as_a_failed_check_of_the_learner(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch, isolated_workspace: Path
):
    assert run_cli("start", "sigmoid").exit_code == 0
    (isolated_workspace / "sigmoid.py").write_text(GOOD)
    _inject(monkeypatch, "stage body")
    assert run_cli("check").exit_code == 3
    state = json.loads((isolated_workspace / ".trainer-state.json").read_text())
    assert state["exercises"]["sigmoid"].get("checks", 0) == 0, state


# -- a learner's exception stays the learner's --------------------------------------------

RAISES_IN_RETURNED_VALUE = """
import torch


class Touchy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.detach:
            raise ValueError("do not detach me")
        return super().__torch_function__(func, types, args, kwargs or {})


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y.as_subclass(Touchy)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y)
"""


def test_a_learner_value_that_raises_in_our_handler_is_the_learners_failure(
    tmp_path: Path, reports: Path, warm_commands: None
):
    """Raised through a frame of the learner's file (its tensor's __torch_function__,
    called by our code that sends the value back): the learner's, exit 1."""
    path = tmp_path / "sigmoid.py"
    path.write_text(RAISES_IN_RETURNED_VALUE)
    result = run_cli("check", "sigmoid", "--file", str(path), "--json")
    assert result.exit_code == 1, result.stdout
    document = result.json()
    assert document["bug"] is None
    failed = next(s for s in document["stages"] if s["verdict"] == "fail")
    assert "do not detach me" in failed["message"]
    assert any("sigmoid.py" in d for d in failed["details"]), failed
    assert not reports.exists()


PATCHES_TORCH = """
import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        torch.Tensor.detach = None  # what our code then calls on the result fails
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y)
"""


def test_our_code_failing_on_torch_the_learner_patched_is_the_learners_failure(
    tmp_path: Path, reports: Path, warm_commands: None
):
    """No frame of the learner's file in the traceback, but torch was patched while the
    handler ran: the learner's doing, named as a patch, exit 1."""
    path = tmp_path / "sigmoid.py"
    path.write_text(PATCHES_TORCH)
    result = run_cli("check", "sigmoid", "--file", str(path), "--json")
    assert result.exit_code == 1, result.stdout
    document = result.json()
    assert document["bug"] is None
    failed = next(s for s in document["stages"] if s["verdict"] == "fail")
    assert "your code replaced `torch.Tensor.detach`" in failed["message"], failed
    assert not reports.exists()


# -- grading and Classroom ----------------------------------------------------------------


def test_grade_shows_a_bug_row_as_the_checkers_bug_not_a_students_zero(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "alice.py").write_text(GOOD)
    _inject(monkeypatch, "stage body")
    result = run_cli("grade", "sigmoid", str(tmp_path / "subs"), "--unprotected", "--json")
    assert result.exit_code == 0, result.stderr
    (grade,) = result.json()["grades"]
    assert grade["verdict"] == "bug"
    assert grade["stage"] == ""  # no stage is blamed
    assert grade["message"].startswith(
        f"{BUG_WORDS} (in the stage Backward parity: RuntimeError: {FAULT_WORDS})"
    )
    assert grade["report"]["bug"]["path"]
    assert all(s["verdict"] != "fail" for s in grade["stages"])


def test_grade_stops_with_exit_3_when_its_checking_server_has_a_bug(
    tmp_path: Path, reports: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "alice.py").write_text(GOOD)
    _inject(monkeypatch, "server start")
    result = run_cli("grade", "sigmoid", str(tmp_path / "subs"), "--unprotected")
    assert result.exit_code == 3, result.stdout + result.stderr
    assert f"{BUG_WORDS} (in the checking server: " in " ".join(result.stderr.split())
    assert "warm_up" in _kept(result.stderr, reports)


def test_classroom_reports_a_bug_as_an_error_in_the_bugs_words(tmp_path: Path):
    from tests.conftest import CATALOG
    from trainer.checking.report import CheckerBug, CheckReport, StageResult, Verdict
    from trainer.classroom import classroom_result, read_report

    exercise = CATALOG.get("sigmoid")
    stages = [StageResult(s, Verdict.SKIP, "skipped: the checker hit a bug") for s in ["load"]]
    report = CheckReport("sigmoid", "sigmoid.py", "0" * 64, 0, stages)
    report.bug = CheckerBug("the checker", "KeyError: 'x'", "/tmp/bug.txt")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report.to_dict()))
    result = classroom_result(exercise, read_report(path, "sigmoid"))
    assert result["status"] == "error"
    assert {t["score"] for t in result["tests"]} == {0}
    message = result["tests"][0]["message"]
    assert f"{BUG_WORDS} (in the checker: KeyError: 'x')" in message
    assert "/tmp/bug.txt" in message


# -- what a terminal shows ----------------------------------------------------------------


def test_a_bug_reads_whole_in_a_terminal_and_leaves_it_as_it_was(
    tmp_path: Path, reports: Path, isolated_workspace: Path
):
    assert run_cli("start", "sigmoid").exit_code == 0
    (isolated_workspace / "sigmoid.py").write_text(GOOD)
    injected = sitecustomize(tmp_path / "site", server_code(PLACES["stage body"]))
    env = {
        "TRAINER_WORKSPACE": str(isolated_workspace),
        BUG_REPORTS_ENV: str(reports),
        "PYTHONPATH": f"{injected}:{REPO}",
    }
    terminal = Terminal("check", cwd=tmp_path, env=env, columns=80)
    try:
        code = terminal.wait(timeout=120)
        shown = plain(terminal.output)
        assert code == 3, shown
        assert "Traceback" not in shown
        assert all(len(line) <= 80 for line in shown.splitlines())
        assert f"{BUG_WORDS} (in the stage Backward parity: " in " ".join(shown.split())
        assert FAULT_WORDS in _kept(shown, reports)
        assert terminal.left_changed() == []
    finally:
        terminal.close()


def test_a_bug_row_of_grade_reads_in_a_terminal_and_leaves_it_as_it_was(
    tmp_path: Path, reports: Path
):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "alice.py").write_text(GOOD)
    injected = sitecustomize(tmp_path / "site", server_code(PLACES["stage body"]))
    env = {BUG_REPORTS_ENV: str(reports), "PYTHONPATH": f"{injected}:{REPO}", "NO_COLOR": "1"}
    terminal = Terminal(
        "grade", "sigmoid", "subs", "--unprotected", cwd=tmp_path, env=env, columns=80
    )
    try:
        code = terminal.wait(timeout=120)
        shown = plain(terminal.output)
        assert code == 0, shown
        assert "Traceback" not in shown
        assert re.search(r"subs/alice\.py ⚑\s*│\s*bug\s*│", shown), shown
        flat = " ".join(shown.split())
        assert f"✘ subs/alice.py: {BUG_WORDS} (in the stage Backward parity: " in flat
        assert "0 of 1 submissions passed." in shown
        assert FAULT_WORDS in _kept(shown, reports)
        assert terminal.left_changed() == []
    finally:
        terminal.close()
