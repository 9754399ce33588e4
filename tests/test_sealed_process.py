"""The sealed learner process: sealed by construction, not by a list of tricks.

Each test is a submission a determined learner could write, through a real check:
the correct sigmoid plus one attempt, run at import. Each names the construction
that stops it, and fails when that construction is removed:

* its own PID namespace: nothing outside the check can be named
  (``test_protection.test_the_learners_code_cannot_name_any_process_outside_its_check``);
* one process, one thread: seccomp kills ``clone``, ``clone3``, ``fork``, ``vfork``;
* memory: ``memfd_create`` refused, the scratch tmpfs capped;
* its own mount namespace: every mount read-only, a private size-capped tmpfs as the
  only writable place, the trainer's files covered, whatever Landlock does;
* a fixed environment;
* and around the process: a folder of any shape is removed, a server that dies runs
  its checks again, a symbolic link is never checked, an output flood costs the CLI
  bounded memory.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

import trainer
from tests.conftest import CATALOG, REPO, check_json, run_cli, shared_service
from tests.test_protection import CORRECT_SOLUTION, attempt, failed_at_load, require, victim
from trainer.checking.learner.confine import remove_tree
from trainer.checking.processes import children_of
from trainer.checking.runner import (
    OUTPUT_LINE_LIMIT,
    CheckingService,
    HostLimits,
    _Collected,
    run_check,
)

__all__ = ["victim"]  # the fixture, shared with test_protection

SIGMOID = CATALOG.get("sigmoid")


def _line(output: str, tag: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith(tag + " ")]
    assert lines, output
    return lines[-1]


# -- one process, one thread ---------------------------------------------------------------


@pytest.mark.parametrize(
    "start",
    [
        "import threading\nthreading.Thread(target=print).start()",
        "import os\nif os.fork() == 0:\n    os._exit(0)",
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.posix_spawn('/bin/true', ['true'], {})",
        "import multiprocessing\nmultiprocessing.Process(target=print).start()",
    ],
    ids=["thread", "fork", "subprocess", "posix_spawn", "multiprocessing"],
)
def test_a_thread_or_a_child_process_stops_the_check_naming_the_one_process_rule(victim, start):
    """A helper thread or a forked worker could derive the gradient out of the watch's
    sight, or outlive the check: none can be made. Remove the seccomp rule for clone
    (``_Rules.clone``) and every case passes its load."""
    exit_code, report = check_json("sigmoid", attempt(victim, "sigmoid.py", start))
    require(report, "processes")

    message = failed_at_load(exit_code, report)
    assert "the check runs your code in one thread and one process" in message, message
    assert "threads and subprocesses are refused" in message


def test_a_right_file_that_multiplies_big_matrices_still_passes(victim):
    """Every thread pool has one thread from the start (OpenMP, MKL, OpenBLAS: the server's
    environment), so numpy's and torch's kernels start no thread in the learner's
    process. Without those settings this right file is killed as one that starts threads."""
    code = (
        "import numpy as np\n"
        "import torch\n"
        "a = np.random.rand(600, 600)\n"
        "print('BLAS', float((a @ a).sum()) > 0, float((torch.randn(800, 800) @ torch.randn(800, 800)).abs().sum()) > 0, flush=True)"
    )
    report = run_check(SIGMOID, attempt(victim, "sigmoid.py", code), service=shared_service())

    assert report.passed, report.first_failure
    assert _line(report.output, "BLAS") == "BLAS True True"


# -- memory ---------------------------------------------------------------------------------


def _memory_cgroup_can_be_made() -> bool:
    """Found independently of the trainer: root, and a memory controller it may write."""
    if os.geteuid() != 0:
        return False
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for base in (Path("/sys/fs/cgroup/memory" + path), Path("/sys/fs/cgroup" + path)):
            if "memory" in controllers.split(",") or (controllers == "" and base.exists()):
                probe = base / f"trainer-probe-{os.getpid()}"
                try:
                    probe.mkdir()
                except OSError:
                    continue
                limit = "memory.max" if (probe / "memory.max").exists() else "memory.limit_in_bytes"
                found = (probe / limit).exists()
                probe.rmdir()
                if found:
                    return True
    return False


def test_as_root_the_learners_process_lives_in_a_memory_cgroup_of_its_own(victim):
    """Where a memory cgroup can be made (root), the learner's process is born in one of
    its own, capped: what RLIMIT_AS cannot count (the kernel's memory for it) is capped
    too. Remove ``join_memory_cgroup`` and this test fails."""
    if not _memory_cgroup_can_be_made():
        pytest.skip("no memory cgroup can be made here (not root, or no memory controller)")
    code = (
        "lines = open('/proc/self/cgroup').read().splitlines()\n"
        "print('CGROUP', [l.rsplit('/', 1)[-1] for l in lines\n"
        "                 if 'memory' in l.split(':')[1].split(',') or l.startswith('0::')], flush=True)"
    )
    report = run_check(
        SIGMOID,
        attempt(victim, "sigmoid.py", code),
        limits=HostLimits(skip=("files",)),
        service=shared_service(),
    )

    assert report.passed, report.first_failure
    assert "trainer-trainer-check-" in _line(report.output, "CGROUP"), report.output
    level = report.protection
    assert level is not None and "a memory cgroup of its own" in level.applied["memory"]


def test_with_every_protection_the_learners_process_is_born_in_a_capped_cgroup(victim):
    """The usual check's learner process is a spare, made before the check came: in a
    memory cgroup of its own, capped once the check says its limit, before any of the
    learner's code runs. Remove the cap in ``zygote._hand_over`` and this test fails."""
    if not _memory_cgroup_can_be_made():
        pytest.skip("no memory cgroup can be made here (not root, or no memory controller)")
    code = (
        "lines = open('/proc/self/cgroup').read().splitlines()\n"
        "print('CGROUP', [l.rsplit('/', 1)[-1] for l in lines\n"
        "                 if 'memory' in l.split(':')[1].split(',') or l.startswith('0::')], flush=True)"
    )
    report = run_check(
        SIGMOID, attempt(victim, "sigmoid.py", code), memory_limit_mb=128, service=shared_service()
    )

    assert report.passed, report.first_failure
    assert "trainer-trainer-check-" in _line(report.output, "CGROUP"), report.output
    level = report.protection
    assert level is not None and level.level == "full", level
    words = level.applied["memory"]
    assert "a memory cgroup of its own (" in words, words
    capped = int(words.split("a memory cgroup of its own (")[1].split(" MiB")[0])
    assert capped == 128 + 64, words  # the limit and the tmpfs, beyond torch's pages


def test_a_check_that_leaves_a_protection_out_gets_a_process_of_its_own_making(victim):
    """The spare learner process has every protection: a check that leaves one out (here
    its PID namespace) must not get it. Let ``zygote._spare_for`` hand the spare to every
    check and this learner's process is process 1 of a PID namespace it did not ask for."""
    code = "import os\nprint('PID', os.getpid(), flush=True)"
    report = run_check(
        SIGMOID,
        attempt(victim, "sigmoid.py", code),
        limits=HostLimits(skip=("processes",)),
        service=shared_service(),
    )

    assert report.passed, report.first_failure
    assert _line(report.output, "PID") != "PID 1", report.output
    level = report.protection
    assert level is not None and "processes" in level.missing


def test_memory_outside_the_address_space_cannot_be_made(victim):
    """memfd_create gives memory RLIMIT_AS does not count (1.5 GiB under a 128 MiB cap,
    found by the issue): refused. Remove the memfd rule and this test fails."""
    code = (
        "import os\n"
        "try:\n"
        "    fd = os.memfd_create('x')\n"
        "    os.write(fd, b'x' * (1 << 20))\n"
        "    print('MEMFD made', flush=True)\n"
        "except OSError as error:\n"
        "    print('MEMFD refused', error.errno, flush=True)"
    )
    report = run_check(SIGMOID, attempt(victim, "sigmoid.py", code), service=shared_service())
    require(report.to_dict(), "memory")

    assert report.passed, report.first_failure
    assert _line(report.output, "MEMFD") == "MEMFD refused 1", report.output


def test_a_plain_allocation_beyond_the_memory_limit_fails_the_check(victim):
    code = "import torch\nhog = torch.ones(64 << 20)  # 256 MiB"
    report = run_check(
        SIGMOID,
        attempt(victim, "sigmoid.py", code),
        memory_limit_mb=128,
        service=shared_service(),
    )
    require(report.to_dict(), "memory")

    assert not report.passed
    failure = report.first_failure
    assert failure is not None and failure.id == "load"
    assert "memory" in failure.message, failure.message


# -- the scratch folder: a private tmpfs -------------------------------------------------------

FILL = (
    "import os\n"
    "written = 0\n"
    "try:\n"
    "    with open('fill', 'wb') as handle:\n"
    "        for _ in range(200):\n"
    "            handle.write(b'x' * (1 << 20))\n"
    "            handle.flush()\n"
    "            written += 1\n"
    "except OSError as error:\n"
    "    print('FILL stopped', error.errno, flush=True)\n"
    "print('FILL wrote', written, 'MiB in', os.getcwd(), flush=True)\n"
    "os.remove('fill')"
)


def test_the_check_folder_is_a_private_capped_tmpfs_gone_with_the_check(victim):
    """Writing fills at most the tmpfs's cap, and the folder on disk never holds what
    was written (it is a mount point that stays empty). Leave out the tmpfs (skip
    "scratch") and 200 MiB land on the disk: the test fails."""
    report = run_check(
        SIGMOID,
        attempt(victim, "sigmoid.py", FILL),
        limits=HostLimits(scratch_mb=16),
        service=shared_service(),
    )
    require(report.to_dict(), "scratch")

    assert report.passed, report.first_failure
    assert _line(report.output, "FILL stopped") == "FILL stopped 28", report.output  # ENOSPC
    wrote = _line(report.output, "FILL wrote").split()
    assert int(wrote[2]) <= 16, wrote
    assert not Path(wrote[-1]).exists(), f"{wrote[-1]} outlived the check"


DEEP_AND_LOCKED = (
    "import os\n"
    "os.makedirs('locked/inside')\n"
    "open('locked/inside/f', 'w').write('x')\n"
    "os.chmod('locked/inside', 0o500)\n"
    "os.chmod('locked', 0o500)\n"
    "folder = os.getcwd()\n"
    "for _ in range(1500):\n"
    "    os.mkdir('d')\n"
    "    os.chdir('d')\n"
    "os.chdir(folder)\n"
    "print('TREE in', folder, flush=True)"
)


def test_a_folder_of_any_shape_left_behind_cannot_stop_the_checks_that_follow(victim):
    """A tree 1,500 levels deep and a locked folder, written on the disk (the tmpfs left
    out, as on a machine without mount namespaces): the zygote removes them and the next
    check on the same server passes. With ``shutil.rmtree`` (recursive) in ``release``
    the folder stays behind and this test fails."""
    service = shared_service()
    limits = HostLimits(skip=("scratch",))
    report = run_check(
        SIGMOID, attempt(victim, "sigmoid.py", DEEP_AND_LOCKED), limits=limits, service=service
    )
    assert report.passed, report.first_failure
    folder = Path(_line(report.output, "TREE in").split()[-1])
    deadline = time.monotonic() + 5
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists(), f"{folder} was left behind"

    honest = victim / "honest.py"
    honest.write_text(CORRECT_SOLUTION)
    assert run_check(SIGMOID, honest, service=service).passed


def test_remove_tree_removes_any_depth_and_any_mode(tmp_path, monkeypatch):
    """3,000 levels (a path of 6,000 characters, beyond PATH_MAX), a locked folder and a
    link to a folder that must survive. ``shutil.rmtree`` leaves the tree behind."""
    top = tmp_path / "scratch"
    top.mkdir()
    keep = tmp_path / "keep"
    keep.mkdir()
    (top / "link").symlink_to(keep)
    locked = top / "locked"
    locked.mkdir()
    (locked / "f").write_text("x")
    locked.chmod(0o500)
    monkeypatch.chdir(top)
    for _ in range(3000):
        os.mkdir("d")
        os.chdir("d")
    Path("f").write_text("x")
    os.chdir(tmp_path)

    remove_tree(str(top))

    assert not top.exists()
    assert keep.exists()
    assert Path.cwd() == tmp_path


def test_writing_anywhere_but_the_check_folder_fails_even_without_landlock(victim):
    """Every mount is read-only in the learner's mount namespace: with Landlock left out,
    a write beside the learner's file still fails, named. Remove the read-only remount
    and the file is written."""
    target = victim / "planted.py"
    code = f"open({str(target)!r}, 'w').write('planted')"
    exit_code, report = check_json(
        "sigmoid", attempt(victim, "sigmoid.py", code), "--leave-out", "files"
    )
    require(report, "scratch")

    assert f"tried to create {target}: writes are confined" in failed_at_load(exit_code, report)
    assert not target.exists()


@pytest.mark.parametrize(
    "secret",
    [
        Path(trainer.__file__).parent / "checking" / "trusted" / "plan.py",
        REPO / "solutions" / "sigmoid.py",
        REPO / "exercises" / "sigmoid.yaml",
    ],
    ids=["checker's code", "reference solution", "spec"],
)
def test_the_trainers_files_are_covered_even_without_landlock(victim, secret):
    """The trainer's package (with the catalogue, installed) and the exercise's folders
    are covered by empty read-only mounts: with Landlock left out they still cannot be
    read, however the package was installed. Remove the covering mounts and the
    learner reads them."""
    code = f"print(open({str(secret)!r}).read()[:40], flush=True)"
    exit_code, report = check_json(
        "sigmoid", attempt(victim, "sigmoid.py", code), "--leave-out", "files"
    )
    require(report, "scratch")

    assert f"tried to open {secret}: a check reads only" in failed_at_load(exit_code, report)


# -- the environment ---------------------------------------------------------------------------


def test_the_learners_process_sees_a_fixed_environment_and_none_of_the_users(victim, monkeypatch):
    """A grader's API token in the shell never reaches the submission: the checking
    server starts with a fixed environment, so ``os.environ`` and
    ``/proc/self/environ`` show only that. Pass the CLI's environment on and this fails."""
    monkeypatch.setenv("GRADER_API_TOKEN", "s3cr3t-value")
    code = (
        "import os\n"
        "names = sorted(os.environ)\n"
        "initial = sorted(e.split(b'=')[0].decode() for e in\n"
        "                 open('/proc/self/environ', 'rb').read().split(b'\\0') if e)\n"
        "print('ENV', names, flush=True)\n"
        "print('INITIAL', initial, flush=True)"
    )
    with CheckingService() as fresh:  # started now, from this environment
        report = run_check(SIGMOID, attempt(victim, "sigmoid.py", code), service=fresh)

    assert report.passed, report.first_failure
    allowed = {
        "PATH", "LANG", "HOME", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
        "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONDONTWRITEBYTECODE",
        "CUDA_VISIBLE_DEVICES", "TMPDIR",
    }  # fmt: skip
    for tag in ("ENV", "INITIAL"):
        names = set(eval(_line(report.output, tag).split(" ", 1)[1]))
        assert names <= allowed, names - allowed
    assert "s3cr3t" not in report.output


# -- around the process ---------------------------------------------------------------------


def test_a_symbolic_link_is_never_checked(tmp_path):
    """A submission linked to the reference solution would pass every stage."""
    link = tmp_path / "sigmoid.py"
    link.symlink_to(REPO / "solutions" / "sigmoid.py")
    exit_code, report = check_json("sigmoid", link)

    message = failed_at_load(exit_code, report)
    assert "is a symbolic link" in message and "solutions/sigmoid.py" in message, message


def test_a_file_of_the_trainers_own_package_is_never_checked(tmp_path):
    inside = Path(trainer.__file__).resolve().parent / "checking" / "wording.py"
    exit_code, report = check_json("sigmoid", inside)

    assert "is one of the trainer's own files" in failed_at_load(exit_code, report)


def test_a_check_whose_server_dies_under_it_runs_again_on_a_fresh_one(tmp_path):
    """Not the learner's doing (nothing of the check can reach the server): the check
    runs again, whole, and gives its real verdict. Without the retry it fails."""
    slow = tmp_path / "sigmoid.py"
    slow.write_text("import time\ntime.sleep(1.5)\n" + CORRECT_SOLUTION)
    with CheckingService() as service:
        first = service.generation
        process = service._process
        assert process is not None

        def kill_the_server() -> None:
            time.sleep(0.7)
            for child in children_of(process.pid):  # the zygote, the checker
                os.kill(child, signal.SIGKILL)
            os.kill(process.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_the_server)
        killer.start()
        report = run_check(SIGMOID, slow, service=service)
        killer.join()

        assert report.passed, report.first_failure
        assert service.generation > first


def test_an_output_flood_without_line_breaks_costs_the_cli_bounded_memory():
    collected = _Collected()
    chunk = b"x" * 65536
    for _ in range(400):  # 25 MiB without a newline
        collected.add_output(chunk)
    collected.finish_output()

    assert len(collected._partial) <= OUTPUT_LINE_LIMIT
    assert len(collected.output) <= 4 * 4000 + 1
    assert collected.cut == 400 * 65536 - OUTPUT_LINE_LIMIT


# -- a class: one submission cannot hurt another ----------------------------------------------

ATTACKS = {
    "deep_tree.py": DEEP_AND_LOCKED,
    "fill.py": FILL,
    "prlimit_parent.py": "import os, resource\n"
    "for pid in (os.getppid(), 1):\n"
    "    try:\n"
    "        resource.prlimit(pid, resource.RLIMIT_NOFILE, (8, 8))\n"
    "    except (OSError, ValueError):\n"
    "        pass",
    "threads.py": "import threading\nthreading.Thread(target=print).start()",
    "fork_bomb.py": "import os\nfor _ in range(50):\n    os.fork()",
    "memfd.py": "import os\nos.write(os.memfd_create('x'), b'x' * (256 << 20))",
    "flood.py": "import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 65536)",
    "kill_everything.py": "import os, signal\nfor pid in range(1, 4096):\n"
    "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass",
}


@pytest.mark.usefixtures("warm_commands")
def test_a_class_with_every_attack_placed_first_grades_every_honest_copy_full(tmp_path):
    submissions = tmp_path / "class"
    submissions.mkdir()
    for name, code in ATTACKS.items():
        (submissions / f"a_{name}").write_text(code + "\n\n" + CORRECT_SOLUTION)
    for index in range(4):
        (submissions / f"z_honest_{index}.py").write_text(CORRECT_SOLUTION)

    result = run_cli("grade", "sigmoid", str(submissions), "--jobs", "2", "--json")

    assert result.exit_code == 0, result.stdout
    rows = {Path(row["submission"]).name: row for row in result.json()["grades"]}
    for index in range(4):
        row = rows[f"z_honest_{index}.py"]
        assert row["score"] == row["max_score"], row
