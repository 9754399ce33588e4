"""The checking server: torch imported once, a clean learner zygote, one checker per job.

Started by :class:`trainer.checking.runner.CheckingService`. The order of the
first steps is the point of this module:

1. import torch and the learner-side modules, nothing else of the trainer;
2. fork the learner zygote (:mod:`trainer.checking.learner.zygote`): every
   learner process will be a fork of it, so none ever holds a spec, a plan, a
   reference or an expected value: they did not exist when it was forked;
3. only then become the trusted server: import the checker, make this process
   unreadable to others (not dumpable), adopt orphans (subreaper), and serve.

For each job the CLI sends one control frame with three descriptors (the job
pipe, the result pipe, the output pipe). The server reads the job, builds or
reuses the exercise's plan, and forks a checker for it in a session of its own.

A check of one of the catalogue's own files (``Job.catalogue_file``: validate's
references, stubs and wrong variants) may be served by a checker that finished
another check of the same exercise and is waiting for the next (:class:`_Pool`):
those files are as trusted as the checker, and a fork of this process per check
(copying its page tables, then the pages the checker writes) cost about a third
of such a check. A learner's file always gets a checker of its own.

A bug of ours is never a failing check: the server sends its traceback on the
control socket (``{"bug": ...}``) and stops; a checker's, outside the stages'
bodies, goes on the result pipe as a ``bug`` frame (:mod:`trainer.bugs`). Only
torch failing to import is the environment's problem: that is printed.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import hashlib
import os
import selectors
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainer.checking import processes, transport
from trainer.checking.job import Job

# Plans by (spec, seed): computing one is trusted work, the same for every
# check of an exercise, and forks inherit a cached plan. Only the last few are kept:
# a plan holds a few MB of tensors, and every fork copies this process's page tables.
_PLANS: collections.OrderedDict[tuple[str, int], Any] = collections.OrderedDict()
PLANS_KEPT = 4
# The bytes the reference solution saves for backward (advice), per plan and solution
# version: worked out once here too, not again in every check.
_SAVED: dict[tuple[tuple[str, int], str, str], dict[str, int]] = {}


def bootstrap(root: str, control_fd: int, path: Sequence[str] = ()) -> str:
    """The code the server's interpreter runs (read from stdin, so that the command
    line is a plain ``python -c`` and names no module of ours). ``path``: the folders
    the CLI's ``PYTHONPATH`` adds, since the server gets none of the CLI's environment."""
    # The module name is spelled out at run time so that the code object at the
    # bottom of every learner process's stack does not carry it as a constant.
    hexed = __name__.encode().hex()
    return (
        # The collector off before anything is imported: see main().
        "import gc\ngc.disable()\n"
        "import sys, importlib\n"
        f"sys.path[0:0] = {[p for p in path if p]!r}\n"
        f"sys.path.insert(0, {root!r})\n"
        f"importlib.import_module(bytes.fromhex({hexed!r}).decode()).main({control_fd})()\n"
    )


def main(control_fd: int) -> Callable[[], None]:
    """Serve jobs until the CLI goes away. Returns only in a learner process, with
    what that process must run, so that none of the server's frames stay below it."""
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    os.close(stdin)
    control = socket.socket(fileno=control_fd)

    # torch's import makes ~170,000 objects: the collections it would set off along the
    # way cost ~0.3 s, and one full collection after it (here and in the zygote)
    # costs ~0.1 s. The collector is back on in both before any check runs.
    gc.disable()
    try:
        import torch  # noqa: F401
    except BaseException:  # not a bug of ours: the CLI shows this with its advice
        traceback.print_exc()
        os._exit(1)
    try:
        return _become_server(control)
    except Exception:  # a bug of ours, before or while serving (never in a learner process)
        send_bug(control)
        os._exit(1)


def send_bug(control: socket.socket) -> None:
    """Tell the CLI the traceback of the exception being handled: a bug of the server's."""
    with contextlib.suppress(BaseException):
        transport.send_with_fds(
            control, {"bug": traceback.format_exc()[-transport.MAX_DATAGRAM // 2 :]}
        )


def _become_server(control: socket.socket) -> Callable[[], None]:
    """Fork the zygote, then serve; returns only in a learner process."""
    import torch

    from trainer.checking.learner import serve, zygote

    # Tiny tensors: threads cost more than they save. One intra-op and one inter-op
    # thread, set before any pool exists: the learner's process may start no thread.
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # set already (a test's server in-process)
        torch.set_num_interop_threads(1)
    to_zygote, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zygote_pid = os.fork()
    if zygote_pid == 0:
        control.close()
        to_zygote.close()
        serve.prepare_to_look_plain()
        gc.enable()  # as in any program, in the zygote and in every learner process
        task = zygote.serve(zygote_end)  # returns only in a forked learner process
        serve.look_plain()
        return functools.partial(serve.run, task)
    zygote_end.close()
    _serve(control, to_zygote, zygote_pid)
    os._exit(0)


def _serve(control: socket.socket, to_zygote: socket.socket, zygote_pid: int) -> None:
    processes.set_dumpable(False)
    processes.become_subreaper()
    from trainer.checking.trusted import checker

    checker.warm_up()
    _settle()
    transport.send_with_fds(control, {"ready": True})
    checkers: set[int] = set()
    started = 0
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    pool = _Pool(selector)
    try:
        while True:
            events = selector.select(timeout=0.05)
            for key, _ in events:
                if key.data is not None:  # a checker of the pool, done with its job
                    pool.heard(key.data)
            if any(key.data is None for key, _ in events):
                try:
                    header, fds = transport.receive_with_fds(control, 3)
                except (transport.WireError, OSError):
                    return  # the CLI went away, or sent nonsense
                if header.get("op") == "check" and len(fds) == 3:
                    alone = header.get("alone") is True  # no other check of the CLI's runs
                    pid = _start_checker(control, to_zygote, fds, alone=alone, pool=pool)
                    checkers.add(pid)
                    transport.send_with_fds(control, {"pid": pid})
                    started += 1
                    if started == processes.HUGE_PAGES_FROM_CHECK:
                        processes.collapse_to_huge_pages()  # while that checker works
                else:
                    for fd in fds:
                        os.close(fd)
                    transport.send_with_fds(control, {"pid": 0})
            if not _reap(control, checkers, zygote_pid, pool):
                return
    finally:
        pool.close()
        for pid in checkers:
            processes.kill_group(pid)
        to_zygote.close()  # the zygote ends every learner process, then itself
        with contextlib.suppress(ChildProcessError):
            os.waitpid(zygote_pid, 0)
        processes.end_strays()


def _reap(control: socket.socket, checkers: set[int], zygote_pid: int, pool: _Pool) -> bool:
    """Report ended checkers; False once the zygote is gone (nothing more can be checked)."""
    ended = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            break
        if pid == zygote_pid:
            return False
        if pid in checkers:
            checkers.discard(pid)
            pool.ended(pid)
            ended = True
            with contextlib.suppress(OSError):
                transport.send_with_fds(control, {"exit": pid, "code": processes.exit_code(status)})
    if ended:
        # Orphans adopted while that check ran (a learner process whose zygote was
        # killed, say) end with it.
        processes.end_strays(keep={*checkers, zygote_pid})
    return True


def _settle() -> None:
    """Keep the cyclic garbage collector off what every checker inherits (torch, the
    stages and what they import): a full collection in a checker would walk all of it,
    and write to every page it walks, which the checker then copies from this process.
    Only this trusted server freezes: the learner zygote was forked before. Plans are
    not frozen: they are let go (:func:`_plan`).

    No collection first: after torch's import it walks ~350,000 objects (0.1-0.2 s on
    the way to every first check) to free ~7,000 (a few hundred KB), which stay."""
    gc.freeze()
    gc.enable()  # off while torch was imported (main)


def _let_go() -> None:
    """Free what dropped plans held and give the memory back to the system, so that
    forks stop copying page tables for it."""
    gc.collect()
    processes.give_back_free_memory()


def plan_for(job: Job | None) -> Any:
    """The plan the server hands this job's checker: its own kept one when the job asks
    for it (None: the checker works one out)."""
    return _plan(job) if job is not None and job.more_checks else None


def _plan(job: Job) -> Any:
    from trainer.checking.trusted.checker import build_job_plan, warm_up_for

    key = job.plan_key
    if key in _PLANS:
        _PLANS.move_to_end(key)
        return _PLANS[key]
    imported = len(sys.modules)
    with contextlib.suppress(Exception):  # a checker that needs it imports it itself
        warm_up_for(job)
    if len(sys.modules) > imported:
        _settle()
    try:
        plan = build_job_plan(job)
    except Exception:  # the checker builds it again and reports the problem
        return None
    _PLANS[key] = plan
    if len(_PLANS) > PLANS_KEPT:
        dropped, _ = _PLANS.popitem(last=False)
        for saved in [k for k in _SAVED if k[0] == dropped]:
            del _SAVED[saved]
        _let_go()
    return plan


def _reference_saved(job: Job, plan: Any) -> dict[str, int] | None:
    """The reference solution's saved bytes for this plan (None: the checker works them out)."""
    from trainer.checking.trusted.checker import job_exercise
    from trainer.checking.trusted.plan import reference_saved_bytes

    solution = job.solution
    if plan is None or not solution:
        return None
    try:
        version = hashlib.sha256(Path(str(solution)).read_bytes()).hexdigest()
        key = (job.plan_key, str(solution), version)
        if key not in _SAVED:
            _SAVED[key] = reference_saved_bytes(job_exercise(job), plan, str(solution))
    except Exception:  # advice only: the checker tries again, and a check never fails for it
        return None
    return _SAVED[key]


def _start_checker(
    control: socket.socket,
    to_zygote: socket.socket,
    fds: list[int],
    alone: bool,
    pool: _Pool,
) -> int:
    job_fd, result_fd, output_fd = fds
    try:
        wire, _ = transport.receive(job_fd)
        job: Job | None = Job.from_wire(wire)
    except (transport.WireError, ValueError, TypeError):
        job = None
    os.close(job_fd)
    if job is not None:
        from trainer.checking.trusted.checker import remember_exercise

        remember_exercise(job)
    plan = plan_for(job)
    saved = _reference_saved(job, plan) if job else None
    shared = may_share_checker(job, plan)
    if shared and job is not None:
        pid = pool.hand_over(job, wire, result_fd, output_fd, alone, saved)
        if pid:
            return pid
    # A checker of the pool talks to this server on a socket: (the server's end, its own).
    pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if shared else None
    pid = os.fork()
    if pid == 0:  # the checker of this job (and, in the pool, of the next ones)
        try:
            os.setsid()  # its own group: a timeout ends it
            control.close()
            # The pool's sockets are the server's: a checker holding one would keep
            # another from hearing the server close it.
            pool.forget()
            if pair is not None:
                pair[0].close()
            own_end = pair[1] if pair is not None else None
            _serve_jobs(
                _Assigned(job, result_fd, output_fd, saved, alone), to_zygote, plan, own_end
            )
        finally:
            os._exit(0)
    os.close(result_fd)
    os.close(output_fd)
    if pair is not None and job is not None:
        pair[1].close()
        pool.started(pid, pair[0], job.plan_key)
    return pid


def may_share_checker(job: Job | None, plan: Any) -> bool:
    """Whether ``job`` may go to, or be checked by, a checker of the pool: one of the
    catalogue's own files, of a run of checks (a plan the server keeps), never one that
    may run stages on a thread of its own (a second learner process, trusted/ahead.py):
    that thread could outlive its check."""
    return (
        job is not None and job.catalogue_file and plan is not None and job.second_process is False
    )


@dataclasses.dataclass
class _Assigned:
    """A job as its checker gets it: where its frames and output go, the reference's
    saved bytes (None: the checker works them out) and whether it runs alone."""

    job: Job | None
    result_fd: int
    output_fd: int
    saved: dict[str, int] | None
    alone: bool


def _serve_jobs(
    first: _Assigned, to_zygote: socket.socket, plan: Any, pool_end: socket.socket | None
) -> None:
    """In a forked checker: check ``first``; with ``pool_end``, then say so on it and
    check the jobs the server hands over there, until it closes it. Returns to exit."""
    assigned: _Assigned | None = first
    while assigned is not None:
        reusable = _check_one(assigned, to_zygote, plan)
        job = assigned.job
        if pool_end is None or not reusable or job is None:
            return
        assigned = _next_job(pool_end, job.plan_key)


def _check_one(assigned: _Assigned, to_zygote: socket.socket, plan: Any) -> bool:
    """One job, its output on ``output_fd`` and its frames on ``result_fd`` (both closed
    after). Whether this process may check another: not after a bug of ours, nor when
    its claim on a CPU could outlive the job."""
    job, result_fd, output_fd = assigned.job, assigned.result_fd, assigned.output_fd
    reusable = False
    try:
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        from trainer.checking.trusted import checker

        if job is None:
            raise ValueError("the job sent to the checking server cannot be read")
        checker.run(
            job,
            result_fd=result_fd,
            zygote=to_zygote,
            plan=plan,
            reference_saved=assigned.saved,
            alone=assigned.alone,
        )
        reusable = True
    except SystemExit:  # the checker's own way to end (a stage's bug, already said)
        pass
    except BaseException:  # a bug of ours, outside the stages' bodies: said as such
        with contextlib.suppress(BaseException):
            bug = {"type": "bug", "where": "the checker", "traceback": traceback.format_exc()}
            transport.send(result_fd, {**bug, "token": job.token if job else ""})
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        # Nothing of this job stays open here: the CLI reads its pipes to their end.
        nothing = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nothing, 1)
        os.dup2(nothing, 2)
        os.close(nothing)
        with contextlib.suppress(OSError):
            os.close(result_fd)
    return reusable and processes.release_cpus()


def _next_job(pool_end: socket.socket, key: tuple[str, int]) -> _Assigned | None:
    """Say this checker is free; the next job the server hands over, of the same
    exercise (None: the server closed the socket, or sent what is not one)."""
    try:
        transport.send_with_fds(pool_end, {"free": True})
        header, fds = transport.receive_with_fds(pool_end, 3)
    except (transport.WireError, OSError):
        return None
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    job_fd, result_fd, output_fd = fds
    try:
        job = Job.from_wire(transport.receive(job_fd)[0])
    except (transport.WireError, ValueError, TypeError):
        job = None
    os.close(job_fd)
    saved = header.get("saved")
    if job is None or job.plan_key != key:  # never checked against another exercise's plan
        os.close(result_fd)
        os.close(output_fd)
        return None
    saved = saved if isinstance(saved, dict) else None
    return _Assigned(job, result_fd, output_fd, saved, header.get("alone") is True)


class _Pool:
    """The checkers of the catalogue's own files that finished a job and wait for the
    next of the same exercise (plan), each on a socket of its own.

    A waiting checker is handed a job when one of its exercise comes; the others are
    told to end (their socket closed) once a job of another exercise comes, so the
    pool never holds more than one exercise's checkers, nor a plan that is gone.
    """

    def __init__(self, selector: selectors.BaseSelector) -> None:
        self._selector = selector
        self._sockets: dict[int, tuple[socket.socket, tuple[str, int]]] = {}
        self._free: list[int] = []  # pids, longest free first

    def started(self, pid: int, sock: socket.socket, key: tuple[str, int]) -> None:
        self._sockets[pid] = sock, key
        self._selector.register(sock, selectors.EVENT_READ, pid)

    def heard(self, pid: int) -> None:
        """The checker ``pid`` said it is free, or ended (its socket closed)."""
        sock, _ = self._sockets[pid]
        try:
            header, fds = transport.receive_with_fds(sock, 0)
        except (transport.WireError, OSError):
            header, fds = {}, []
        for fd in fds:
            os.close(fd)
        if header.get("free") is True and pid not in self._free:
            self._free.append(pid)
        elif header.get("free") is not True:
            self.ended(pid)

    def hand_over(
        self,
        job: Job,
        wire: transport.Header,
        result_fd: int,
        output_fd: int,
        alone: bool,
        saved: dict[str, int] | None,
    ) -> int:
        """Give ``job`` to a free checker of its exercise; its pid, or 0 (none could take
        it: the caller forks one). The descriptors are closed here once handed over."""
        key = job.plan_key
        for pid in [p for p in self._free if self._sockets[p][1] != key]:
            self.ended(pid)  # another exercise's: it ends
        data = transport.pack(wire)
        for pid in list(self._free):
            self._free.remove(pid)
            job_read, job_write = os.pipe()
            try:
                header = {"job": True, "alone": alone, "saved": saved}
                try:
                    transport.send_with_fds(
                        self._sockets[pid][0], header, [job_read, result_fd, output_fd]
                    )
                finally:
                    # Its copy only: a checker that ended now makes the write fail,
                    # not wait for a reader that is this server.
                    os.close(job_read)
                transport.write_all(job_write, data)
            except OSError:
                self.ended(pid)
                continue
            finally:
                os.close(job_write)
            os.close(result_fd)
            os.close(output_fd)
            return pid
        return 0

    def ended(self, pid: int) -> None:
        """Forget ``pid`` (it ended, or is told to: its socket closed)."""
        if pid in self._free:
            self._free.remove(pid)
        found = self._sockets.pop(pid, None)
        if found is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(found[0])
            found[0].close()

    def forget(self) -> None:
        """In a forked checker: the sockets of the others, closed here without a word."""
        for sock, _ in self._sockets.values():
            sock.close()
        self._sockets.clear()
        self._free.clear()

    def close(self) -> None:
        for pid in list(self._sockets):
            self.ended(pid)
