"""Starting the checking server's process, and starting it early.

The server imports torch (about a second) before it can check anything. A command
that checks code starts it first thing (:func:`start_early`, from
:mod:`trainer.launch`), so that the CLI's own start (typer, the spec, the workspace)
runs while torch imports; the command's :class:`~trainer.checking.runner.CheckingService`
then takes that process over (:func:`take_early`) instead of starting one. What the
command will need once the verdict is in (the console's drawing) is prepared while
the server is not ready yet (:func:`meanwhile`): that wait is idle time on the CLI's side.

Light on purpose: it runs before the CLI's own imports. It imports no torch.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import IO

from trainer.checking import processes

# What the checking server, and so the learner's process, gets of the environment: a
# fixed set, never the user's own variables (a grader's API token, say). Passed on as
# they are: facts of the machine that a library needs (an older OpenBLAS crashes on some
# processors without its core type), never a secret.
_PASSED_ON = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "PYTHONDONTWRITEBYTECODE",
    "CUDA_VISIBLE_DEVICES",
    "TMPDIR",
)


def server_environment() -> dict[str, str]:
    """The checking server's whole environment. Every thread pool has one thread (the
    learner's process may start none)."""
    fixed = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": tempfile.gettempdir(),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }
    return {**fixed, **{n: os.environ[n] for n in _PASSED_ON if n in os.environ}}


class Spawned:
    """A server process just started: it is importing torch, and says ``ready`` on
    ``socket`` when it can check. ``errors`` holds its own output (torch missing, say),
    read when it fails to start."""

    def __init__(
        self, process: subprocess.Popen[bytes], socket: socket.socket, errors: IO[bytes]
    ) -> None:
        self.process, self.socket, self.errors = process, socket, errors

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.close()
        end_server(self.process)
        self.errors.close()


def end_server(process: subprocess.Popen[bytes], grace: float = 0.0) -> None:
    """Reap a server's process: after ``grace`` seconds for it to end by itself (told to,
    its socket closed), its whole group is killed."""
    if grace:
        # Popen.wait(timeout=...) polls, with sleeps of up to 50 ms: at the end of every
        # check, a server that ended at once cost the command ~25-50 ms more.
        ended = processes.ended_within(process.pid, grace)
        if ended is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace)
                return
        elif ended:
            process.wait()
            return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def spawn_server() -> Spawned:
    """Start a checking server's process; do not wait for it."""
    from trainer.checking import server

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    theirs_fd = theirs.fileno()
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys;exec(sys.stdin.read())"],
        stdin=subprocess.PIPE,
        stdout=errors,
        stderr=errors,
        pass_fds=(theirs_fd,),
        start_new_session=True,  # Ctrl-C in the terminal reaches the CLI alone
        env=server_environment(),
    )
    theirs.close()
    assert process.stdin is not None
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    with contextlib.suppress(BrokenPipeError):
        process.stdin.write(server.bootstrap(root, theirs_fd, path).encode())
        process.stdin.close()
    return Spawned(process, ours, errors)


_EARLY: list[Spawned] = []  # at most one: started by start_early, not yet taken
_MEANWHILE: list[Callable[[], None]] = []  # run once, while a server is not ready yet


def start_early(meanwhile: Callable[[], None] | None = None) -> None:
    """Start a server now for the first checking service of this process to take; one
    that nothing took is stopped when the process exits (a usage error, say).
    ``meanwhile``: work of the CLI's to do while the server gets ready (it imports
    torch: idle time here), once, by the first service that waits for it."""
    if meanwhile is not None:
        _MEANWHILE.append(meanwhile)
    if _EARLY:
        return
    _EARLY.append(spawn_server())
    atexit.register(_stop_untaken)


def meanwhile() -> None:
    """Run, once, the work :func:`start_early` was given to do while a server gets ready."""
    while _MEANWHILE:
        _MEANWHILE.pop(0)()


def take_early() -> Spawned | None:
    """The server :func:`start_early` started, once; None when there is none."""
    return _EARLY.pop() if _EARLY else None


def _stop_untaken() -> None:
    while _EARLY:
        _EARLY.pop().kill()
