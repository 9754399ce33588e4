"""Bad scratch files, odd workspaces, interruptions and memory: clear messages, nothing lost."""

from __future__ import annotations

import functools
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, check_json, first_failure, run_cli
from trainer.checking.processes import children_of

GOOD = (REPO / "solutions" / "sigmoid.py").read_text()


def _failure(code: int, report: dict[str, Any], stage: str) -> dict[str, Any]:
    assert code == 1, report
    failure = first_failure(report)
    assert failure is not None
    assert failure["id"] == stage, failure
    return failure


def _sigmoid_returning(expression: str, prelude: str = "") -> str:
    return f"""
import torch
{prelude}

class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.sigmoid(x)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        return {expression}
"""


def test_an_empty_scratch_file_says_so_and_how_to_get_the_stub_back(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text("")
    failure = _failure(*check_json("sigmoid", path), "load")
    assert "sigmoid.py is empty" in failure["message"]
    assert "trainer start --force" in failure["message"]


def test_binary_garbage_is_reported_as_not_text(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_bytes(bytes(range(256)) * 4)
    failure = _failure(*check_json("sigmoid", path), "load")
    assert "is not UTF-8 text" in failure["message"]


def test_nul_bytes_in_a_text_file_are_reported(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text("import torch\x00\n")
    failure = _failure(*check_json("sigmoid", path), "load")
    assert "cannot be compiled" in failure["message"] or "null bytes" in failure["message"]


def test_importing_a_missing_module_names_it_and_the_line(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text("import torch\nimport not_a_real_module\n" + GOOD)
    failure = _failure(*check_json("sigmoid", path), "load")
    assert "ModuleNotFoundError" in failure["message"]
    assert "not_a_real_module" in failure["message"]
    assert any("line 2" in d for d in failure["details"])


def test_endless_recursion_in_backward_is_named(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text(
        _sigmoid_returning("deeper(grad_output)", prelude="def deeper(g):\n    return deeper(g)\n")
    )
    failure = _failure(*check_json("sigmoid", path), "backward")
    assert "recursed without end" in failure["message"]


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("[grad_output * output * (1 - output)]", "backward returned a list"),
        ("(grad_output * output * (1 - output)).detach().numpy()", "numpy.ndarray"),
        ("0.5", "a float for `x`"),
    ],
    ids=["a list", "a numpy array", "a float"],
)
def test_backward_returning_something_else_than_a_tensor_is_named(expression, words, tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text(_sigmoid_returning(expression))
    code, report = check_json("sigmoid", path)
    assert code == 1
    messages = " ".join(s["message"] for s in report["stages"] if s["verdict"] == "fail")
    assert words in messages


def test_backward_returning_the_wrong_dtype_fails_the_contract(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text(_sigmoid_returning("(grad_output * output * (1 - output)).to(torch.float16)"))
    code, report = check_json("sigmoid", path)
    assert code == 1
    contract = next(s for s in report["stages"] if s["id"] == "contract")
    assert contract["verdict"] == "fail"
    assert "dtype torch.float16" in contract["message"]


def test_backward_returning_a_tensor_on_another_device_is_named(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text(_sigmoid_returning("torch.empty_like(output, device='meta')"))
    code, report = check_json("sigmoid", path)
    assert code == 1
    messages = " ".join(s["message"] for s in report["stages"] if s["verdict"] == "fail")
    assert "meta" in messages


def test_forward_returning_a_tuple_where_one_tensor_is_expected(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text(GOOD.replace("        return output\n", "        return output, output\n", 1))
    failure = _failure(*check_json("sigmoid", path), "forward")
    assert "forward returned a tuple of 2 values; expected one tensor" in failure["message"]


ALLOCATES_768_MIB = (
    "import torch\n_BUFFER = torch.ones(768 * 1024**2, dtype=torch.uint8)  # 3 × 256 MiB\n"
)


def test_an_allocation_of_three_times_the_memory_limit_fails_naming_the_limit(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text(ALLOCATES_768_MIB + GOOD)
    failure = _failure(*check_json("sigmoid", path, "--memory-limit", "256"), "load")
    assert "ran out of memory" in failure["message"]
    assert "cap of 256 MiB" in failure["message"]
    assert "--memory-limit" in failure["message"]


def test_the_same_allocation_passes_under_the_default_memory_limit(tmp_path):
    path = tmp_path / "sigmoid.py"
    path.write_text(ALLOCATES_768_MIB + GOOD)
    exit_code, report = check_json("sigmoid", path)
    assert exit_code == 0, [s["message"] for s in report["stages"] if s["verdict"] == "fail"]


@pytest.mark.parametrize("exercise", ["normalize_vmap", "dot_jvp"])
def test_a_right_solution_passes_at_the_smallest_memory_limit_whatever_torch_func_imports(
    exercise,
):
    """The cap is on what the learner's code allocates. torch.func imports torch._dynamo
    on first use (tens of MiB): counted in the learner's process, it failed a right
    normalize_vmap at 64 MiB; imported once by the zygote, it is torch's own."""
    solution = REPO / "solutions" / f"{exercise}.py"
    exit_code, report = check_json(exercise, solution, "--memory-limit", "64")  # the least
    assert exit_code == 0, [s["message"] for s in report["stages"] if s["verdict"] == "fail"]


@pytest.mark.usefixtures("warm_commands")
def test_a_workspace_with_spaces_and_non_ascii_characters_works(tmp_path):
    workspace = tmp_path / "my wörk späce ✓"
    workspace.mkdir()
    assert run_cli("start", "sigmoid", "--workspace", str(workspace)).exit_code == 0
    (workspace / "sigmoid.py").write_text(GOOD)
    result = run_cli("check", "--workspace", str(workspace))
    assert result.exit_code == 0, result.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_a_read_only_workspace_is_a_clear_usage_error(tmp_path):
    workspace = tmp_path / "locked"
    workspace.mkdir()
    workspace.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        result = run_cli("start", "sigmoid", "--workspace", str(workspace))
    finally:
        workspace.chmod(stat.S_IRWXU)
    assert result.exit_code == 2
    assert "is not writable" in result.stderr


def test_a_read_only_workspace_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    # Root ignores permission bits, so the check itself is exercised directly.
    workspace = tmp_path / "locked"
    workspace.mkdir()
    monkeypatch.setattr("trainer.workspace._writable", lambda folder: folder != workspace)
    result = run_cli("start", "sigmoid", "--workspace", str(workspace))
    assert result.exit_code == 2
    assert "is not writable" in result.stderr
    assert list(workspace.iterdir()) == []


def test_the_verdict_belongs_to_the_version_read_when_the_check_began(tmp_path):
    from tests.conftest import CATALOG
    from trainer.checking.runner import run_check

    path = tmp_path / "sigmoid.py"
    path.write_text(GOOD)
    import hashlib
    import threading

    original = hashlib.sha256(GOOD.encode()).hexdigest()

    def edit_soon() -> None:
        time.sleep(0.2)
        path.write_text("this is not python (\n")

    editor = threading.Thread(target=edit_soon)
    editor.start()
    report = run_check(CATALOG.get("sigmoid"), path)
    editor.join()
    assert report.file_sha256 == original
    assert report.passed


def _learner_below(root: int) -> int | None:
    """The pid of the learner's process among the descendants of ``root``: the one in a
    PID namespace of its own (``NSpid`` names it twice), where it runs its file."""
    todo = [root]
    while todo:
        for child in children_of(todo.pop()):
            try:
                status = Path(f"/proc/{child}/status").read_text()
            except OSError:
                continue
            nspid = [line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")]
            if nspid and len(nspid[0]) > 1:
                return child
            todo.append(child)
    return None


def _descendants(root: int) -> list[int]:
    found, todo = [], [root]
    while todo:
        for child in children_of(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _descendants_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_ctrl_c_during_a_check_exits_130_and_leaves_no_process_behind(tmp_path):
    hangs = tmp_path / "sigmoid.py"
    hangs.write_text(
        GOOD.replace(
            "(output,) = ctx.saved_tensors",
            "(output,) = ctx.saved_tensors\n        import time\n        time.sleep(3600)",
        )
    )
    workspace = tmp_path / "ws"
    env = {**os.environ, "TRAINER_WORKSPACE": str(workspace)}
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer", "check", "sigmoid", "--file", str(hangs)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a suite started in the background (`make test &`) runs
        # with Ctrl-C ignored, which its children would inherit.
        preexec_fn=functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 20
    learner = _learner_below(process.pid)
    while learner is None and time.monotonic() < deadline:
        time.sleep(0.05)
        learner = _learner_below(process.pid)
    assert learner is not None, "the learner's file never ran"
    time.sleep(0.5)  # into backward's sleep
    below = _descendants(process.pid)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=15)
    assert process.returncode == 130
    assert "interrupted" in stderr
    gone_by = time.monotonic() + 5
    while any(map(_descendants_alive, below)) and time.monotonic() < gone_by:
        time.sleep(0.05)
    left = [pid for pid in below if _descendants_alive(pid)]
    assert not left, f"processes of the check outlived Ctrl-C: {left}"


def test_an_interrupt_while_a_file_is_written_leaves_the_old_version_whole(tmp_path, monkeypatch):
    """What Ctrl-C at the worst moment does to the progress file (or a scratch file):
    readers see the old version, and no temporary file is left beside it. In process:
    the interrupt comes as the new version would replace the old."""
    import trainer.files

    path = tmp_path / ".trainer-state.json"
    path.write_text('{"old": true}\n', encoding="utf-8")

    def interrupted(source: str, target: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        trainer.files.write_atomically(path, '{"new": true}\n' * 10_000)
    assert path.read_text(encoding="utf-8") == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


# Each process says it is ready, waits for the go file, then records its checks as
# `trainer check` does at the end of every check (the command's own recording:
# tests/test_commands.py).
_RECORDER = """
import os, sys, time
from trainer.session import Session
workspace, go, passes = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
session = Session(workspace)
exercise = session.catalog.get("sigmoid")
open(go + "-ready-" + str(os.getpid()), "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
for n in range(25):
    session.record_check(exercise, passed=passes and n == 24)
"""


def test_four_commands_recording_checks_at_once_keep_every_count(tmp_path):
    """Checks that end together lose no count and no pass: the progress file is
    updated under a lock (four processes, a hundred updates, one of them a pass)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    go = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _RECORDER, str(workspace), str(go), "1" if n == 0 else "0"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("go-ready-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # until every process is ready: then they record at once
    go.touch()
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    state = json.loads((workspace / ".trainer-state.json").read_text())
    assert state["exercises"]["sigmoid"]["checks"] == 100
    assert state["exercises"]["sigmoid"]["passed"] is True
