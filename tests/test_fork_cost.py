"""What every check's forks cost: the server's and the zygote's memory on huge pages
from a run's second check, and a spare learner process reused only when it fits."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CATALOG, REPO
from trainer.checking import processes, protocol, runner
from trainer.checking.learner import zygote
from trainer.checking.runner import CheckingService, run_check

SIGMOID = CATALOG.get("sigmoid")
GOOD = REPO / "solutions" / "sigmoid.py"
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _huge_page_mode() -> str:
    """The kernel's transparent huge page mode (``always``, ``madvise``, ``never``), or ""."""
    try:
        words = THP_MODE.read_text().split()
    except OSError:
        return ""
    return next((w.strip("[]") for w in words if w.startswith("[")), "")


def _anonymous_huge_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


def _server_and_zygote(service: CheckingService) -> tuple[int, int]:
    """The pids; the zygote is the server's first child (its checkers come after it)."""
    server = service._process.pid  # type: ignore[union-attr]
    return server, min(processes.children_of(server))


needs_madvise_mode = pytest.mark.skipif(
    _huge_page_mode() != "madvise" or not sys.platform.startswith("linux"),
    reason="huge pages only on request (madvise mode) show what the collapse did",
)


@needs_madvise_mode
def test_from_the_second_check_the_server_and_zygote_sit_on_huge_pages():
    """A fork copies one page-table entry per 2 MiB page where it copied 512, and the
    exit frees as few: each of validate's 562 checks forks twice in the zygote. Remove either call
    of ``processes.collapse_to_huge_pages`` (server or zygote) and this test fails."""
    with CheckingService() as service:
        run_check(SIGMOID, GOOD, service=service)
        server, zygote_pid = _server_and_zygote(service)
        assert _anonymous_huge_kib(server) == 0  # one check: nothing paid for it
        assert _anonymous_huge_kib(zygote_pid) == 0
        run_check(SIGMOID, GOOD, service=service)
        run_check(SIGMOID, GOOD, service=service)  # the zygote's comes before the next spare
        assert _anonymous_huge_kib(server) >= 32 << 10
        assert _anonymous_huge_kib(zygote_pid) >= 32 << 10


def test_collapsing_is_harmless_where_the_kernel_cannot():
    """Without huge pages (another kernel, a container) it does nothing, and says so."""
    assert processes.collapse_to_huge_pages() >= 0


@pytest.fixture
def spare() -> Iterator[Callable[[int], zygote._Spare]]:
    """A spare made after ``imported`` imports of the zygote's (no process behind it)."""
    made: list[socket.socket] = []

    def make(imported: int) -> zygote._Spare:
        hand, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        other.close()
        made.append(hand)
        return zygote._Spare(hand, pid=-1, scratch="", imported=imported, cgroup=False)

    yield make
    for hand in made:
        hand.close()


def _spawn(*imports: str) -> protocol.Spawn:
    return protocol.Spawn(imports=list(imports))


@pytest.fixture
def discarded(monkeypatch: pytest.MonkeyPatch) -> list[zygote._Spare]:
    ended: list[zygote._Spare] = []
    monkeypatch.setattr(zygote, "_discard", ended.append)
    monkeypatch.setattr(zygote, "_IMPORTS", [3])
    return ended


def test_a_spare_made_after_the_last_import_is_handed_the_check(discarded, spare):
    made = spare(3)
    assert zygote._spare_for(_spawn("os"), [made]) is made
    assert discarded == []


def test_a_spare_made_before_the_zygote_imported_what_a_check_needs_is_not_used(discarded, spare):
    """Its check would import them in the learner's process, out of its memory cap. Drop
    the count's comparison in ``zygote._spare_for`` and this test fails."""
    made = spare(2)
    assert zygote._spare_for(_spawn("os"), [made]) is None
    assert discarded == [made]


def test_a_spare_is_not_used_for_a_check_needing_a_module_nobody_imported(discarded, spare):
    made = spare(3)
    missing = "torch._no_such_module_" + str(os.getpid())
    assert zygote._spare_for(_spawn(missing), [made]) is None
    assert discarded == [made]


def test_a_checker_finds_its_spec_read_by_the_server_and_a_changed_spec_read_anew():
    """The server reads each job's spec once, before forking its checker; a job whose
    spec differs in anything (a tolerance an author just edited) gets its own. Key the
    cache by the spec's name alone and the edited tolerance is never seen."""
    from trainer.checking.job import Job
    from trainer.checking.trusted import checker

    def job(data: dict[str, object]) -> Job:
        return Job(exercise=data, spec_path="", spec_name="sigmoid.yaml", file="",
                   source="", seed=0, token="", output_mark="")  # fmt: skip

    data = dict(SIGMOID.data)
    first = checker.job_exercise(job(data))
    assert checker.job_exercise(job(dict(data))) is first  # read once
    tolerances = {**data["tolerances"], "float32": {"rtol": 0.5, "atol": 0.5}}
    edited = {**data, "tolerances": tolerances}
    changed = checker.job_exercise(job(edited))
    assert changed is not first
    assert changed.tolerances != first.tolerances


def _zygote_children(service: CheckingService) -> list[int]:
    return processes.children_of(_server_and_zygote(service)[1])


def test_a_single_check_makes_no_learner_process_for_a_check_that_will_not_come(monkeypatch):
    """A spare made while the only check runs takes CPU from it, and time to end after it.
    Let the zygote make spares whatever the check says (``ahead[0] = spawn.more`` in
    ``zygote._on_request``) and this test fails."""
    left: list[list[int]] = []

    class Watched(CheckingService):
        def close(self, wait: bool = True) -> None:
            if self._process is not None:
                left.append(_zygote_children(self))
            super().close(wait)

    monkeypatch.setattr(runner, "CheckingService", Watched)
    report = run_check(SIGMOID, GOOD)

    assert report.passed, report.first_failure
    assert left == [[]]


def test_a_service_that_checks_again_has_the_next_learner_process_made_ahead():
    with CheckingService() as service:
        assert run_check(SIGMOID, GOOD, service=service).passed
        deadline = time.monotonic() + 5
        while not _zygote_children(service) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _zygote_children(service)


def test_a_process_that_ended_is_told_at_once_and_a_running_one_is_not():
    """What replaced Popen.wait(timeout=...)'s polling at every check's end."""
    import subprocess

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert processes.ended_within(sleeper.pid, 0.05) is False
        sleeper.kill()
        assert processes.ended_within(sleeper.pid, 5) is True  # a zombie has ended
    finally:
        sleeper.kill()
        sleeper.wait()
    assert processes.ended_within(sleeper.pid, 0.05) in (True, None)  # reaped: gone


def test_the_zygote_finds_landlock_without_running_ldconfig(monkeypatch):
    """landlockpy looks for libc with ctypes.util.find_library, which runs `ldconfig -p`
    in a subprocess: the zygote hands it ours. Remove that and this test fails."""
    import ctypes.util

    landlockpy = pytest.importorskip("landlockpy")
    from trainer.checking.learner import confine

    def no_ldconfig(name: str) -> str | None:
        raise AssertionError(f"find_library({name!r}) runs ldconfig")

    monkeypatch.setattr(ctypes.util, "find_library", no_ldconfig)
    monkeypatch.setattr(landlockpy._syscall, "_libc", None)
    confine._landlock_abi.cache_clear()
    try:
        assert confine._landlock_abi() >= 0
    except OSError:  # a kernel without Landlock: what matters is that no ldconfig ran
        pass
    finally:
        confine._landlock_abi.cache_clear()


def test_the_zygote_lists_the_trainers_modules_again_before_a_fork_once_an_import_changed_them(
    monkeypatch,
):
    """A learner process renames the trainer's modules (serve.look_plain) from the
    zygote's list while sys.modules is as listed; after an import in the zygote, each
    one would otherwise go through every name of sys.modules, and copy their pages."""
    from trainer.checking.learner import guard, serve

    monkeypatch.setattr(serve, "_OURS", [-1, ["trainer.gone"]])  # listed before an import
    monkeypatch.setattr(os, "fork", lambda: 4321)
    assert zygote._fork() == 4321
    version, names = serve._OURS
    assert version == guard.dict_version(sys.modules)
    assert "trainer.checking.learner.serve" in names and "trainer.gone" not in names
    assert serve._our_modules() == names
