"""The catalogue's own files share checkers (server._Pool): validate's checks of one
exercise go to a checker that finished another, instead of a fork of the server each;
a learner's file always gets a checker of its own."""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CATALOG, REPO
from trainer.checking import processes, server, transport
from trainer.checking.job import Job
from trainer.checking.runner import CheckingService, Launched, run_check

SIGMOID = CATALOG.get("sigmoid")
RELU = CATALOG.get("relu")
GOOD = REPO / "solutions" / "sigmoid.py"
WRONG = REPO / "solutions" / "wrong" / "sigmoid" / "forgets_grad_output.py"
# Long enough for a checker that is free to have said so before the next check comes.
SETTLE = 0.3


class _Recording:
    """A service that notes the pid of the checker each check ran in."""

    def __init__(self, service: CheckingService) -> None:
        self.service = service
        self.pids: list[int] = []

    def launch(self, job: Job) -> Launched:
        launched = self.service.launch(job)
        self.pids.append(launched.pid)
        return launched

    def __getattr__(self, name: str) -> Any:
        return getattr(self.service, name)


@pytest.fixture(scope="module")
def service() -> Any:
    with CheckingService() as own:  # its own: the worker's shared one checks much else
        yield own


def _check(recording: _Recording, file: Path, **options: Any) -> Any:
    options = {"catalogue_file": True, "second_process": False, **options}
    exercise = options.pop("exercise", SIGMOID)
    report = run_check(exercise, file, service=recording, solution=GOOD, **options)  # type: ignore[arg-type]
    time.sleep(SETTLE)
    return report


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_the_catalogues_files_of_one_exercise_share_a_checker_and_its_verdicts(service):
    """Three checks, one checker; each verdict is the one a fresh checker gives: the
    wrong variant fails where its spec says, and the reference after it still passes."""
    recording = _Recording(service)
    first = _check(recording, GOOD)
    wrong = _check(recording, WRONG, stop_after_failure=True)
    again = _check(recording, GOOD)
    assert len(set(recording.pids)) == 1, recording.pids
    # Pinned to a CPU for a check, it waits for the next unpinned (processes.release_cpus).
    server_pid = service._process.pid
    assert os.sched_getaffinity(recording.pids[0]) == os.sched_getaffinity(server_pid)
    assert first.passed and again.passed
    assert wrong.first_failure is not None and wrong.first_failure.id == "backward"
    assert [s.to_dict() | {"seconds": 0} for s in again.stages] == [
        s.to_dict() | {"seconds": 0} for s in first.stages
    ]


def test_a_learners_file_never_shares_a_checker(service):
    recording = _Recording(service)
    _check(recording, GOOD, catalogue_file=False)
    _check(recording, GOOD, catalogue_file=False)
    assert len(set(recording.pids)) == 2


def test_a_check_that_may_use_a_second_process_gets_a_checker_of_its_own(service):
    """Its stages ahead run on a thread that could outlive the check (trusted/ahead.py)."""
    recording = _Recording(service)
    _check(recording, GOOD, second_process=None)
    _check(recording, GOOD, second_process=None)
    assert len(set(recording.pids)) == 2


def test_a_waiting_checker_ends_when_another_exercise_comes_though_a_checker_runs(
    service, tmp_path
):
    """The server closes its socket; it hears that only if no other checker holds a copy
    of the server's end (each fork lets go of the pool's sockets): here a learner's
    check, forked while it waited, is still running."""
    recording = _Recording(service)
    _check(recording, GOOD)
    waiting = recording.pids[-1]
    slow = tmp_path / "slow_sigmoid.py"
    slow.write_text(
        "import time\n_SLEPT = []\n"
        + GOOD.read_text().replace(
            "def forward(ctx, x):",
            "def forward(ctx, x):\n        if not _SLEPT:\n            _SLEPT.append(time.sleep(2.5))",
            1,
        )
    )
    assert "_SLEPT.append" in slow.read_text()
    running = threading.Thread(
        target=run_check, args=(SIGMOID, slow), kwargs={"service": service, "timeout": 30}
    )
    running.start()
    try:
        time.sleep(0.8)  # its checker is forked, and sleeps in the first forward
        relu = REPO / "solutions" / "relu.py"
        assert _check(recording, relu, exercise=RELU).passed
        assert _gone_within(waiting, 1.5), "the first exercise's checker still waits"
        assert running.is_alive()
    finally:
        running.join()


def test_a_catalogue_check_that_times_out_ends_its_checker_and_the_next_one_runs(service, tmp_path):
    recording = _Recording(service)
    """A sleep, not a loop: no CPU cap ends it, only the timeout's kill of the checker."""
    endless = tmp_path / "endless.py"
    endless.write_text(
        GOOD.read_text().replace(
            "def forward(ctx, x):", "def forward(ctx, x):\n        __import__('time').sleep(600)", 1
        )
    )
    hung = _check(recording, endless, timeout=2)
    assert hung.first_failure is not None and "timed out" in hung.first_failure.message
    assert _gone_within(recording.pids[-1], 2.0), "a checker that did not finish lives on"
    assert _check(recording, GOOD).passed


def test_a_checker_done_with_a_check_runs_on_any_cpu_again_and_holds_no_claim(
    tmp_path, monkeypatch
):
    """What it claimed and pinned for one check (processes.claim_a_cpu, pin) it gives back
    before the next (release_cpus)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing is claimed")
    monkeypatch.setattr(processes, "_cpu_locks", lambda: str(tmp_path))
    before = os.sched_getaffinity(0)
    try:
        cpu = processes.claim_a_cpu()
        assert cpu is not None
        processes.pin(cpu, [])
        assert os.sched_getaffinity(0) == {cpu}
        assert processes.release_cpus()
        assert os.sched_getaffinity(0) == before
        with open(tmp_path / str(cpu), "w") as lock:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while still held
    finally:
        os.sched_setaffinity(0, before)


def test_only_the_catalogues_files_checked_one_process_at_a_time_may_share_checkers():
    job = Job(
        exercise=dict(SIGMOID.data), spec_path="", spec_name="sigmoid", file="f.py",
        source="", seed=0, token="t", output_mark="m", catalogue_file=True,
        second_process=False,
    )  # fmt: skip
    plan = object()
    assert server.may_share_checker(job, plan)
    assert not server.may_share_checker(dataclasses.replace(job, catalogue_file=False), plan)
    assert not server.may_share_checker(dataclasses.replace(job, second_process=None), plan)
    assert not server.may_share_checker(job, None)  # a single check's: no plan kept
    assert not server.may_share_checker(None, plan)


def test_a_checker_of_the_pool_takes_no_job_of_another_exercise():
    """The server hands a waiting checker only its exercise's jobs; the checker holds to
    that too: a plan is never used for another exercise's check."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    job = Job(
        exercise=dict(RELU.data), spec_path="", spec_name="relu", file="f.py", source="",
        seed=0, token="t", output_mark="m", catalogue_file=True,
    )  # fmt: skip
    job_read, job_write = os.pipe()
    result_read, result_write = os.pipe()
    output_read, output_write = os.pipe()
    transport.send_with_fds(ours, {"job": True}, [job_read, result_write, output_write])
    transport.send(job_write, job.to_wire())
    for fd in (job_read, job_write, result_write, output_write):
        os.close(fd)
    sigmoid_key = Job(**{**job.to_wire(), "exercise": dict(SIGMOID.data)}).plan_key
    received: list[object] = []
    thread = threading.Thread(target=lambda: received.append(server._next_job(theirs, sigmoid_key)))
    thread.start()
    assert transport.receive_with_fds(ours, 0)[0] == {"free": True}
    thread.join(5)
    assert received == [None]
    assert os.read(result_read, 1) == b""  # its descriptors closed, not kept
    assert os.read(output_read, 1) == b""
    for sock in (ours, theirs):
        sock.close()
