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

Each learner process is made by a fork of the zygote that enters fresh
namespaces and forks once more (:func:`confine.enter_namespaces`): the learner's
process is process 1 of a PID namespace of its own, adopted by the zygote
(a subreaper) when that fork ends. It can start no process or thread
(:mod:`confine`), and nothing it does to its folder outlives it.

The zygote makes the next check's process ahead, while the current check runs (a
*spare*: forked, in its memory cgroup and namespaces, waiting for a header): that is
most of the time a learner process takes to start (about 20 ms of 35 on this
project's 2-core machine, the cgroup move alone 6 to 15). A check that leaves a
protection out, or needs a module imported after the spare was made, makes its own.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import resource
import selectors
import signal
import socket
import sys
import traceback
from dataclasses import dataclass

from trainer.checking import processes, protocol, transport
from trainer.checking.learner import confine, derivation, guard, loading
from trainer.checking.report import ProtectionLevel


@dataclass
class LearnerTask:
    """What a fresh learner process needs: the few facts of the exercise, its socket."""

    learner: protocol.LearnerFacts
    fd: int
    protection: ProtectionLevel | None = None  # what it runs under, decided before the file ran


@dataclass
class _Learner:
    control: socket.socket
    exit_code: int | None = None
    scratch: str | None = None  # its own folder (host protection), removed when it ends
    cpu_seconds: int | None = None  # its CPU-time cap: a kill at it is named as such


@dataclass
class _Spare:
    """A learner process made before its check: forked, in a memory cgroup and fresh
    namespaces of its own, waiting on ``hand`` for the check's header and descriptors.
    What it skips (the zygote's fork, the cgroup's move, the namespaces) is most of
    the time a learner process takes to start."""

    hand: socket.socket  # SOCK_SEQPACKET: the header and two descriptors go down it
    pid: int
    scratch: str
    imported: int  # how many times the zygote had imported modules for checks when forked
    cgroup: bool  # whether it is in a memory cgroup of its own


# How many times the zygote has imported modules a check asked for (``_import_once``): a
# spare made before the last time lacks them. A count, not a set of the module names:
# building one for each spare would touch, and so copy from the zygote, every name's page.
_IMPORTS = [0]


class _ZygoteExit(Exception):
    pass


def _fork() -> int:
    """``os.fork`` for a learner process, with what it reads of the zygote's state
    brought up to date first (the trainer's modules, for ``serve.look_plain``)."""
    from trainer.checking.learner import serve  # it imports this module

    serve.list_our_modules()
    return os.fork()


def _make_spare(
    sock: socket.socket, selector: selectors.BaseSelector, learners: dict[int, _Learner]
) -> _Spare | LearnerTask | None:
    """Make the next check's learner process now; in that process, once its check has
    come, the task (this returns twice, as ``fork`` does). None: it could not be made
    (the next check makes its own)."""
    scratch = _scratch_folder()
    if scratch is None:
        return None
    hand, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    said, say = os.pipe()
    cgroup_said, cgroup_say = os.pipe()
    fork = _fork()
    if fork == 0:
        os.close(said)
        os.close(cgroup_said)
        hand.close()
        try:
            return _become_spare(sock, selector, learners, theirs, scratch, say, cgroup_say)
        except BaseException:  # never back into the zygote's loop: this is not the zygote
            os._exit(1)
    theirs.close()
    os.close(say)
    os.close(cgroup_say)
    with os.fdopen(cgroup_said, "rb") as word:
        cgroup = word.read(1) == b"1"
    pid = _pid_of(fork, said)
    if pid <= 0:
        hand.close()
        confine.release(scratch)
        return None
    return _Spare(hand, pid, scratch, _IMPORTS[0], cgroup)


def _become_spare(
    sock: socket.socket,
    selector: selectors.BaseSelector,
    learners: dict[int, _Learner],
    hand: socket.socket,
    scratch: str,
    say: int,
    cgroup_say: int,
) -> LearnerTask:
    """In the zygote's fork: as :func:`_become_learner`, with the default settings (every
    protection) and no memory cap yet, then wait for a check."""
    _leave_the_zygote(sock, selector, learners)
    os.write(cgroup_say, b"1" if confine.enter_memory_cgroup(scratch, None) else b"0")
    os.close(cgroup_say)
    namespaces = _first_process(None, say)
    try:
        header, fds = transport.receive_with_fds(hand, 2)
        spawn = protocol.Spawn.from_wire(header)
    except (transport.WireError, OSError):
        os._exit(0)  # discarded: the zygote closed its end
    hand.close()
    if len(fds) != 2:
        os._exit(0)
    learner_fd, output_fd = fds
    spawn.scratch = scratch
    return _sealed(spawn, learner_fd, output_fd, namespaces, spawn.cgroup)


def _spare_for(spawn: protocol.Spawn, spares: list[_Spare]) -> _Spare | None:
    """The spare learner process, if it fits this check: made with every protection (a
    check that leaves one out makes its own) and after every module the check's calls
    need was imported. A spare that does not fit is ended."""
    if not spares:
        return None
    spare = spares.pop()
    missing = any(module not in sys.modules for module in spawn.imports)
    if confine.skipped(spawn.confine) or missing or spare.imported != _IMPORTS[0]:
        _discard(spare)
        return None
    return spare


def _hand_over(spare: _Spare, spawn: protocol.Spawn, learner_fd: int, output_fd: int) -> int:
    """Give the spare its check: the memory cap first, then the header and descriptors.
    Returns its pid, or 0 if it is gone."""
    if spare.cgroup:
        spawn.cgroup = confine.cap_memory_cgroup(
            spare.scratch, spawn.confine, spawn.memory_limit_mb, spare.pid
        )
    try:
        transport.send_with_fds(spare.hand, spawn.to_wire(), [learner_fd, output_fd])
    except (OSError, transport.WireError):
        _discard(spare)
        return 0
    spare.hand.close()
    return spare.pid


def _discard(spare: _Spare) -> None:
    """End a spare that will not be used, and remove its folder and cgroup."""
    spare.hand.close()
    processes.kill_group(spare.pid)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(spare.pid, 0)
    confine.release(spare.scratch)


def _import_once(modules: object) -> None:
    """Import, here before forking, the torch modules a checker says its learner
    process's calls will import on first use (``Stage.learner_imports``): once for all
    learner processes, and not out of their memory cap. Module names only, torch's only:
    nothing of a plan."""
    wanted = modules if isinstance(modules, list) else []
    missing = sorted(
        {
            m
            for m in wanted
            if isinstance(m, str) and m.startswith("torch.") and m not in sys.modules
        }
    )
    if not missing:
        return
    _IMPORTS[0] += 1  # a spare made before has not got them
    for module in missing:
        with contextlib.suppress(Exception):  # a learner process that needs it imports it
            importlib.import_module(module)
    guard.prepare(guard.guarded_classes())  # an import may have bound new names
    derivation.find_torch_formulas()
    gc.freeze()  # as in serve: no learner's collection walks them


def serve(sock: socket.socket) -> LearnerTask:
    """Fork learner processes on request; returns only in a forked learner process."""
    processes.become_subreaper()
    confine.prepare()
    # What torch's import made is frozen: a learner's collections never walk it (a full
    # one would, and write to, so copy, every page of torch's objects: ~0.1 s), and no
    # collection of it here delays the first learner process (~80 ms). What the
    # learner's own code makes is collected as in any program.
    guard.prepare(guard.guarded_classes())  # each learner process's, made once
    derivation.find_torch_formulas()  # torch's Python formulas, watched for
    gc.freeze()
    learners: dict[int, _Learner] = {}
    spares: list[_Spare] = []  # at most one: the next check's process, made ahead
    ahead = [True]  # whether to make it: not once a check said none follows
    checks = [0]  # the checks asked for so far (a check's second process is not one)
    collapsed: list[bool] = []
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ, None)
    try:
        while True:
            if not spares and ahead[0]:
                made = _make_spare(sock, selector, learners)
                if isinstance(made, LearnerTask):
                    return made  # in the spare, once its check came
                spares.extend([made] if made else [])
            for key, _ in selector.select(timeout=0.05):
                try:
                    if key.data is None:
                        task = _on_request(sock, selector, learners, spares, ahead, checks)
                        if task is not None:
                            return task
                        if checks[0] == processes.HUGE_PAGES_FROM_CHECK and not collapsed:
                            collapsed.append(True)
                            processes.collapse_to_huge_pages()  # before the next spare
                    else:
                        _on_control(key.data, selector, learners, spares)
                except _ZygoteExit:
                    raise
                except Exception:  # a bug of ours in one check must not end every other one
                    traceback.print_exc()
            _reap(learners)
    except _ZygoteExit:
        for pid in list(learners):
            _stop(pid, learners, selector, spares)
        while spares:
            _discard(spares.pop())
        processes.end_strays()
        os._exit(0)


def _on_request(
    sock: socket.socket,
    selector: selectors.BaseSelector,
    learners: dict[int, _Learner],
    spares: list[_Spare],
    ahead: list[bool],
    checks: list[int],
) -> LearnerTask | None:
    try:
        header, fds = transport.receive_with_fds(sock, 3)
    except (transport.WireError, OSError):
        raise _ZygoteExit from None  # the server went away
    try:
        spawn = protocol.Spawn.from_wire(header)
    except transport.WireError:
        spawn = None
    if spawn is None or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    control_fd, learner_fd, output_fd = fds
    ahead[0] = spawn.more  # a later request without a spare makes its own process
    checks[0] += not spawn.second
    _import_once(spawn.imports)
    spare = _spare_for(spawn, spares)
    pid = _hand_over(spare, spawn, learner_fd, output_fd) if spare is not None else 0
    if spare is not None and pid:
        scratch: str | None = spare.scratch
    else:  # no spare, or a spare that is gone: make one now
        scratch = _scratch_folder()
        # The fork enters fresh namespaces and forks the learner's process, process 1 of
        # its own PID namespace; it says that process's pid (as seen here) on this pipe.
        said, say = os.pipe()
        fork = _fork()
        if fork == 0:
            os.close(said)
            spawn.scratch = scratch
            try:
                return _become_learner(
                    sock, selector, learners, spawn, control_fd, learner_fd, output_fd, say
                )
            except BaseException:  # never back into the zygote's loop: this is not the zygote
                os._exit(1)
        os.close(say)
        pid = _pid_of(fork, said)
    os.close(learner_fd)
    os.close(output_fd)
    control = socket.socket(fileno=control_fd)
    if pid <= 0:  # the fork failed before it could make one
        with contextlib.suppress(OSError):
            transport.send_with_fds(control, {"pid": 0})
        control.close()
        confine.release(scratch)
        return None
    cpu = confine.cpu_seconds(spawn.confine)
    learners[pid] = _Learner(control, scratch=scratch, cpu_seconds=cpu)
    selector.register(control, selectors.EVENT_READ, pid)
    with contextlib.suppress(OSError):
        transport.send_with_fds(control, {"pid": pid})
    return None


def _pid_of(fork: int, said: int) -> int:
    """The learner process's pid, as ``fork`` (which made it) says it on ``said``; the
    fork is waited for once it has ended."""
    pid = _read_pid(said)
    if pid != fork:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(fork, 0)  # it ended once it had made the learner's process
    return pid


def _read_pid(fd: int) -> int:
    """The learner process's pid, as its maker says it (0 when it said nothing)."""
    data = b""
    try:
        while len(data) < 8 and (chunk := os.read(fd, 8 - len(data))):
            data += chunk
    except OSError:
        data = b""
    finally:
        os.close(fd)
    return int.from_bytes(data, "little") if len(data) == 8 else 0


def _become_learner(
    sock: socket.socket,
    selector: selectors.BaseSelector,
    learners: dict[int, _Learner],
    spawn: protocol.Spawn,
    control_fd: int,
    learner_fd: int,
    output_fd: int,
    say: int,
) -> LearnerTask:
    """In the zygote's fork: shed every descriptor but the learner's own, enter fresh
    namespaces and, where a PID namespace was entered, fork the learner's process (its
    first process) and end; ``say`` carries the learner process's pid to the zygote."""
    _leave_the_zygote(sock, selector, learners)
    os.close(control_fd)
    cgroup = confine.join_memory_cgroup(spawn.scratch, spawn.confine, spawn.memory_limit_mb)
    namespaces = _first_process(spawn.confine, say)
    return _sealed(spawn, learner_fd, output_fd, namespaces, cgroup)


def _leave_the_zygote(
    sock: socket.socket, selector: selectors.BaseSelector, learners: dict[int, _Learner]
) -> None:
    """In the zygote's fork: a process group of its own (ending the group ends what it
    started), and none of the zygote's descriptors."""
    os.setsid()
    selector.close()  # the zygote's epoll instance: shared, its interest list included
    sock.close()
    for learner in learners.values():
        learner.control.close()


def _first_process(settings: object, say: int) -> dict[str, str]:
    """Enter fresh namespaces; where a PID namespace was entered, fork its first process
    (the learner's) and end. ``say`` carries that process's pid to the zygote. Returns,
    in the learner's process, what was entered."""
    namespaces = confine.enter_namespaces(settings)
    if "pid" in namespaces:
        try:
            child = os.fork()
        except OSError:
            os._exit(1)
        if child:
            with contextlib.suppress(OSError):
                os.write(say, child.to_bytes(8, "little"))
            os._exit(0)
    else:
        with contextlib.suppress(OSError):
            os.write(say, os.getpid().to_bytes(8, "little"))
    os.close(say)
    return namespaces


def _sealed(
    spawn: protocol.Spawn,
    learner_fd: int,
    output_fd: int,
    namespaces: dict[str, str],
    cgroup: str | None,
) -> LearnerTask:
    """In the learner's process, its namespaces entered: output to the check's pipe, the
    memory cap, then host protection, before anything of the learner's runs."""
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    processes.set_dumpable(True)
    limit = spawn.memory_limit_mb
    memory = limit_memory(limit)
    if memory and limit is not None:
        loading.MEMORY_LIMIT_MB = limit
        if cgroup:
            memory += f" and {cgroup}"
    facts = spawn.learner
    # Host protection, before anything of the learner's runs.
    scratch = spawn.scratch
    if scratch:
        facts.cwd = scratch
    protection = confine.confine(spawn.confine, scratch, facts.file, memory, namespaces)
    return LearnerTask(facts, learner_fd, protection)


def _scratch_folder() -> str | None:
    try:
        return confine.scratch_folder()
    except OSError:
        return None  # the level will say that files are not confined


def _on_control(
    pid: int,
    selector: selectors.BaseSelector,
    learners: dict[int, _Learner],
    spares: list[_Spare],
) -> None:
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
        _stop(pid, learners, selector, spares)


def _stop(
    pid: int,
    learners: dict[int, _Learner],
    selector: selectors.BaseSelector,
    spares: list[_Spare],
) -> None:
    """End the learner process, its group and whatever it left behind; say so; forget it."""
    learner = learners.pop(pid)
    processes.kill_group(pid)
    if learner.exit_code is None:
        with contextlib.suppress(ChildProcessError):
            _, status, usage = os.wait4(pid, 0)
            learner.exit_code = _exit_code(learner, status, usage)
    processes.end_strays(keep=set(learners) | {spare.pid for spare in spares})
    confine.release(learner.scratch)
    with contextlib.suppress(OSError):
        transport.send_with_fds(learner.control, {"stopped": True, "code": learner.exit_code})
    with contextlib.suppress(KeyError, ValueError):
        selector.unregister(learner.control)
    learner.control.close()


def _reap(learners: dict[int, _Learner]) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        learner = learners.get(pid)
        if learner is not None and learner.exit_code is None:
            learner.exit_code = _exit_code(learner, status, usage)
            with contextlib.suppress(OSError):
                transport.send_with_fds(learner.control, {"exit": pid, "code": learner.exit_code})


def _exit_code(learner: _Learner, status: int, usage: resource.struct_rusage) -> int:
    """How the learner's process ended. Process 1 of its PID namespace ignores SIGXCPU, so
    the CPU-time cap kills it outright: a kill after that much CPU time is named SIGXCPU."""
    code = processes.exit_code(status)
    spent = usage.ru_utime + usage.ru_stime
    if code == -signal.SIGKILL and learner.cpu_seconds and spent >= learner.cpu_seconds - 0.5:
        return -signal.SIGXCPU
    return code


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
