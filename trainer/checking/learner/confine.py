"""Host protection: what the learner's process may touch on the machine it runs on.

A learner process is made in two steps, so that it is sealed by construction
rather than watched for tricks:

1. the zygote's fork calls :func:`enter_namespaces`: a fresh user namespace
   (so that no privilege is needed), and in it fresh mount, PID, IPC and
   network namespaces; then it forks once more. That second fork is the
   learner's process: process 1 of a PID namespace of its own, in which no
   other process of the machine can be seen, signalled, ``prlimit``-ed,
   reniced or probed, and whose end ends everything in it;
2. that process calls :func:`confine`, before the learner's file runs:

* **scratch**: its mount namespace is made private, gets a ``/proc`` of its
  own (its PID namespace's processes only), every mount is made read-only
  (``mount_setattr``, recursively), and the check's folder becomes a private
  ``tmpfs`` capped in size: the only writable place, gone with the namespace,
  whatever was written there. The trainer's package and catalogue (and the
  exercise's spec and solution folders) are covered by empty read-only mounts;
* **network**: the fresh network namespace (no interface but a loopback that
  is down); Landlock also denies TCP where the kernel can (ABI 4); a seccomp
  filter refuses new Unix sockets (those that are files escape namespaces)
  and io_uring;
* **files**: Landlock. Reads and execution only beneath what Python, torch
  and programs need (the system's ``/usr``, ``/lib``…, the interpreter's
  prefixes, the import path), minus the trainer's own package and catalogue,
  plus the learner's file itself. Not its folder: in a workspace that folder
  holds the progress file, and under ``grade`` it holds the other
  submissions. Landlock's scopes also keep signals and abstract sockets inside;
* **processes**: one process and one thread. Torch's thread pools were set to
  one thread before the zygote forked; the seccomp filter kills the process
  that calls ``clone``, ``clone3``, ``fork`` or ``vfork`` (threads included),
  and the exit by ``SIGSYS`` is named to the learner;
* **cpu_time**: ``RLIMIT_CPU`` (the process is killed at the limit; as PID 1
  it would ignore ``SIGXCPU``, so the zygote names the kill from its CPU time);
* **memory**: ``RLIMIT_AS``, set by the zygote (:func:`zygote.limit_memory`),
  which covers the whole check now that it is one process; ``memfd_create``
  (memory outside the address space) is refused, and the scratch tmpfs is
  capped;
* and, after all of them, no capability in any set (always attempted).

What was applied is returned as a :class:`ProtectionLevel` and travels to the
checker in the reply to ``load``; nothing here fails a check when the kernel
refuses a mechanism: the level says what is missing and why.

Order matters: the id maps are written before the second fork; the mounts
need the namespace's capabilities, Landlock binds the calling thread only (one
thread here), the seccomp filter comes after every step that needs a system
call it refuses, and the capabilities go last.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import math
import os
import platform
import resource
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import landlockpy  # pure Python (ctypes): imports on any platform, acts on Linux
from landlockpy import AccessFS, AccessNet, Ruleset, Scope

from trainer.checking.limits import DEFAULT_SCRATCH_MB, DEFAULT_TIMEOUT
from trainer.checking.report import PROTECTIONS, ProtectionLevel

# A header that does not say: the check's own defaults (``checking/limits``).
DEFAULT_CPU_SECONDS = math.ceil(DEFAULT_TIMEOUT)
SCRATCH_PREFIX = "trainer-check-"

# The protections applied to this process, once :func:`confine` ran (a learner process
# is confined once): the learner's errors are named after them (``loading``).
APPLIED: dict[str, str] = {}
# The folders covered with an empty mount in this process (named when the learner's code
# tries to open something in them).
COVERED: list[str] = []

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000

# Read and run beneath these (those that exist); nothing of a user's lives here.
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/conda")
# Single files a program may need: the loader's cache, the time zone, the CPUs (torch).
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/proc/cpuinfo", "/sys/devices/system/cpu")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class _Missing(Exception):
    """A protection the kernel or the set-up refused; the message says why, in a few words."""


def prepare() -> None:
    """In the zygote, once: what every learner process would otherwise work out again
    (Landlock's ABI, loading libc, the folders Python reads from): ~10 ms per check."""
    with contextlib.suppress(OSError):
        _landlock_abi()
    _readable_roots()
    _libc()
    _memory_cgroup_base()


@functools.cache
def _landlock_abi() -> int:
    # landlockpy finds libc with ctypes.util.find_library, which runs `ldconfig -p` in a
    # subprocess (5-10 ms, and a process the zygote need not start): it gets ours.
    syscalls = getattr(landlockpy, "_syscall", None)
    if syscalls is not None and getattr(syscalls, "_libc", False) is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.prctl.restype = ctypes.c_int
        syscalls._libc = libc
    return landlockpy.abi_version()


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def scratch_folder() -> str:
    """A fresh, private folder for one check (made by the zygote, which removes it)."""
    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX)


def release(scratch: str | None) -> None:
    """After a learner process is gone: remove its folder and its memory cgroup. The
    folder is normally an empty mount point (what the process wrote lived in its private
    tmpfs); where no tmpfs could be mounted, whatever the learner's code left there, of
    any depth and any permissions. Never raises: one check's leftovers must not stop the
    zygote that serves the others."""
    if scratch:
        with contextlib.suppress(Exception):
            remove_tree(scratch)
        base = _memory_cgroup_base()
        if base is not None:
            with contextlib.suppress(OSError):
                (base / _cgroup_name(scratch)).rmdir()


# -- memory: a cgroup of its own, where one can be made ----------------------------------------


def join_memory_cgroup(scratch: str | None, settings: object, megabytes: object) -> str | None:
    """In the zygote's fork, before anything else (root outside any namespace): move this
    process into a memory cgroup of its own, which the learner's process, its child, is
    born in, and cap it (:func:`cap_memory_cgroup`). Returns how, or None: no cgroup
    (not root, no memory cap, no writable memory controller)."""
    if (
        not isinstance(megabytes, int)
        or megabytes <= 0
        or not enter_memory_cgroup(scratch, settings)
    ):
        return None
    return cap_memory_cgroup(scratch, settings, megabytes, os.getpid())


def enter_memory_cgroup(scratch: str | None, settings: object) -> bool:
    """Move this process into a memory cgroup of its own (named after ``scratch``), not
    capped yet and without swap; False where none can be made. Moving a process between
    cgroups waits for the kernel's RCU grace period (about 10 ms): a spare learner
    process (see ``zygote``) pays it before its check."""
    if not scratch or os.geteuid() != 0 or "memory" in _skip(settings):
        return False
    base = _memory_cgroup_base()
    if base is None:
        return False
    try:
        own = base / _cgroup_name(scratch)
        own.mkdir()
        if (own / "memory.max").exists():  # cgroup v2
            (own / "memory.swap.max").write_text("0")
        (own / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return False
    return True


def cap_memory_cgroup(
    scratch: str | None, settings: object, megabytes: object, pid: int
) -> str | None:
    """Cap the memory cgroup :func:`enter_memory_cgroup` made for ``scratch``: the check's
    memory limit, plus the scratch tmpfs, plus what process ``pid`` already has resident
    (pages shared with the zygote are charged to the zygote until written, and writing
    them copies them into the cgroup). Returns how, or None: not capped."""
    base = _memory_cgroup_base()
    if not scratch or base is None or not isinstance(megabytes, int) or megabytes <= 0:
        return None
    options: Mapping[str, object] = settings if isinstance(settings, dict) else {}
    scratch_mb = _positive(options.get("scratch_mb"), DEFAULT_SCRATCH_MB)
    own = base / _cgroup_name(scratch)
    try:
        with open(f"/proc/{pid}/statm") as statm:
            resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        cap = (megabytes + scratch_mb) * 1024 * 1024 + resident
        v2 = (own / "memory.max").exists()
        (own / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(cap))
    except OSError:
        return None
    # The words name what is capped, not the process's resident size at that moment: a
    # class's gradebook says the same of every check.
    return f"a memory cgroup of its own ({megabytes + scratch_mb} MiB beyond torch's pages)"


def _cgroup_name(scratch: str) -> str:
    return "trainer-" + os.path.basename(scratch.rstrip(os.sep))


@functools.cache
def _memory_cgroup_base() -> Path | None:
    """The folder of this process's memory cgroup (v1) or unified cgroup (v2), if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    memberships = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        memberships[controllers] = path
    for mount in mounts:
        # "id parent major:minor root mountpoint options - fstype source superoptions"
        left, _, right = mount.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        root, point, fstype, superoptions = fields[3], fields[4], extra[0], extra[2].split(",")
        if fstype == "cgroup" and "memory" in superoptions:
            key = next((k for k in memberships if "memory" in k.split(",")), None)
            if key is not None:
                return _inside(point, root, memberships[key])
        if fstype == "cgroup2" and "" in memberships:
            base = _inside(point, root, memberships[""])
            with contextlib.suppress(OSError):
                if "memory" in (base / "cgroup.controllers").read_text().split():
                    return base
    return None


def _inside(point: str, root: str, path: str) -> Path:
    """Where cgroup ``path`` lies under a mount of the cgroup tree's ``root`` at ``point``."""
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(point + relative.rstrip("/")).resolve()


def remove_tree(top: str) -> None:
    """Remove ``top`` and everything beneath it, without recursion and without long paths
    (it walks down by changing folder, one name at a time: a folder 100,000 levels deep
    is removed like a flat one), whatever the modes the learner's code set (each folder
    is made writable and searchable first). Symbolic links are removed, never followed.
    What cannot be removed (another user's file, say) is left, never looped on. In the
    zygote (one thread): it changes the working folder and puts it back."""
    home = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    stuck: set[tuple[int, int]] = set()  # folders that could not be emptied
    names: list[str] = []  # the path below top, one name a level
    try:
        os.chmod(top, 0o700)
        os.chdir(top)
        while True:
            below = _empty_but_one(stuck)
            if below is not None:
                with contextlib.suppress(OSError):
                    os.chmod(below, 0o700, follow_symlinks=False)
                try:
                    os.chdir(below)
                except OSError:
                    stuck.add(_identity(below))
                    continue
                names.append(below)
                continue
            if not names:
                break
            here = os.stat(".")
            os.chdir("..")
            name = names.pop()
            try:
                os.rmdir(name)
            except OSError:
                stuck.add((here.st_dev, here.st_ino))
        os.fchdir(home)
        os.rmdir(top)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.fchdir(home)
        os.close(home)


def _empty_but_one(stuck: set[tuple[int, int]]) -> str | None:
    """Unlink every entry of the current folder but its folders; the name of one folder
    still to empty (None: none left but those that are ``stuck``)."""
    try:
        entries = list(os.scandir("."))
    except OSError:
        return None
    folder = None
    for entry in entries:
        try:
            is_folder = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_folder = False
        if not is_folder:
            with contextlib.suppress(OSError):
                os.unlink(entry.name)
        elif folder is None and _identity(entry.name) not in stuck:
            folder = entry.name
    return folder


def _identity(name: str) -> tuple[int, int]:
    try:
        found = os.stat(name, follow_symlinks=False)
    except OSError:
        return (-1, -1)
    return (found.st_dev, found.st_ino)


# -- namespaces, in the zygote's fork before the learner's process is made ----------------------


def enter_namespaces(settings: object) -> dict[str, str]:
    """Enter fresh user, mount, PID, IPC and network namespaces; what was entered, or why not.

    Called in the zygote's fork; the caller then forks the learner's process when
    ``"pid"`` was entered (only a child enters a new PID namespace). Returns names
    among ``user``, ``mount``, ``pid``, ``ipc``, ``net`` with how, and ``error``.
    """
    skip = _skip(settings)
    wanted = _CLONE_NEWIPC
    if "network" not in skip:
        wanted |= _CLONE_NEWNET
    if "processes" not in skip:
        wanted |= _CLONE_NEWPID
    if "scratch" not in skip:
        wanted |= _CLONE_NEWNS
    entered: dict[str, str] = {}
    uid, gid = os.getuid(), os.getgid()
    try:
        _unshare(_CLONE_NEWUSER | wanted)
    except OSError as error:
        entered["error"] = _os_words(error)
        if os.geteuid() != 0:
            return entered
        # No user namespaces (a container's seccomp, say): root may still have the rest.
        try:
            _unshare(wanted)
        except OSError as again:
            entered["error"] = _os_words(again)
            return entered
        return {**entered, **_named(wanted)}
    try:
        # Keep the same ids inside (root stays root, without any privilege outside).
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as error:
        entered["error"] = "the user namespace's ids could not be mapped: " + _os_words(error)
        return entered
    return {"user": "a fresh user namespace", **_named(wanted)}


def _named(flags: int) -> dict[str, str]:
    names = {
        _CLONE_NEWNS: ("mount", "a mount namespace of its own"),
        _CLONE_NEWPID: ("pid", "a PID namespace of its own"),
        _CLONE_NEWIPC: ("ipc", "an IPC namespace of its own"),
        _CLONE_NEWNET: ("net", "a fresh network namespace"),
    }
    return {name: how for flag, (name, how) in names.items() if flags & flag}


def _unshare(flags: int) -> None:
    """unshare(2). ``os.unshare`` exists from Python 3.12; before, libc's through ctypes:
    the PyPI wrappers (``unshare``, ``python-unshare``) are C extensions unmaintained
    since 2019 and 2016, and one libc call does not need them."""
    native = getattr(os, "unshare", None)
    if native is not None:
        native(flags)
        return
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, "namespaces are a Linux feature")
    if _libc().unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


# -- the learner's process: everything else --------------------------------------------------


def confine(
    settings: object,
    scratch: str | None,
    file: str,
    memory: str | None,
    namespaces: dict[str, str],
) -> ProtectionLevel:
    """Apply every protection the kernel allows to this (single-threaded) process.

    ``settings`` comes from the spawn header: ``cpu_seconds``, ``scratch_mb``,
    ``hide`` (folders of the exercise to cover, besides the trainer's own) and
    ``skip`` (protections left out, to measure their cost or prove their tests).
    ``memory`` says how the zygote capped memory, None when it did not;
    ``namespaces`` what :func:`enter_namespaces` entered.
    """
    options: Mapping[str, object] = settings if isinstance(settings, dict) else {}
    skip = _skip(settings)
    cpu_seconds = _positive(options.get("cpu_seconds"), DEFAULT_CPU_SECONDS)
    scratch_mb = _positive(options.get("scratch_mb"), DEFAULT_SCRATCH_MB)
    hide = [Path(str(h)) for h in _list(options.get("hide"))]
    applied: dict[str, str] = {}
    missing: dict[str, str] = {}

    def attempt(name: str, step: Callable[[], str]) -> None:
        if name in skip:
            missing[name] = "left out on request"
            return
        try:
            applied[name] = step()
        except _Missing as why:
            missing[name] = str(why)
        except OSError as error:
            missing[name] = _os_words(error)

    why_not = namespaces.get("error", "no namespaces")
    attempt(
        "scratch",
        functools.partial(_mounts, namespaces, scratch, Path(file), hide, scratch_mb, why_not),
    )
    attempt("cpu_time", functools.partial(_cap_cpu, cpu_seconds))
    if scratch:
        os.environ["TMPDIR"] = scratch
        tempfile.tempdir = scratch
    attempt("files", functools.partial(_landlock, scratch, Path(file), "network" not in skip))
    # One seccomp filter for three protections; each is claimed only when its rules are in.
    rules = _Rules(
        unix_sockets="network" not in skip and "net" in namespaces,
        clone="processes" not in skip and "pid" in namespaces,
        memfd=memory is not None and "memory" not in skip,
    )
    try:
        _install_filter(rules)
        filtered = ""
    except (_Missing, OSError) as error:
        filtered = str(error)
    attempt("network", functools.partial(_network, namespaces, rules, filtered))
    attempt("processes", functools.partial(_one_process, namespaces, rules, filtered))
    attempt("memory", functools.partial(_memory, memory, rules, filtered))
    # Last, once nothing above needs them: no capability at all, in any namespace. Root
    # outside a user namespace (where the kernel refuses one) would otherwise read the
    # checker's memory, undumpable or not, where Landlock is missing too.
    with contextlib.suppress(OSError, AttributeError):
        _drop_capabilities()
    APPLIED.update(applied)
    ordered = {n: applied[n] for n in PROTECTIONS if n in applied}
    return ProtectionLevel(ordered, {n: missing[n] for n in PROTECTIONS if n in missing})


def _network(namespaces: dict[str, str], rules: _Rules, filtered: str) -> str:
    if "net" not in namespaces:
        raise _Missing(namespaces.get("error", "no network namespace"))
    if filtered or not rules.unix_sockets:
        raise _Missing(f"the machine's Unix sockets stay reachable ({filtered or 'no filter'})")
    return namespaces["net"] + "; no new Unix sockets (seccomp)"


def _one_process(namespaces: dict[str, str], rules: _Rules, filtered: str) -> str:
    if "pid" not in namespaces:
        raise _Missing("no PID namespace of its own: " + namespaces.get("error", "unknown"))
    if filtered or not rules.clone:
        raise _Missing(f"threads and processes are not refused ({filtered or 'no filter'})")
    return (
        "one process and one thread, in a PID namespace of its own "
        "(seccomp refuses clone, clone3, fork and vfork)"
    )


def _memory(memory: str | None, rules: _Rules, filtered: str) -> str:
    if memory is None:
        raise _Missing("no cap was asked for")
    if filtered or not rules.memfd:
        raise _Missing(f"memfd_create is not refused ({filtered or 'no filter'})")
    return memory + "; no memory outside it (memfd_create refused)"


# -- scratch: the mount namespace --------------------------------------------------------------

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
_MOUNT_ATTR_RDONLY = 0x1
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_SYS_MOUNT_SETATTR = 442  # the same on x86_64 and aarch64


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _mounts(
    namespaces: dict[str, str],
    scratch: str | None,
    file: Path,
    hide: list[Path],
    megabytes: int,
    why_not: str,
) -> str:
    """In this process's own mount namespace: a private ``/proc`` (where the kernel lets
    one be mounted), every mount read-only, the check's folder a private size-capped
    tmpfs, and the trainer's package, catalogue and the exercise's folders covered."""
    if "mount" not in namespaces:
        raise _Missing(f"no mount namespace of its own: {why_not}")
    if not scratch:
        raise _Missing("no folder of its own to write in")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    if "pid" in namespaces:
        # Only this namespace's processes; where a container hides part of its /proc the
        # kernel refuses a fresh one, and the machine's stays (Landlock limits it to
        # /proc/self, and no other process can be named from this namespace).
        with contextlib.suppress(OSError):
            _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    libc = _libc()
    if (
        libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, ctypes.byref(attr),
                     ctypes.sizeof(attr)) != 0
    ):  # fmt: skip
        code = ctypes.get_errno()
        raise _Missing(
            f"the machine's mounts could not be made read-only ({_os_words(OSError(code, os.strerror(code)))})"
        )
    options = f"size={megabytes}m,nr_inodes={megabytes * 256},mode=0700"
    _mount("tmpfs", scratch, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
    for folder in _covered(file, hide):
        COVERED.append(str(folder))
        with contextlib.suppress(OSError):  # gone, or not a folder: nothing to cover
            _mount("tmpfs", str(folder), "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=4k,nr_inodes=1,mode=0555")  # fmt: skip
    return (
        f"writes only in a private {megabytes} MiB tmpfs, gone with the check; "
        "every other mount read-only; the trainer's files covered"
    )


def _covered(file: Path, hide: list[Path]) -> list[Path]:
    """The folders to cover with an empty mount: the trainer's package, its source tree's
    catalogue, the exercise's spec and solution folders; not one that holds the learner's
    file (an author's check of a reference: Landlock still hides the rest there)."""
    candidates = [*hide, *_trainer_folders()]
    own = file.resolve()
    found: list[Path] = []
    for folder in candidates:
        with contextlib.suppress(OSError):
            folder = folder.resolve()
            if folder.is_dir() and not _beneath(own, folder) and folder not in found:
                found.append(folder)
    return found


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    libc = _libc()
    encoded = [v.encode() if v is not None else None for v in (source, target, fstype, data)]
    if libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {target}: {os.strerror(code)}")


# -- the seccomp filter -------------------------------------------------------------------------

# The standard library has no seccomp binding and pyseccomp needs libseccomp at run time;
# these few BPF instructions do not.
#   unix_sockets: socket(AF_UNIX) and io_uring (which makes sockets without that call) are
#     refused: a network namespace cuts the network and abstract sockets, not the Unix
#     sockets that are files (D-Bus, ssh-agent, docker.sock; Landlock guards their
#     connect() only from ABI 9);
#   clone: clone, clone3, fork and vfork kill the process (SIGSYS): no thread, no child;
#   memfd: memfd_create and memfd_secret are refused (memory that RLIMIT_AS does not count).


@dataclasses.dataclass(frozen=True)
class _Rules:
    unix_sockets: bool
    clone: bool
    memfd: bool


@dataclasses.dataclass(frozen=True)
class _Arch:
    audit: int
    socket: int
    clone: tuple[int, ...]  # clone, clone3, and fork and vfork where they exist
    memfd: tuple[int, ...]


_ARCHES = {
    "x86_64": _Arch(0xC000003E, 41, (56, 57, 58, 435), (319, 447)),
    "aarch64": _Arch(0xC00000B7, 198, (220, 435), (279, 447)),
}
_IO_URING_SETUP = 425  # the same on both
_LD, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, ..|JGE|K, BPF_RET|K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_REFUSE = 0x00050000 | errno.EACCES  # SECCOMP_RET_ERRNO
_NOT_HERE = 0x00050000 | errno.EPERM


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _program(arch: _Arch, rules: _Rules) -> list[tuple[int, int, int, int]]:
    """The seccomp filter's instructions for ``rules``; everything else is allowed."""
    program = [
        (_LD, 0, 0, 4),  # the calling convention
        (_JEQ, 1, 0, arch.audit),
        (_RET, 0, 0, 0x00050000 | errno.ENOSYS),  # another one (i386 on x86_64): refused
        (_LD, 0, 0, 0),  # the system call
        (_JGE, 0, 1, 0x40000000),  # x32
        (_RET, 0, 0, _REFUSE),
    ]
    actions: list[tuple[int, int]] = []
    if rules.clone:
        actions += [(call, _KILL_PROCESS) for call in arch.clone]
    if rules.memfd:
        actions += [(call, _NOT_HERE) for call in arch.memfd]
    if rules.unix_sockets:
        actions.append((_IO_URING_SETUP, _REFUSE))
    for call, action in actions:
        program += [(_JEQ, 0, 1, call), (_RET, 0, 0, action)]
    if rules.unix_sockets:
        program += [
            (_JEQ, 0, 3, arch.socket),
            (_LD, 0, 0, 16),  # its first argument, the family
            (_JEQ, 0, 1, socket.AF_UNIX),
            (_RET, 0, 0, _REFUSE),
        ]
    return [*program, (_RET, 0, 0, _ALLOW)]


# Made at import, like every class of this module: one made in the learner's process
# would carry this module's name there (the learner zygote renames what exists first).
_Filters = _SockFilter * len(_program(_ARCHES["x86_64"], _Rules(True, True, True)))


def _install_filter(rules: _Rules) -> None:
    arch = _ARCHES.get(platform.machine())
    if arch is None or not sys.platform.startswith("linux"):
        raise _Missing(f"no seccomp filter for {platform.machine()}")
    program = _program(arch, rules)
    filters = _Filters(*[_SockFilter(*i) for i in program])
    fprog = _SockFprog(len(program), filters)
    libc = _libc()
    no_new_privs, set_seccomp, mode_filter = 38, 22, 2
    zero = ctypes.c_ulong(0)
    if libc.prctl(no_new_privs, ctypes.c_ulong(1), zero, zero, zero) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    if libc.prctl(set_seccomp, ctypes.c_ulong(mode_filter), ctypes.byref(fprog), zero, zero) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


# -- capabilities ---------------------------------------------------------------------------


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_CapSets = _CapData * 2  # version 3: two 32-bit words per set


def _drop_capabilities() -> None:
    """capset(2) with every set empty, after emptying the bounding and ambient sets
    (prctl): this process and whatever it runs hold no capability."""
    if not sys.platform.startswith("linux"):
        return
    libc = _libc()
    capbset_drop, cap_ambient, ambient_clear_all = 24, 47, 4
    zero = ctypes.c_ulong(0)
    for cap in range(64):  # EINVAL past the kernel's last capability
        libc.prctl(capbset_drop, ctypes.c_ulong(cap), zero, zero, zero)
    libc.prctl(cap_ambient, ctypes.c_ulong(ambient_clear_all), zero, zero, zero)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.capset(ctypes.byref(header), ctypes.byref(_CapSets())) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


# -- CPU time --------------------------------------------------------------------------------


def _cap_cpu(seconds: int) -> str:
    # Killed at the limit (hard = soft): as process 1 of its namespace, this process
    # would ignore SIGXCPU. The zygote names the kill from the CPU time it used.
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
    return f"{seconds} s of CPU time (RLIMIT_CPU)"


def cpu_seconds(settings: object) -> int | None:
    """The CPU-time cap the spawn header's settings ask for (None: left out)."""
    if "cpu_time" in _skip(settings):
        return None
    options: Mapping[str, object] = settings if isinstance(settings, dict) else {}
    return _positive(options.get("cpu_seconds"), DEFAULT_CPU_SECONDS)


# -- files: Landlock -----------------------------------------------------------------------


def _landlock(scratch: str | None, file: Path, deny_tcp: bool) -> str:
    if not scratch:
        raise _Missing("no folder of its own to write in")
    abi = _landlock_abi()
    if abi < 1:
        raise _Missing("Landlock is not enabled in this kernel (Linux 5.13+ with lsm=landlock)")
    threads = _threads()
    if threads != 1:
        raise _Missing(f"the process already runs {threads} threads; Landlock binds one")
    read = AccessFS.READ_FILE | AccessFS.READ_DIR
    run = read | AccessFS.EXECUTE
    everything = landlockpy.fs_for_abi(abi)
    hidden = _hidden(file)
    with Ruleset(
        handled_net=None if deny_tcp else AccessNet.NONE,
        scoped=Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL,
    ) as ruleset:
        for root in _readable_roots():
            _allow_beneath(ruleset, root, run, hidden)
        for path in _SYSTEM_FILES:
            with contextlib.suppress(OSError):
                ruleset.allow_path(path, read if Path(path).is_dir() else AccessFS.READ_FILE)
        for path in _DEVICES:
            with contextlib.suppress(OSError):
                ruleset.allow_path(path, AccessFS.READ_FILE | AccessFS.WRITE_FILE)
        ruleset.allow_path("/proc/self", read)
        ruleset.allow_path(scratch, everything)
        with contextlib.suppress(OSError):
            ruleset.allow_path(file, AccessFS.READ_FILE)
        ruleset.restrict()
    # Folder listings cached before (the command's own folder, say) would still name
    # what is no longer readable: such folders are listed again, under the rules.
    roots = tuple(str(r) for r in _readable_roots())
    beneath = tuple(r.rstrip(os.sep) + os.sep for r in roots)
    for key in list(sys.path_importer_cache):
        if key not in roots and not key.startswith(beneath):
            del sys.path_importer_cache[key]
    tcp = " and TCP" if deny_tcp and abi >= 4 else ""
    return f"writes only in a fresh temporary folder of its own; reads only what Python and torch need (Landlock ABI {abi}{tcp})"


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


@functools.cache
def _readable_roots() -> tuple[Path, ...]:
    """Folders beneath which Python, torch and programs read: system, prefixes, import path."""
    package = _trainer_package()
    roots: list[Path] = [Path(p) for p in _SYSTEM]
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    roots += [Path(p) for p in sorted(prefixes)]
    for entry in sys.path:
        if not entry or entry == ".":
            continue  # the folder the command ran in: the learner's, not Python's
        path = Path(entry).resolve()
        if path.is_file():  # a zip on the path
            roots.append(path)
            continue
        # A folder that holds the trainer itself is a source tree (the repo, with its
        # solutions and maybe a workspace) unless it is where packages are installed.
        source_tree = (path / package.name).resolve() == package
        if source_tree and path.name not in ("site-packages", "dist-packages"):
            continue
        roots.append(path)
    return tuple(r.resolve() for r in roots if r.exists())


def _trainer_package() -> Path:
    """The trainer package's folder (this file is trainer/checking/learner/confine.py)."""
    return Path(__file__).resolve().parents[2]


def _trainer_folders() -> list[Path]:
    """The trainer's own files: its package (with the catalogue, when installed) and, in
    a source tree, the catalogue beside it."""
    package = _trainer_package()
    return [package, *(package.parent / name for name in ("solutions", "exercises", "quizzes"))]


def _hidden(file: Path) -> list[Path]:
    """What stays unreadable even beneath a readable root: the trainer's package (the
    checker's code, and the catalogue with its solutions when installed) and the learner's
    folder (the progress file, other submissions)."""
    return [file.resolve().parent, *_trainer_folders()]


def _allow_beneath(ruleset: Ruleset, root: Path, access: AccessFS, hidden: Iterable[Path]) -> None:
    """Allow ``access`` beneath ``root``, except beneath the ``hidden`` paths inside it.

    A root with a hidden path inside is split: each of its entries is allowed on its own,
    and the root may be listed (Landlock's READ_DIR reaches beneath it: names, not contents),
    so that imports still find what lies beside the hidden paths.
    """
    root = root.resolve()
    inside = [h for h in hidden if _beneath(h, root)]
    if root in inside:
        return
    if not inside:
        rights = access if root.is_dir() else access & (AccessFS.READ_FILE | AccessFS.EXECUTE)
        with contextlib.suppress(OSError):
            ruleset.allow_path(root, AccessFS(rights))
        return
    with contextlib.suppress(OSError):
        ruleset.allow_path(root, AccessFS.READ_DIR)
        for entry in root.iterdir():
            _allow_beneath(ruleset, entry, access, inside)


# -- helpers -------------------------------------------------------------------------------


def _beneath(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or lies beneath it (as strings: pathlib's ``parents`` is slow)."""
    inner, outer = str(path), str(root)
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def skipped(settings: object) -> bool:
    """Whether the spawn header's settings leave any protection out."""
    return bool(_skip(settings))


def _skip(settings: object) -> set[str]:
    options: Mapping[str, object] = settings if isinstance(settings, dict) else {}
    return {str(s) for s in _list(options.get("skip"))}


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def _positive(value: object, default: int) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )


def _os_words(error: OSError) -> str:
    name = errno.errorcode.get(error.errno or 0, "")
    text = error.strerror or str(error)
    return f"{text} ({name})" if name else text
