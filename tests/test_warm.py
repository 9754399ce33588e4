"""The warm checker (watch mode, grading, validate): same verdicts and isolation as a cold check."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CATALOG, REPO, shared_service
from trainer.checking.runner import CheckingService, HostLimits, run_check

SIGMOID = CATALOG.get("sigmoid")
GOOD = (REPO / "solutions" / "sigmoid.py").read_text()


@pytest.fixture
def warm() -> CheckingService:
    return shared_service()  # the worker's warm server, as watch, grade and validate use one


def _stages(path: Path, service: CheckingService) -> list[dict[str, object]]:
    exercise = CATALOG.get(path.stem if path.parent.name == "solutions" else path.parent.name)
    report = run_check(exercise, path, service=service)
    return [{**s.to_dict(), "seconds": 0} for s in report.stages]


def test_a_warm_check_gives_the_same_report_as_a_cold_one(warm):
    """Every stage's verdict and every word of it, times aside: a report is a function of
    the file, the spec and the seed, whichever server made it and whatever that server
    did before (second derivatives along random directions included). A new server
    checks the files in the opposite order to the worker's, which has checked much else."""
    sources = [
        REPO / "solutions" / "sigmoid.py",
        REPO / "solutions" / "wrong" / "sigmoid" / "forgets_grad_output.py",
        REPO / "solutions" / "wrong" / "logsumexp" / "once_differentiable.py",
    ]
    with CheckingService() as new:
        cold = {source: _stages(source, new) for source in reversed(sources)}
    for source in sources:
        assert _stages(source, warm) == cold[source], source.name


def test_a_warm_check_that_hangs_is_killed_and_the_next_check_still_runs(warm, tmp_path):
    hangs = tmp_path / "hangs.py"
    hangs.write_text(
        GOOD.replace(
            "(output,) = ctx.saved_tensors",
            "(output,) = ctx.saved_tensors\n        import time\n        time.sleep(3600)",
        )
    )
    started = time.monotonic()
    report = run_check(SIGMOID, hangs, service=warm, timeout=3)
    assert time.monotonic() - started < 15
    failure = report.first_failure
    assert failure is not None and failure.id == "backward"
    assert "timed out after 3 s" in failure.message
    assert run_check(SIGMOID, REPO / "solutions" / "sigmoid.py", service=warm).passed


def test_a_warm_check_reports_how_the_process_ended(warm, tmp_path):
    exits = tmp_path / "exits.py"
    exits.write_text(GOOD.replace("output = torch.sigmoid(x)", "import os\n        os._exit(7)"))
    report = run_check(SIGMOID, exits, service=warm)
    failure = report.first_failure
    assert failure is not None and failure.id == "forward"
    assert "exited with code 7" in failure.message


def test_a_process_started_in_a_new_session_does_not_outlive_a_warm_check(warm, tmp_path):
    starts = tmp_path / "starts.py"
    starts.write_text(
        "import subprocess\n"
        "_p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        # Printed: the file may not write outside its check's folder (host protection).
        "print('sleeper pid', _p.pid, flush=True)\n" + GOOD
    )
    # A process can be started only where the one-process rule is missing: left out here,
    # to prove the layers beneath it (the rule itself: test_sealed_process).
    report = run_check(SIGMOID, starts, service=warm, limits=HostLimits(skip=("processes",)))
    assert report.passed
    pid = int(report.output.split("sleeper pid ", 1)[1].split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail(f"`sleep` (pid {pid}) outlived the check")


def test_a_learner_process_of_a_vmap_exercise_starts_with_torch_func_s_imports_done(warm, tmp_path):
    """torch.func.grad imports torch._dynamo on first use (~0.8 s of CPU): the zygote
    imports it once for the stages that need it, so a re-check does not pay it again."""
    solution = (REPO / "solutions" / "normalize_vmap.py").read_text()
    probe = tmp_path / "normalize_vmap.py"
    probe.write_text(
        "import sys\nprint('dynamo loaded:', 'torch._dynamo' in sys.modules, flush=True)\n"
        + solution
    )
    report = run_check(CATALOG.get("normalize_vmap"), probe, service=warm)
    assert report.passed, report.first_failure
    assert "dynamo loaded: True" in report.output


def test_the_zygote_imports_only_torch_modules_it_is_asked_for(tmp_path, monkeypatch):
    """What a checker names for learner processes to find imported is torch's: any other
    name is not imported into the process every learner process is forked from."""
    from trainer.checking.learner import zygote

    (tmp_path / "not_torch_probe.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    zygote._import_once(["not_torch_probe", "torch.nn"])
    assert "not_torch_probe" not in sys.modules


def test_a_single_check_leaves_the_plan_to_its_checker_and_a_service_keeps_it(monkeypatch):
    """The server is the largest process of a check: one check's plan (tens of MB of
    allocations) is worked out in its checker, which ends with it; a service that
    checks again keeps each exercise's plan in the server. With the server's own plan
    making broken (a fault of ours), a single check does not notice; a service's does."""
    from tests.faults import server_code, with_fault
    from trainer.catalog import solution_path
    from trainer.checking import server

    code = server_code("trainer.checking.server:_plan")  # the plans the server keeps
    monkeypatch.setattr(server, "bootstrap", with_fault(server.bootstrap, code))
    exercise = CATALOG.get("relu")
    single = run_check(exercise, solution_path(exercise))
    assert single.passed and single.bug is None
    with CheckingService() as service:
        kept = run_check(exercise, solution_path(exercise), service=service)
    assert kept.bug is not None and kept.bug.where == "the checking server", kept.bug
