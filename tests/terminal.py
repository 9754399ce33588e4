"""Run the real `trainer` in a pseudo-terminal: what a learner at a terminal sees and types."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_ESCAPES = re.compile(r"\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")


def plain(text: str) -> str:
    """``text`` without escape sequences (colours, links, screen clears)."""
    return _ESCAPES.sub("", text)


def _default_interrupt() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """``python -m trainer ARGS`` on a pseudo-terminal of ``columns`` × ``rows``."""

    def __init__(
        self,
        *args: str,
        cwd: Path,
        env: Mapping[str, str],
        columns: int = 100,
        rows: int = 40,
    ) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        environment = {
            "PATH": "/usr/bin:/bin",
            "TERM": "xterm-256color",
            "PYTHONPATH": str(REPO),
            **env,
        }
        environment.pop("COLUMNS", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainer", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=environment,
            start_new_session=True,
            # A terminal's foreground command gets Ctrl-C's default action, whatever the
            # test runner was started with (a background job ignores SIGINT, and so
            # would every command started from it).
            preexec_fn=_default_interrupt,
        )
        os.close(slave)
        self.output = ""
        self.mode = termios.tcgetattr(self.master)  # the terminal's mode before the command

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the process ended and closed the terminal
            return False
        if not chunk:
            return False
        self.output += chunk.decode("utf-8", "replace")
        return True

    def wait_for(self, pattern: str, timeout: float = 60.0, after: int = 0) -> str:
        """Read until ``pattern`` (a regex, on the text without escapes) shows after
        position ``after`` of the plain output; returns the plain output."""
        deadline = time.monotonic() + timeout
        while True:
            shown = plain(self.output)
            if re.search(pattern, shown[after:]):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} did not show in:\n{shown[-3000:]}")
            if not self._read(0.1) and self.process.poll() is not None:
                self._read(0.1)
                if not re.search(pattern, plain(self.output)[after:]):
                    raise AssertionError(f"ended before {pattern!r}:\n{plain(self.output)[-3000:]}")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self._read(0.05):
            pass
        return self.process.wait(timeout=1)

    def left_changed(self) -> list[str]:
        """How the command left the terminal other than it found it: a cursor hidden and
        not shown again, the alternate screen still on, another mode (raw, no echo)."""
        changed = []
        output = self.output
        if output.rfind("\x1b[?25l") > output.rfind("\x1b[?25h"):
            changed.append("the cursor is left hidden")
        if output.rfind("\x1b[?1049h") > output.rfind("\x1b[?1049l"):
            changed.append("the alternate screen is left on")
        mode = termios.tcgetattr(self.master)
        for name in ("ICANON", "ECHO", "ISIG"):
            flag = getattr(termios, name)
            if (mode[3] & flag) != (self.mode[3] & flag):
                changed.append(f"{name} is {'on' if mode[3] & flag else 'off'}")
        return changed

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self.master)
