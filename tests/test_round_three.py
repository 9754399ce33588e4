"""Issue 33, "Learner experience, round three": each point through the real CLI, in a
pseudo-terminal where the point is about what a terminal shows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.terminal import Terminal, plain


def trainer(
    *args: str, cwd: Path, columns: int = 80, workspace: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m trainer ARGS``, piped, as in a script."""
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": str(columns)}
    if workspace is not None:
        environment["TRAINER_WORKSPACE"] = str(workspace)
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environment, **env},
        check=False,
    )


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for each in opened:
        each.close()


def screen(
    terminals: list[Terminal], *args: str, cwd: Path, workspace: Path, columns: int = 80
) -> tuple[int, str]:
    """Run ``trainer ARGS`` in a terminal ``columns`` wide; its exit code and what it showed."""
    shown = Terminal(
        *args, cwd=cwd, env={"TRAINER_WORKSPACE": str(workspace)}, columns=columns, rows=40
    )
    terminals.append(shown)
    code = shown.wait(timeout=180)
    return code, plain(shown.output).replace("\r\n", "\n")


# 4. Ctrl-C in watch


def test_ctrl_c_in_watch_exits_130_without_a_library_log_line(
    tmp_path: Path, terminals: list[Terminal]
):
    workspace = tmp_path / "ws"
    trainer("start", "sigmoid", cwd=tmp_path, workspace=workspace)
    watch = Terminal("watch", cwd=tmp_path, env={"TRAINER_WORKSPACE": str(workspace)})
    terminals.append(watch)
    watch.wait_for(r"Watching for saves", timeout=120)
    # Ctrl-C: the terminal sends SIGINT to its foreground process group (the test's
    # terminal is no controlling terminal, so the test sends it as the terminal would).
    os.killpg(watch.process.pid, signal.SIGINT)
    code = watch.wait()
    shown = plain(watch.output)
    assert code == 130, shown[-2000:]
    assert "KeyboardInterrupt" not in shown
    assert "Stopped watching." in shown
    assert watch.left_changed() == []
