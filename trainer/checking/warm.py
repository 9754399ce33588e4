"""The warm checker: one process imports torch, every check is a fork of it.

For watch mode, grading and validation, where many checks follow each other.
The process is :mod:`trainer.checking.zygote`; the forked child runs exactly
what a cold check runs, with the same pipes, token and isolation. The CLI side
(this module) imports no torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

from trainer.checking.runner import Launched, child_env
from trainer.errors import TrainerError


class WarmChecker:
    """A process that has imported torch once; every check is a fork of it.

    For watch mode and grading, where many checks follow each other: a check
    then costs what the stages cost, not an interpreter and a torch import.
    The forked child runs exactly what a cold check runs, with the same pipes,
    token and isolation.
    """

    def __init__(self, ready_timeout: float = 120.0) -> None:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "trainer.checking.zygote", str(child_end.fileno())],
            pass_fds=(child_end.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=child_env(None),
            start_new_session=True,
        )
        child_end.close()
        self._socket = parent_end
        self._send_lock = threading.Lock()
        self._changed = threading.Condition()
        self._pids: list[int] = []
        self._exits: dict[int, int] = {}
        self._ready = False
        self._gone = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        with self._changed:
            self._changed.wait_for(lambda: self._ready or self._gone, timeout=ready_timeout)
        if not self._ready:
            self.close()
            raise TrainerError(
                "the warm checking process did not start (is torch installed in this environment?)"
            )

    def _read(self) -> None:
        while True:
            try:
                data = self._socket.recv(65536)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self._gone = True
                    self._changed.notify_all()
                    return
                for line in data.splitlines():
                    message = json.loads(line)
                    if "ready" in message:
                        self._ready = True
                    elif "pid" in message:
                        self._pids.append(int(message["pid"]))
                    elif "exit" in message:
                        self._exits[int(message["exit"])] = int(message["code"])
                self._changed.notify_all()

    def launch(self, job: dict[str, Any], token: str) -> Launched:
        result_read, result_write = os.pipe()
        output_read, output_write = os.pipe()
        token_read, token_write = os.pipe()
        try:
            with self._send_lock, self._changed:
                socket.send_fds(
                    self._socket,
                    [json.dumps(job).encode()],
                    [result_write, output_write, token_read],
                )
                self._changed.wait_for(lambda: bool(self._pids) or self._gone, timeout=30)
                pid = self._pids.pop(0) if self._pids else 0
        except OSError as error:
            pid = 0
            reason = error.strerror
        else:
            reason = "it stopped"
        finally:
            for fd in (result_write, output_write, token_read):
                os.close(fd)
        if pid <= 0:
            for fd in (result_read, output_read, token_write):
                os.close(fd)
            raise TrainerError(f"the warm checking process could not start a check ({reason}).")
        # The token goes in only now; the child reads it after forking the learner's process.
        os.write(token_write, f"{token}\n".encode())
        os.close(token_write)

        def returncode(wait: float) -> int | None:
            with self._changed:
                self._changed.wait_for(lambda: pid in self._exits or self._gone, timeout=wait)
                return self._exits.pop(pid, None)

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

        return Launched(pid, result_read, output_read, returncode, kill)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> WarmChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
