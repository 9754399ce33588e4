"""Host protection: what the learner's process may touch on the machine it runs on.

Applied by the learner zygote in each freshly forked learner process, before
the learner's file runs (:func:`confine`), with the kernel's own mechanisms:

* **network**: a fresh network namespace (no interface but a loopback that is
  down), entered through a fresh user namespace so that no privilege is
  needed; Landlock also denies TCP where the kernel can (ABI 4); a seccomp
  filter refuses new Unix sockets (those that are files escape namespaces);
* **files**: Landlock. Writes only inside the check's own fresh folder (the
  working folder, and ``TMPDIR``). Reads and execution only beneath what
  Python, torch and programs need (the system's ``/usr``, ``/lib``…, the
  interpreter's prefixes, the import path), minus the trainer's own package
  and catalogue, plus the learner's file itself. Not its folder: in a
  workspace that folder holds the progress file, and under ``grade`` it holds
  the other submissions (the source reaches the process over its socket;
  helpers must live in the file). Landlock's scopes also keep signals and
  abstract sockets inside the check;
* **processes**: ``RLIMIT_NPROC`` counts processes and threads per user *per
  user namespace*, so in the fresh one it counts this check's alone. The
  kernel never applies it to root's own user, so under root a ``pids`` cgroup
  of its own caps the check instead, where the cgroup file system is
  writable;
* **cpu_time**: ``RLIMIT_CPU`` (SIGXCPU, then SIGKILL a second later);
* **memory**: ``RLIMIT_AS``, set by the zygote (:func:`zygote.limit_memory`);
* and, after all of them, no capability in any set (not a protection of the level:
  always attempted). Root outside a user namespace, where Landlock is missing too,
  would otherwise read other processes' memory, the checker's among them.

What was applied is returned as a :class:`ProtectionLevel` and travels to the
checker in the reply to ``load``; nothing here fails a check when the kernel
refuses a mechanism: the level says what is missing and why.

Order matters: the cgroup move needs root's privileges, the id maps must be
written before Landlock forbids ``/proc`` writes, and Landlock binds the
calling thread only, so it comes last, in a process that is still
single-threaded (a fork of the zygote; torch starts no thread with one intra-op
thread).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import resource
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import landlockpy  # pure Python (ctypes): imports on any platform, acts on Linux
from landlockpy import AccessFS, AccessNet, Ruleset, Scope

from trainer.checking.report import PROTECTIONS, ProtectionLevel

# Processes and threads one check may have at once. A learner's Function needs
# one; torch with one intra-op thread starts none.
DEFAULT_PROCESSES = 32
DEFAULT_CPU_SECONDS = 60
SCRATCH_PREFIX = "trainer-check-"

# The protections applied to this process, once :func:`confine` ran (a learner process
# is confined once): the learner's errors are named after them (``loading``).
APPLIED: dict[str, str] = {}

_CLONE_NEWUSER = 0x10000000
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
    if os.geteuid() == 0:
        _pids_cgroup_base()


@functools.cache
def _landlock_abi() -> int:
    return landlockpy.abi_version()


def scratch_folder() -> str:
    """A fresh, private folder for one check (made by the zygote, which removes it)."""
    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX)


def release(pid: int, scratch: str | None) -> None:
    """After a learner process and all it started are gone: remove its folder and cgroup."""
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    base = _pids_cgroup_base()
    if base is not None:
        with contextlib.suppress(OSError):
            (base / f"trainer-{pid}").rmdir()


def confine(
    settings: object,
    scratch: str | None,
    file: str,
    memory: str | None,
    moved: Callable[[], str | None] | None = None,
) -> ProtectionLevel:
    """Apply every protection the kernel allows to this (forked, single-threaded) process.

    ``settings`` comes from the spawn header: ``cpu_seconds``, ``processes`` and
    ``skip`` (protections left out, to measure their cost or prove their tests).
    ``memory`` says how the zygote capped memory, None when it did not. ``moved``,
    when the zygote moves this process into its pids cgroup (root, see
    :func:`move_into_pids_cgroup`), waits for that move and returns the cgroup
    (None: there is none).
    """
    options: Mapping[str, object] = settings if isinstance(settings, dict) else {}
    skip = {str(s) for s in _list(options.get("skip"))}
    processes = _positive(options.get("processes"), DEFAULT_PROCESSES)
    cpu_seconds = _positive(options.get("cpu_seconds"), DEFAULT_CPU_SECONDS)
    applied: dict[str, str] = {}
    missing: dict[str, str] = {}

    def attempt(name: str, step: functools.partial[str]) -> None:
        if name in skip:
            missing[name] = "left out on request"
            return
        try:
            applied[name] = step()
        except _Missing as why:
            missing[name] = str(why)
        except OSError as error:
            missing[name] = _os_words(error)

    if memory is not None:
        applied["memory"] = memory
    else:
        missing["memory"] = "no cap was asked for"

    root = os.geteuid() == 0
    # Root's own processes are never counted against RLIMIT_NPROC: a cgroup caps them.
    # Joined by this process, it must be joined now, while it may still write the
    # cgroup's files; moved there by the zygote, it is waited for below.
    cgroup: str | None = None
    if root and "processes" not in skip and moved is None:
        with contextlib.suppress(_Missing, OSError):
            cgroup = _join_pids_cgroup(processes)
    namespaces = _namespaces(skip)
    attempt("network", functools.partial(_network, namespaces))
    attempt("cpu_time", functools.partial(_cap_cpu, cpu_seconds))
    if scratch:
        os.environ["TMPDIR"] = scratch
        tempfile.tempdir = scratch
    attempt("files", functools.partial(_landlock, scratch, Path(file), "network" not in skip))
    if root and "processes" not in skip and moved is not None:
        # The zygote moved this process into its cgroup while the steps above ran (a
        # move waits for the kernel's RCU grace period: ~10 ms on a busy machine). It
        # has started nothing, and the learner's code runs only after this.
        cgroup = moved()
    attempt("processes", functools.partial(_cap_processes, processes, namespaces, root, cgroup))
    # Last, once nothing above needs them: no capability at all, in any namespace. Root
    # outside a user namespace (where the kernel refuses one) would otherwise read the
    # checker's memory, undumpable or not, where Landlock is missing too.
    with contextlib.suppress(OSError, AttributeError):
        _drop_capabilities()
    APPLIED.update(applied)
    ordered = {n: applied[n] for n in PROTECTIONS if n in applied}
    return ProtectionLevel(ordered, {n: missing[n] for n in PROTECTIONS if n in missing})


# -- network: namespaces -------------------------------------------------------------------


def _namespaces(skip: set[str]) -> dict[str, str]:
    """Enter a fresh user namespace (and network namespace); what was entered, or why not.

    Returns ``{"user": how}`` and/or ``{"net": how}``, with ``"error"`` saying why not.
    """
    want_net = "network" not in skip
    entered: dict[str, str] = {}
    uid, gid = os.getuid(), os.getgid()
    try:
        _unshare(_CLONE_NEWUSER | (_CLONE_NEWNET if want_net else 0))
    except OSError as error:
        entered["error"] = _os_words(error)
        if want_net and os.geteuid() == 0:
            # No user namespaces (a container's seccomp, say), but root may still
            # leave the host's network.
            try:
                _unshare(_CLONE_NEWNET)
                entered["net"] = "a fresh network namespace"
            except OSError as again:
                entered["error"] = _os_words(again)
        return entered
    try:
        # Keep the same ids inside (root stays root, without any privilege outside).
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as error:
        entered["error"] = "the user namespace's ids could not be mapped: " + _os_words(error)
        return entered
    entered["user"] = "a fresh user namespace"
    if want_net:
        entered["net"] = "a fresh network namespace"
    return entered


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
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _network(namespaces: dict[str, str]) -> str:
    if "net" not in namespaces:
        raise _Missing(namespaces.get("error", "no network namespace"))
    try:
        _deny_unix_sockets()
    except (_Missing, OSError) as error:
        raise _Missing(f"the machine's Unix sockets stay reachable ({error})") from None
    return namespaces["net"] + "; no new Unix sockets (seccomp)"


# A network namespace cuts the network and the abstract Unix sockets, but not the Unix
# sockets that are files: a desktop's D-Bus session bus (which can start programs outside
# the check), ssh-agent, docker.sock. Landlock guards their connect() only from ABI 9. So a
# seccomp filter refuses socket(AF_UNIX), and io_uring (which makes sockets without that
# syscall). The standard library has no seccomp binding and pyseccomp needs libseccomp at
# run time; these thirteen BPF instructions do not.
_SECCOMP_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # audit, socket
_IO_URING_SETUP = 425  # the same on both
_LD, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, ..|JGE|K, BPF_RET|K
_ALLOW = 0x7FFF0000
_REFUSE = 0x00050000 | errno.EACCES  # SECCOMP_RET_ERRNO


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _program(audit_arch: int, socket_call: int) -> list[tuple[int, int, int, int]]:
    """The seccomp filter: AF_UNIX sockets and io_uring refused, the rest allowed."""
    return [
        (_LD, 0, 0, 4),  # the calling convention
        (_JEQ, 1, 0, audit_arch),
        (_RET, 0, 0, 0x00050000 | errno.ENOSYS),  # another one (i386 on x86_64): refused
        (_LD, 0, 0, 0),  # the system call
        (_JGE, 0, 1, 0x40000000),  # x32
        (_RET, 0, 0, _REFUSE),
        (_JEQ, 0, 1, _IO_URING_SETUP),
        (_RET, 0, 0, _REFUSE),
        (_JEQ, 0, 2, socket_call),
        (_LD, 0, 0, 16),  # its first argument, the family
        (_JEQ, 1, 0, socket.AF_UNIX),
        (_RET, 0, 0, _ALLOW),
        (_RET, 0, 0, _REFUSE),
    ]


# Made at import, like every class of this module: one made in the learner's process
# would carry this module's name there (the learner zygote renames what exists first).
_Filters = _SockFilter * len(_program(0, 0))


def _deny_unix_sockets() -> None:
    arch = _SECCOMP_ARCHES.get(platform.machine())
    if arch is None or not sys.platform.startswith("linux"):
        raise _Missing(f"no seccomp filter for {platform.machine()}")
    program = _program(*arch)
    filters = _Filters(*[_SockFilter(*i) for i in program])
    fprog = _SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
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
    libc = ctypes.CDLL(None, use_errno=True)
    capbset_drop, cap_ambient, ambient_clear_all = 24, 47, 4
    zero = ctypes.c_ulong(0)
    for cap in range(64):  # EINVAL past the kernel's last capability
        libc.prctl(capbset_drop, ctypes.c_ulong(cap), zero, zero, zero)
    libc.prctl(cap_ambient, ctypes.c_ulong(ambient_clear_all), zero, zero, zero)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.capset(ctypes.byref(header), ctypes.byref(_CapSets())) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


# -- processes and CPU time: rlimits and a cgroup ------------------------------------------


def _cap_processes(limit: int, namespaces: dict[str, str], root: bool, cgroup: str | None) -> str:
    if "user" in namespaces:
        # Counted per user namespace: this check's processes alone. Hard = soft, so
        # the learner's code cannot raise it again.
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        if not root:
            return f"at most {limit} processes and threads (RLIMIT_NPROC)"
    if cgroup is not None:
        # The cgroup's folder is named per process: the words stay the same for every
        # check, so that a level reads the same in every report and gradebook.
        return f"at most {limit} processes and threads (a pids cgroup under {Path(cgroup).parent})"
    if root:
        raise _Missing(
            "root's processes are never counted by RLIMIT_NPROC and no pids cgroup "
            "could be made here"
        )
    # Without a user namespace of its own, RLIMIT_NPROC would count every process
    # of the user, not this check's: a cap would be either useless or harmful.
    raise _Missing("no user namespace of its own: " + namespaces.get("error", "unknown reason"))


def _cap_cpu(seconds: int) -> str:
    # SIGXCPU at the soft limit (named in the report), SIGKILL a second later if caught.
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    return f"{seconds} s of CPU time (RLIMIT_CPU)"


@functools.lru_cache(maxsize=1)
def _pids_cgroup_base() -> Path | None:
    """The folder of this process's ``pids`` cgroup (v1) or unified cgroup (v2), if any."""
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
        point, fstype, superoptions = fields[4], extra[0], extra[2].split(",")
        if fstype == "cgroup" and "pids" in superoptions:
            key = next((k for k in memberships if "pids" in k.split(",")), None)
            if key is not None:
                return Path(point + memberships[key].rstrip("/")).resolve()
        if fstype == "cgroup2" and "" in memberships:
            base = Path(point + memberships[""].rstrip("/"))
            with contextlib.suppress(OSError):
                if "pids" in (base / "cgroup.controllers").read_text().split():
                    return base.resolve()
    return None


def _join_pids_cgroup(limit: int) -> str:
    """Move this process into a fresh ``pids`` cgroup capped at ``limit`` tasks."""
    return _pids_cgroup_for(os.getpid(), limit)


def _pids_cgroup_for(pid: int, limit: int) -> str:
    """Move ``pid`` into a fresh ``pids`` cgroup of its own capped at ``limit`` tasks."""
    base = _pids_cgroup_base()
    if base is None:
        raise _Missing("no pids cgroup")
    own = base / f"trainer-{pid}"
    own.mkdir(exist_ok=True)
    (own / "pids.max").write_text(str(limit))
    (own / "cgroup.procs").write_text(str(pid))
    return str(own)


def pids_cgroup_limit(settings: object) -> int | None:
    """The cap of the pids cgroup the zygote moves a learner process into, from the spawn
    header's settings; None when there is none to move it into (not root, or left out)."""
    options: Mapping[str, object] = settings if isinstance(settings, dict) else {}
    if os.geteuid() != 0 or "processes" in {str(s) for s in _list(options.get("skip"))}:
        return None
    return _positive(options.get("processes"), DEFAULT_PROCESSES)


def move_into_pids_cgroup(pid: int, limit: int, word: int) -> None:
    """In the zygote: move the fresh learner process ``pid`` into a pids cgroup of its own,
    then write the cgroup's path to ``word`` (nothing when it could not) and close it.
    The learner process waits for that word (:func:`moved_word`) before its file runs."""
    try:
        with contextlib.suppress(_Missing, OSError):
            os.write(word, _pids_cgroup_for(pid, limit).encode())
    finally:
        os.close(word)


def moved_word(word: int) -> Callable[[], str | None]:
    """In the learner process: what waits for :func:`move_into_pids_cgroup`'s word."""

    def wait() -> str | None:
        chunks = []
        try:
            while chunk := os.read(word, 4096):
                chunks.append(chunk)
        except OSError:
            return None
        finally:
            os.close(word)
        return b"".join(chunks).decode() or None

    return wait


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
        source_tree = package is not None and (path / package.name).resolve() == package
        if source_tree and path.name not in ("site-packages", "dist-packages"):
            continue
        roots.append(path)
    return tuple(r.resolve() for r in roots if r.exists())


def _trainer_package() -> Path | None:
    """The trainer package's folder (this file is trainer/checking/learner/confine.py)."""
    return Path(__file__).resolve().parents[2]


def _hidden(file: Path) -> list[Path]:
    """What stays unreadable even beneath a readable root: the trainer's package (the
    checker's code, and the catalogue with its solutions when installed) and the learner's
    folder (the progress file, other submissions)."""
    hidden = [file.resolve().parent]
    package = _trainer_package()
    if package is not None:
        hidden += [package, package.parent / "solutions", package.parent / "exercises"]
    return hidden


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
