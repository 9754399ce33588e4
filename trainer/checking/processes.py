"""Process housekeeping for the checking server and the learner zygote (no torch).

Two Linux mechanisms, through ``prctl``, with no effect elsewhere:

* a *child subreaper* adopts every orphan among its descendants, so a process
  the learner's code started in a new session and left behind becomes our
  child instead of init's, and :func:`end_strays` can end it;
* a process that is not *dumpable* cannot be traced, and its ``/proc`` files
  (memory, descriptors, environment) cannot be opened by processes of the same
  user: the checker's expectations stay out of the learner's reach.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import select
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Collection

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library the process already has (its own symbols: no ``find_library``, which
    runs ``ldconfig -p`` in a subprocess, 5-10 ms on the way to every cold check)."""
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return int(_libc().prctl(option, value, 0, 0, 0)) == 0
    except OSError:
        return False


def give_back_free_memory() -> None:
    """Return the heap's free pages to the system (glibc's ``malloc_trim``; elsewhere
    nothing), so that a fork of this process has fewer page tables to copy."""
    with contextlib.suppress(OSError, AttributeError):
        _libc().malloc_trim(0)


# The check from which a server and its zygote collapse their memory to huge pages: a
# single check never pays for it (0.1-0.3 s), a run of many gets every fork and exit
# after it cheaper (validate, grade, watch).
HUGE_PAGES_FROM_CHECK = 2
_HUGE_PAGE = 1 << 21
_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25  # Linux 6.1


def collapse_to_huge_pages() -> int:
    """Back this process's anonymous memory (heap, arenas) with 2 MiB pages where the
    kernel allows (``madvise(MADV_COLLAPSE)``), so that a fork copies, and an exit frees,
    one page-table entry where it did 512. Returns the bytes collapsed (0 elsewhere)."""
    try:
        libc = _libc()
        with open("/proc/self/maps", encoding="ascii") as maps:
            lines = maps.readlines()
    except (OSError, AttributeError):
        return 0
    collapsed = 0
    for line in lines:
        fields = line.split()
        anonymous = len(fields) == 5 or (len(fields) == 6 and fields[5] == "[heap]")
        if fields[1] != "rw-p" or fields[4] != "0" or not anonymous:
            continue
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        start = -(-start // _HUGE_PAGE) * _HUGE_PAGE
        end = end // _HUGE_PAGE * _HUGE_PAGE
        if end - start < _HUGE_PAGE:
            continue
        size = ctypes.c_size_t(end - start)
        address = ctypes.c_void_p(start)
        if libc.madvise(address, size, _MADV_HUGEPAGE) != 0:
            continue
        if libc.madvise(address, size, _MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed


def become_subreaper() -> bool:
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def set_dumpable(dumpable: bool) -> bool:
    return _prctl(_PR_SET_DUMPABLE, 1 if dumpable else 0)


def children_of(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (Linux ``/proc``; empty elsewhere).

    Runs after every check, over every process of the machine: plain ``os`` calls,
    not ``pathlib``, which costs twice as much here."""
    found: list[int] = []
    wanted = str(parent).encode()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            stat = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat.rsplit(b")", 1)[-1].split(None, 2)
        if len(fields) > 1 and fields[1] == wanted:
            found.append(int(name))
    return found


def end_strays(keep: Collection[int] = (), rounds: int = 50) -> None:
    """Kill and reap every child of this process but ``keep``, until none is left.

    Killing one may orphan its own children onto us (we are a subreaper), so
    this repeats until a scan finds nobody new.
    """
    me = os.getpid()
    for _ in range(rounds):
        strays = [pid for pid in children_of(me) if pid not in keep]
        if not strays:
            return
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        time.sleep(0.001)


def ended_within(pid: int, seconds: float) -> bool | None:
    """Whether process ``pid`` ended within ``seconds`` (a zombie counts), told by the
    kernel the moment it does (a pidfd), not found by polling; None where there are no
    pidfds (not Linux, a kernel before 5.3)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        return None
    try:
        ready, _, _ = select.select([fd], [], [], max(seconds, 0.0))
        return bool(ready)
    finally:
        os.close(fd)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (and ``pid`` itself)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def signal_words(number: int) -> str:
    if number == signal.SIGXCPU:  # host protection's CPU-time cap (RLIMIT_CPU)
        return "used up the CPU time a check allows and was stopped (SIGXCPU): an endless loop?"
    if number == signal.SIGSYS:  # host protection's seccomp filter: clone, fork, vfork
        return (
            "was stopped for starting a thread or a process (SIGSYS): the check runs your "
            "code in one thread and one process: threads and subprocesses are refused"
        )
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"was killed by {name}"


def code_words(code: int) -> str:
    """How a process ended, from an exit code where signals are negative."""
    return signal_words(-code) if code < 0 else f"exited with code {code}"


def exit_code(status: int) -> int:
    """A ``waitpid`` status as one number: the exit code, or minus the signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def pin(cpu: int, pids: Collection[int]) -> bool:
    """Run this process (its calling thread) and ``pids`` on ``cpu`` only.

    A check is a conversation: the checker asks, the learner's process answers, one
    waits while the other works. On one CPU (claimed first, :func:`claim_a_cpu`) each
    wakes the other where it already runs; on two, every call crosses CPUs (~15%
    more CPU time, more under a hypervisor)."""
    with contextlib.suppress(OSError):
        if not _UNPINNED:
            _UNPINNED.append(os.sched_getaffinity(0))
        for pid in (0, *pids):
            os.sched_setaffinity(pid, {cpu})
        return True
    return False


_UNPINNED: list[set[int]] = []  # where this process ran before pin, until release_cpus


def claim_a_cpu() -> int | None:
    """A CPU no other check of this user has claimed, claimed for this one: an exclusive
    lock on a file per CPU, held as long as this process lives (the kernel drops it when
    the process ends, however it ends). This one's own CPU comes first. None: every CPU
    is claimed, or this machine cannot say (then nothing is claimed)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        allowed = sorted(os.sched_getaffinity(0))
        if len(allowed) < 2:
            return None
        current = int(_libc().sched_getcpu())
        folder = _cpu_locks()
    except (OSError, AttributeError, ValueError):
        return None
    if folder is None:
        return None
    for cpu in sorted(allowed, key=lambda c: c != current):
        try:
            fd = os.open(
                os.path.join(folder, str(cpu)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _HELD.append(fd)  # held until this process ends
        return cpu
    return None


_HELD: list[int] = []


def release_cpus() -> bool:
    """Give up the CPUs :func:`claim_a_cpu` claimed, and run where this process ran
    before :func:`pin`: a checker that goes on to another check. False when it cannot
    say it did."""
    while _HELD:
        with contextlib.suppress(OSError):
            os.close(_HELD.pop())
    if not _UNPINNED:
        return True
    try:
        os.sched_setaffinity(0, _UNPINNED.pop())
    except OSError:
        return False
    return True


def _cpu_locks() -> str | None:
    """This user's folder of per-CPU lock files; None when it is not safely ours."""
    folder = os.path.join(tempfile.gettempdir(), f"trainer-cpus-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return None
    return folder
