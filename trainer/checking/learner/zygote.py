"""The learner zygote: a clean process that forks one learner process per check.

Forked by the server before any job existed (see :mod:`trainer.checking.server`),
so it has torch and the learner-side modules loaded and nothing else: no spec,
no plan, no reference, no expected value. A checker asks it for a learner
process with one control frame carrying three descriptors:

* a ``SOCK_SEQPACKET`` control socket, private to that learner process: the
  zygote reports ``{"pid"}`` at once and ``{"exit", "code"}`` when the process
  ends; ``{"op": "stop"}``, or the checker closing its end, ends the process
  and everything it started;
* the stream socket the learner process serves forward/backward calls on;
* the output pipe its stdout and stderr go to.

The zygote adopts orphans (subreaper), so a process the learner's code started
in a new session cannot outlive the check either.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import resource
import selectors
import socket
import sys
from dataclasses import dataclass
from typing import Any

from trainer.checking import processes, transport
from trainer.checking.learner import confine, loading
from trainer.checking.report import ProtectionLevel


@dataclass
class LearnerTask:
    """What a fresh learner process needs: the few facts of the exercise, its socket."""

    learner: dict[str, Any]  # class name, parameter names, outputs, file, source
    fd: int
    protection: ProtectionLevel | None = None  # what it runs under, decided before the file ran


@dataclass
class _Learner:
    control: socket.socket
    exit_code: int | None = None
    scratch: str | None = None  # its own folder (host protection), removed when it ends


class _ZygoteExit(Exception):
    pass


def _import_once(modules: object) -> None:
    """Import, here before forking, the torch modules a checker says its learner
    process's calls will import on first use (``Stage.learner_imports``): once for all
    learner processes, and not out of their memory cap. Module names only, torch's only:
    nothing of a plan."""
    wanted = modules if isinstance(modules, list) else []
    missing = sorted(
        {m for m in wanted if isinstance(m, str) and m.startswith("torch.")} - set(sys.modules)
    )
    if not missing:
        return
    for module in missing:
        with contextlib.suppress(Exception):  # a learner process that needs it imports it
            importlib.import_module(module)
    gc.collect()  # as in serve: learner processes start just after a full collection


def serve(sock: socket.socket) -> LearnerTask:
    """Fork learner processes on request; returns only in a forked learner process."""
    processes.become_subreaper()
    confine.prepare()
    # Every learner process starts just after a full collection: torch's import leaves
    # enough objects waiting that a learner's first allocations would otherwise set off
    # a full one in it (walking, and so copying, all of torch: ~0.1 s). Nothing is
    # frozen here: in the learner's process gc works as in any program.
    gc.collect()
    learners: dict[int, _Learner] = {}
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ, None)
    try:
        while True:
            for key, _ in selector.select(timeout=0.05):
                if key.data is None:
                    task = _on_request(sock, selector, learners)
                    if task is not None:
                        return task
                else:
                    _on_control(key.data, selector, learners)
            _reap(learners)
    except _ZygoteExit:
        for pid in list(learners):
            _stop(pid, learners, selector)
        processes.end_strays()
        os._exit(0)


def _on_request(
    sock: socket.socket, selector: selectors.BaseSelector, learners: dict[int, _Learner]
) -> LearnerTask | None:
    try:
        header, fds = transport.receive_with_fds(sock, 3)
    except (transport.WireError, OSError):
        raise _ZygoteExit from None  # the server went away
    if header.get("op") != "spawn" or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    control_fd, learner_fd, output_fd = fds
    _import_once(header.get("imports"))
    scratch = _scratch_folder()
    # As root, the learner process's process cap is a pids cgroup, which this process
    # moves it into while it confines itself; it waits for the word on this pipe.
    cap = confine.pids_cgroup_limit(header.get("confine"))
    word_read, word_write = os.pipe() if cap is not None else (-1, -1)
    pid = os.fork()
    if pid == 0:
        header["scratch"] = scratch
        if word_write >= 0:
            os.close(word_write)
        return _become_learner(
            sock, selector, learners, header, control_fd, learner_fd, output_fd, word_read
        )
    os.close(learner_fd)
    os.close(output_fd)
    control = socket.socket(fileno=control_fd)
    learners[pid] = _Learner(control, scratch=scratch)
    selector.register(control, selectors.EVENT_READ, pid)
    with contextlib.suppress(OSError):
        transport.send_with_fds(control, {"pid": pid})
    if cap is not None:
        os.close(word_read)
        confine.move_into_pids_cgroup(pid, cap, word_write)
    return None


def _become_learner(
    sock: socket.socket,
    selector: selectors.BaseSelector,
    learners: dict[int, _Learner],
    header: dict[str, Any],
    control_fd: int,
    learner_fd: int,
    output_fd: int,
    word: int = -1,
) -> LearnerTask:
    """In the forked child: shed every descriptor but its own, then go. ``word``: where the
    zygote says it moved this process into its pids cgroup (-1: it does not move it)."""
    os.setsid()  # its own group: ending the group ends what it started
    selector.close()  # the zygote's epoll instance: shared, its interest list included
    sock.close()
    os.close(control_fd)
    for learner in learners.values():
        learner.control.close()
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    processes.set_dumpable(True)
    limit = header.get("memory_limit_mb")
    memory = limit_memory(limit)
    if memory:
        loading.MEMORY_LIMIT_MB = int(limit)  # type: ignore[arg-type]
    facts = header.get("learner")
    facts = facts if isinstance(facts, dict) else {}
    # Host protection (issue 16), before anything of the learner's runs.
    scratch = header.get("scratch")
    if scratch:
        facts["cwd"] = scratch
    file = str(facts.get("file", ""))
    moved = confine.moved_word(word) if word >= 0 else None
    protection = confine.confine(header.get("confine"), scratch, file, memory, moved)
    return LearnerTask(facts, learner_fd, protection)


def _scratch_folder() -> str | None:
    try:
        return confine.scratch_folder()
    except OSError:
        return None  # the level will say that files are not confined


def _on_control(pid: int, selector: selectors.BaseSelector, learners: dict[int, _Learner]) -> None:
    learner = learners.get(pid)
    if learner is None:
        return
    try:
        header, fds = transport.receive_with_fds(learner.control, 0)
    except (transport.WireError, OSError):
        header, fds = {"op": "stop"}, []  # the checker is gone: so is its learner
    for fd in fds:
        os.close(fd)
    if header.get("op") == "stop":
        _stop(pid, learners, selector)


def _stop(pid: int, learners: dict[int, _Learner], selector: selectors.BaseSelector) -> None:
    """End the learner process, its group and whatever it left behind; say so; forget it."""
    learner = learners.pop(pid)
    processes.kill_group(pid)
    if learner.exit_code is None:
        with contextlib.suppress(ChildProcessError):
            _, status = os.waitpid(pid, 0)
            learner.exit_code = processes.exit_code(status)
    processes.end_strays(keep=set(learners))
    confine.release(pid, learner.scratch)
    with contextlib.suppress(OSError):
        transport.send_with_fds(learner.control, {"stopped": True, "code": learner.exit_code})
    with contextlib.suppress(KeyError, ValueError):
        selector.unregister(learner.control)
    learner.control.close()


def _reap(learners: dict[int, _Learner]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        learner = learners.get(pid)
        if learner is not None and learner.exit_code is None:
            learner.exit_code = processes.exit_code(status)
            with contextlib.suppress(OSError):
                transport.send_with_fds(learner.control, {"exit": pid, "code": learner.exit_code})


def limit_memory(megabytes: object) -> str | None:
    """Cap the address space: a runaway allocation fails here, it does not freeze the machine.

    The cap is what the process already maps (torch is large) plus ``megabytes``; the
    hard limit too, so the learner's code cannot lift it. Returns how, or None: no cap.
    """
    if not isinstance(megabytes, int) or megabytes <= 0:
        return None
    try:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None  # not Linux: no cap
    cap = mapped + megabytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return f"{megabytes} MiB beyond torch (RLIMIT_AS)"
