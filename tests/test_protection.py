"""Host protection (issue 16): the learner's code cannot touch the machine it runs on.

One test per channel (network, the machine's Unix sockets, writing outside the
check's folder, reading the progress file, a process bomb, a CPU-time runaway), each through a real check
of a file that is the correct sigmoid solution plus one attempt. Each asserts
the named verdict, and that nothing on disk changed: the victim's workspace
(its progress file beside the learner's file), a decoy home folder and
another student's submission are compared before and after. The CLI's own
workspace is elsewhere, so the check's own progress counting changes nothing
compared.

Each test fails when its protection is removed (the level still claiming it):
network by the network namespace and Landlock's TCP rules, Unix sockets by the
seccomp filter, writes and reads by
Landlock's file rules, the bomb by RLIMIT_NPROC in a fresh user namespace (a
pids cgroup under root), the runaway by RLIMIT_CPU. Where this machine's kernel
cannot give a protection, its test is skipped saying why, and
``test_the_kernel_gives_every_protection_it_allows`` fails instead if the
level claims less than the kernel offers.
"""

from __future__ import annotations

import ctypes
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CATALOG, REPO, check_json, first_failure, run_cli, shared_service
from trainer.checking.report import ProtectionLevel
from trainer.checking.runner import HostLimits, run_check
from trainer.state import STATE_FILE, Progress, State, StateStore

CORRECT_SOLUTION = (REPO / "solutions" / "sigmoid.py").read_text(encoding="utf-8")
Snapshot = dict[str, bytes | None]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A learner's workspace: a progress file, and the scratch files the attacks go in."""
    workspace = tmp_path / "victim"
    workspace.mkdir()
    state = State(current="sigmoid", exercises={"sigmoid": Progress(started=True, checks=3)})
    StateStore(workspace).save(state)
    return workspace


@pytest.fixture
def decoy_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The home folder the learner's process sees (``$HOME``), with a file worth keeping."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text("# the user's own\n")
    (home / ".ssh" / "id_ed25519").write_text("not a real key\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def other_submission(tmp_path: Path) -> Path:
    folder = tmp_path / "submissions"
    folder.mkdir()
    path = folder / "alice.py"
    path.write_text(CORRECT_SOLUTION)
    return path


@pytest.fixture
def disk(
    victim: Path, decoy_home: Path, other_submission: Path
) -> Callable[[], Callable[[], None]]:
    """``disk()`` takes a snapshot of the workspace, the home folder and the submissions;
    the function it returns asserts that nothing there changed since."""
    roots = (victim, decoy_home, other_submission.parent)

    def watch() -> Callable[[], None]:
        before = snapshot(*roots)

        def unchanged() -> None:
            after = snapshot(*roots)
            changed = sorted(
                k for k in before.keys() | after.keys() if before.get(k) != after.get(k)
            )
            assert not changed, f"changed on disk: {changed}"

        return unchanged

    return watch


def snapshot(*roots: Path) -> Snapshot:
    """Every file and folder beneath ``roots``: contents (None for a folder)."""
    found: Snapshot = {}
    for root in roots:
        for path in [root, *root.rglob("*")]:
            found[str(path)] = None if path.is_dir() else path.read_bytes()
    return found


def attempt(workspace: Path, name: str, code: str) -> Path:
    """The correct solution with ``code`` run first, at import, as the learner's scratch file."""
    path = workspace / name
    path.write_text(code + "\n\n" + CORRECT_SOLUTION, encoding="utf-8")
    return path


def failed_at_load(exit_code: int, report: dict[str, Any]) -> str:
    assert exit_code == 1, report
    failure = first_failure(report)
    assert failure is not None and failure["id"] == "load", report
    return str(failure["message"])


def require(report: dict[str, Any], protection: str) -> None:
    """Skip when this machine cannot give ``protection`` (the level says why)."""
    level = ProtectionLevel.from_dict(report.get("protection"))
    assert level is not None, report
    if protection in level.missing:
        pytest.skip(f"this machine gives no {protection} protection: {level.missing[protection]}")


@pytest.mark.parametrize(
    "left_out", [(), ("files",)], ids=["every protection", "the namespace alone"]
)
def test_opening_a_socket_fails_naming_the_network_and_reaches_nothing(victim, disk, left_out):
    """Two layers refuse TCP: the fresh network namespace and Landlock's TCP rules (part
    of the files protection). Left to the namespace alone, the connection still finds
    no route: remove the namespace and the second case fails; remove both and both do."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        path = attempt(
            victim,
            "sigmoid.py",
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).send(b'hi')",
        )
        unchanged = disk()
        report = run_check(
            CATALOG.get("sigmoid"), path, limits=HostLimits(skip=left_out), service=shared_service()
        ).to_dict()
        require(report, "network")

        message = failed_at_load(1 if not report["passed"] else 0, report)
        assert "tried to use the network: a check runs without network" in message
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    unchanged()


def test_connecting_to_a_unix_socket_of_the_machine_fails_and_reaches_nothing(
    victim, disk, tmp_path
):
    # Like a desktop's D-Bus session bus or docker.sock: a socket that is a file.
    with socket.socket(socket.AF_UNIX) as listener:
        address = str(tmp_path / "session-bus")
        listener.bind(address)
        listener.listen()
        listener.setblocking(False)
        code = f"import socket\nsocket.socket(socket.AF_UNIX).connect({address!r})"
        path = attempt(victim, "sigmoid.py", code)
        unchanged = disk()
        exit_code, report = check_json("sigmoid", path)
        require(report, "network")

        message = failed_at_load(exit_code, report)
        assert "tried to use the network: a check runs without network or local sockets" in message
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    unchanged()


def _io_uring_here() -> bool:
    """Whether this process may set up an io_uring (the kernel has it, and allows it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(425, ctypes.c_uint(1), ctypes.create_string_buffer(120))
    if fd < 0:
        return False
    os.close(fd)
    return True


def test_setting_up_an_io_uring_is_refused(victim):
    """io_uring makes sockets without the socket system call the seccomp filter
    watches: the filter refuses io_uring_setup itself (EACCES). Remove that rule
    and this test fails wherever the kernel allows io_uring."""
    if not _io_uring_here():
        pytest.skip("this machine's kernel gives no io_uring anyway")
    code = (
        "import ctypes\n"
        "_libc = ctypes.CDLL(None, use_errno=True)\n"
        "_libc.syscall.restype = ctypes.c_long\n"
        "_fd = _libc.syscall(425, ctypes.c_uint(1), ctypes.create_string_buffer(120))\n"
        "print('IO_URING', _fd, ctypes.get_errno(), flush=True)"
    )
    exit_code, report = check_json("sigmoid", attempt(victim, "sigmoid.py", code))
    require(report, "network")
    assert exit_code == 0, report
    assert "IO_URING -1 13" in report["output"].splitlines(), report["output"]


@pytest.mark.parametrize(
    ("target", "verb"),
    [
        ("home/.bashrc", "open"),
        ("home/.ssh/authorized_keys", "create"),
        ("victim/sigmoid_notes.txt", "create"),
    ],
    ids=["appending-to-a-home-file", "into-the-home-folder", "into-the-workspace"],
)
def test_writing_outside_the_checks_folder_fails_naming_the_file_and_changes_nothing(
    victim, disk, tmp_path, target, verb
):
    where = tmp_path / target
    path = attempt(victim, "sigmoid.py", f"open({str(where)!r}, 'a').write('pwned\\n')")
    unchanged = disk()
    exit_code, report = check_json("sigmoid", path)
    require(report, "files")

    message = failed_at_load(exit_code, report)
    assert f"tried to {verb} {where}: " in message
    assert "writes are confined to the check's folder" in message
    unchanged()


def test_a_file_may_still_write_in_its_own_folder_which_is_then_removed(victim, disk):
    path = attempt(
        victim,
        "sigmoid.py",
        "import os, tempfile\n"
        "open('notes.txt', 'w').write('kept for the check only')\n"
        "tempfile.NamedTemporaryFile()\n"
        "print('wrote in', os.getcwd(), flush=True)",
    )
    unchanged = disk()
    exit_code, report = check_json("sigmoid", path)
    require(report, "files")

    assert exit_code == 0, report
    folder = report["output"].split("wrote in ", 1)[1].split()[0]
    assert not Path(folder).exists(), f"the check's folder {folder} was left behind"
    unchanged()


def test_reading_the_progress_file_fails_naming_it_and_shows_nothing(victim, disk):
    progress = victim / STATE_FILE
    path = attempt(victim, "sigmoid.py", f"print(open({str(progress)!r}).read(), flush=True)")
    unchanged = disk()
    exit_code, report = check_json("sigmoid", path)
    require(report, "files")

    message = failed_at_load(exit_code, report)
    assert f"tried to open {progress}: a check reads only" in message
    assert '"checks"' not in report["output"]
    unchanged()


@pytest.mark.parametrize(
    "secret",
    [
        REPO / "solutions" / "sigmoid.py",
        REPO / "trainer" / "checking" / "trusted" / "plan.py",
        REPO / "exercises" / "sigmoid.yaml",
    ],
    ids=["reference solution", "checker's code", "spec"],
)
def test_reading_the_reference_or_the_checker_fails_though_its_folder_is_on_sys_path(
    victim, secret
):
    """The repository (or, installed, the package with its catalogue) is on the learner's
    import path, beneath a root Python may read: the trainer's package and catalogue
    are hidden from it all the same. Leave out both the package's hiding and the
    source tree's (confine) and the learner reads the reference solution."""
    path = attempt(victim, "sigmoid.py", f"print(open({str(secret)!r}).read()[:40], flush=True)")
    exit_code, report = check_json("sigmoid", path)
    require(report, "files")

    message = failed_at_load(exit_code, report)
    assert f"tried to open {secret}: a check reads only" in message
    assert secret.read_text()[:40] not in report["output"]


def test_reading_another_submission_or_the_home_folder_fails(
    victim, disk, other_submission, decoy_home
):
    for secret in (other_submission, decoy_home / ".ssh" / "id_ed25519"):
        path = attempt(victim, "sigmoid.py", f"print(open({str(secret)!r}).read(), flush=True)")
        unchanged = disk()
        exit_code, report = check_json("sigmoid", path)
        require(report, "files")

        assert f"tried to open {secret}: a check reads only" in failed_at_load(exit_code, report)
        unchanged()


def test_a_process_bomb_stops_the_check_naming_the_one_process_rule(victim, disk):
    # Bounded (200), so that without the cap the test fails rather than the machine.
    bomb = (
        "import os, time\n"
        "for _ in range(200):\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)"
    )
    path = attempt(victim, "sigmoid.py", bomb)
    unchanged = disk()
    exit_code, report = check_json("sigmoid", path)
    require(report, "processes")

    message = failed_at_load(exit_code, report)
    assert "threads and subprocesses are refused" in message, message
    unchanged()


def test_a_cpu_time_runaway_is_stopped_by_the_cpu_cap_before_the_timeout(victim, disk):
    spin = "        while True:\n            pass\n"
    source = CORRECT_SOLUTION.replace("        output = torch.sigmoid(x)\n", spin, 1)
    assert source != CORRECT_SOLUTION
    path = victim / "sigmoid.py"
    path.write_text(source)
    unchanged = disk()
    # The timeout leaves room for a busy machine, where CPU time runs slower than the clock.
    # The cap travels with the job: the worker's warm server applies it as a new one would.
    report = run_check(
        CATALOG.get("sigmoid"),
        path,
        timeout=45,
        limits=HostLimits(cpu_seconds=2),
        service=shared_service(),
    ).to_dict()
    require(report, "cpu_time")

    failure = first_failure(report)
    assert failure is not None and failure["id"] == "forward", report
    assert "used up the CPU time a check allows" in failure["message"], failure
    unchanged()


def test_the_learners_process_holds_no_capability_even_as_root(victim):
    """Root outside a user namespace (a kernel or container that refuses one) without
    Landlock could read the checker's memory, job token and all, undumpable or not:
    the learner's process drops every capability, in whatever namespace it is.
    Landlock is left out here so that the process may read its own /proc status;
    remove ``_drop_capabilities`` from ``confine`` and this test fails (in its user
    namespace the process holds every capability)."""
    code = (
        "status = open('/proc/self/status').read()\n"
        "print('CAPS', [line.split()[-1] for line in status.splitlines()\n"
        "               if line.startswith(('CapEff', 'CapPrm', 'CapBnd', 'CapAmb', 'CapInh'))])"
    )
    path = attempt(victim, "sigmoid.py", code)
    report = run_check(
        CATALOG.get("sigmoid"), path, limits=HostLimits(skip=("files",)), service=shared_service()
    )
    assert report.passed, report.first_failure
    (line,) = [line for line in report.output.splitlines() if line.startswith("CAPS ")]
    assert line == "CAPS " + str(["0000000000000000"] * 5), line


@pytest.mark.usefixtures("warm_commands")  # what grade says of the level
def test_grade_says_the_level_once_at_the_top(tmp_path):
    submissions = tmp_path / "class"
    submissions.mkdir()
    for name in ("alice.py", "bob.py"):
        (submissions / name).write_text(CORRECT_SOLUTION)
    result = run_cli("grade", "sigmoid", str(submissions))

    assert result.exit_code == 0, result.stdout
    assert result.stdout.count("Host protection: ") == 1
    assert result.stdout.index("Host protection: ") < result.stdout.index("alice.py")
    document = run_cli("grade", "sigmoid", str(submissions), "--json").json()
    assert document["protection"]["level"] in ("full", "partial", "none")


@pytest.mark.usefixtures("warm_commands")  # what grade says of the level
def test_grade_refuses_without_full_protection_unless_told_unprotected(tmp_path, monkeypatch):
    import trainer.grading

    partial = ProtectionLevel({"files": "Landlock"}, {"network": "no user namespaces"})
    monkeypatch.setattr(trainer.grading, "protection_level", lambda *_: partial)
    submission = tmp_path / "alice.py"
    submission.write_text(CORRECT_SOLUTION)

    refused = run_cli("grade", "sigmoid", str(submission))
    assert refused.exit_code == 2
    assert "without network isolation (no user namespaces)" in refused.stderr
    assert "--unprotected" in refused.stderr

    graded = run_cli("grade", "sigmoid", str(submission), "--unprotected")
    assert graded.exit_code == 0, graded.stdout
    assert "Host protection: partial: without network isolation" in graded.stdout


# -- what this machine's kernel offers, found independently of trainer's code ----------------


def test_the_learners_code_cannot_name_any_process_outside_its_check(victim):
    """Its own PID namespace: the processes of the machine (this test's, its parent's)
    cannot be signalled, prlimit-ed, reniced, pinned or listed from the learner's
    process, which sees itself alone, as process 1 (reading a limit and signal 0 ask for
    the permission alone). Landlock is left out: it would hide /proc. Leave out the
    PID namespace (skip "processes") and every call reaches this test's process."""
    targets = [os.getpid(), os.getppid()]
    code = (
        "import os, resource\n"
        "reached = []\n"
        f"for pid in {targets!r}:\n"
        "    for name, call in [('kill', lambda: os.kill(pid, 0)),\n"
        "                       ('prlimit', lambda: resource.prlimit(pid, resource.RLIMIT_CORE)),\n"
        "                       ('renice', lambda: os.getpriority(os.PRIO_PROCESS, pid)),\n"
        "                       ('affinity', lambda: os.sched_getaffinity(pid))]:\n"
        "        try:\n"
        "            call()\n"
        "            reached.append(name)\n"
        "        except ProcessLookupError:\n"
        "            pass\n"
        "listed = sorted(n for n in os.listdir('/proc') if n.isdigit())\n"
        "print('REACHED', reached, 'LISTED', listed, 'SELF', os.getpid(), flush=True)"
    )
    path = attempt(victim, "sigmoid.py", code)
    report = run_check(
        CATALOG.get("sigmoid"), path, limits=HostLimits(skip=("files",)), service=shared_service()
    )
    require(report.to_dict(), "processes")
    assert report.passed, report.first_failure
    (line,) = [line for line in report.output.splitlines() if line.startswith("REACHED ")]
    assert line == "REACHED [] LISTED ['1'] SELF 1", line


def test_the_learners_code_cannot_signal_the_processes_of_the_checking_server(victim):
    """Landlock's signal scope, beneath the PID namespace (left out here, so that the
    zygote is the learner process's parent): the learner's process may signal only
    what it started, not its zygote, whose end would end every later check of the
    server (signal 0 asks the kernel for the permission alone). Remove the scope and
    this test fails."""
    code = (
        "import os\n"
        "try:\n"
        "    os.kill(os.getppid(), 0)\n"
        "    print('SIGNAL allowed')\n"
        "except PermissionError:\n"
        "    print('SIGNAL refused')"
    )
    report = run_check(
        CATALOG.get("sigmoid"),
        attempt(victim, "sigmoid.py", code),
        limits=HostLimits(skip=("processes",)),
        service=shared_service(),
    )
    require(report.to_dict(), "files")
    if _landlock_abi() < 6:
        pytest.skip("Landlock's signal scope needs ABI 6")
    assert report.passed, report.first_failure
    assert "SIGNAL refused" in report.output.splitlines(), report.output


def _landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, int(libc.syscall(444, None, 0, 1)))  # landlock_create_ruleset(VERSION)


def _user_namespaces() -> bool:
    """Whether a child can enter a fresh user and network namespace."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        os._exit(0 if libc.unshare(0x10000000 | 0x40000000) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def test_the_kernel_gives_every_protection_it_allows(victim):
    exit_code, report = check_json("sigmoid", attempt(victim, "sigmoid.py", ""))
    assert exit_code == 0, report
    level = ProtectionLevel.from_dict(report["protection"])
    assert level is not None
    assert {"cpu_time", "memory"} <= level.applied.keys(), level
    if _landlock_abi() >= 1:
        assert "files" in level.applied, level
    if _user_namespaces():
        assert {"network", "scratch", "processes"} <= level.applied.keys(), level
    if level.missing:
        assert report["protection"]["level"] == "partial"


def test_a_malformed_level_reads_as_unknown_never_as_full():
    malformed: list[object] = [None, "full", {"applied": {}}, {"applied": [], "missing": {}}]
    for data in malformed:
        assert ProtectionLevel.from_dict(data) is None
    assert ProtectionLevel({"network": "x"}, {}).level == "full"
    assert ProtectionLevel({"network": "x"}, {"files": "why"}).level == "partial"
    assert ProtectionLevel({}, {"files": "why"}).level == "none"
