"""A warm checking process: torch imported once, one forked child per check.

Started by :class:`trainer.checking.warm.WarmChecker` for watch mode and
grading. It never runs a learner's code itself: for each job it forks a child
that runs :func:`trainer.checking.child.run` exactly as a cold check would, in
a session of its own, with the result, output and token pipes the parent sent
over the socket. It reports each child's pid when started and its exit status
when reaped.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import sys
from typing import Any

MAX_JOB = 64 * 1024 * 1024


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall((json.dumps(message) + "\n").encode())


# Plans (inputs, references, expected gradients) by spec file, its version and
# seed. Computing one is trusted work, the same for every check of an exercise,
# and the first torch ops of a process are slow: forks inherit a cached plan.
_PLANS: dict[tuple[str, int, int], Any] = {}


def _plan(job: dict[str, Any]) -> Any:
    from pathlib import Path

    from trainer.checking.plan import build_plan
    from trainer.spec import load_exercise

    path = Path(job["spec_path"])
    try:
        key = (str(path), path.stat().st_mtime_ns, int(job["seed"]))
        if key not in _PLANS:
            _PLANS[key] = build_plan(load_exercise(path, job["spec_name"]), key[2])
        return _PLANS[key]
    except Exception:  # the child builds it again and reports the problem
        return None


def _spawn(sock: socket.socket, job: dict[str, Any], fds: list[int]) -> None:
    result_fd, output_fd, token_fd = fds
    plan = _plan(job)
    pid = os.fork()
    if pid == 0:  # the checking child of this one job
        try:
            os.setsid()  # its own group: a timeout ends it and the learner's process
            sock.close()
            os.chdir(job.get("cwd") or ".")
            os.dup2(output_fd, 1)
            os.dup2(output_fd, 2)
            os.close(output_fd)
            marker = job.get("marker")
            if isinstance(marker, str):
                os.environ["TRAINER_CHECK_ID"] = marker
            from trainer.checking.child import run

            run(job, token_fd=token_fd, result_fd=result_fd, plan=plan)
        finally:
            os._exit(5)
    for fd in fds:
        os.close(fd)
    _send(sock, {"pid": pid})


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        with contextlib.suppress(OSError):
            _send(sock, {"exit": pid, "code": code})


def serve(sock: socket.socket) -> None:
    import torch

    import trainer.checking.child
    import trainer.checking.plan
    import trainer.checking.stages  # noqa: F401

    torch.set_num_threads(1)
    _send(sock, {"ready": True})
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    while True:
        if selector.select(timeout=0.05):
            try:
                data, fds, _, _ = socket.recv_fds(sock, MAX_JOB, 3)
            except OSError:
                break
            if not data:
                break  # the parent went away
            try:
                job = json.loads(data)
            except ValueError:
                for fd in fds:
                    os.close(fd)
                continue
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                _send(sock, {"pid": 0})
                continue
            _spawn(sock, job, fds)
        _reap(sock)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(sock)
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
