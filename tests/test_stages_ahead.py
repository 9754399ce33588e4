"""A check on its own uses both CPUs: a second learner process of the file runs the
stages that call backward directly (contract, stability, gradcheck) while the first
runs the others (trusted/ahead.py). Every stage is still reported in its turn, as
sealed and as watched as before; each test names the guard it proves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import CATALOG
from tests.test_truth import (
    RIGHT_BACKWARD,
    SAVES_OUTPUT,
    check,
    first_failure,
    service,
    sigmoid,
)
from trainer.checking.report import CheckReport, Verdict
from trainer.checking.runner import CheckingService, run_check
from trainer.checking.trusted.ahead import AHEAD, stages_ahead

__all__ = ["service"]  # the fixture, shared with test_truth


def split_check(service: CheckingService, tmp_path: Path, source: str) -> CheckReport:
    """A check of sigmoid with its second process, even beside the other test worker's
    checks (which claim CPUs: the test of that is the last one here)."""
    path = tmp_path / "sigmoid.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return run_check(CATALOG.get("sigmoid"), path, service=service, second_process=True)


# Each process prints its own token: one drawn as the file is imported.
TOKENS = "import os\n\nTOKEN = os.urandom(6).hex()\n" + sigmoid(
    SAVES_OUTPUT, 'print("backward in", TOKEN)\n' + textwrap.dedent(RIGHT_BACKWARD).strip()
)


def _tokens(printed: str) -> set[str]:
    return {line.split()[-1] for line in printed.splitlines() if line.startswith("backward in")}


def test_a_check_on_its_own_runs_the_direct_calls_in_a_second_process(service, tmp_path):
    """The 500 calls in a row run in the first process, the contract in the second:
    each prints its own token, and each stage shows what its process printed (the
    second process's output is kept apart and written under its stage in its turn)."""
    report = split_check(service, tmp_path, TOKENS)
    assert report.passed
    first = _tokens(report.output_by_stage.get("state", ""))
    second = _tokens(report.output_by_stage.get("contract", ""))
    assert len(first) == 1 and len(second) == 1, report.output_by_stage.keys()
    assert first != second
    assert _tokens(report.output_by_stage.get("gradcheck", "")) == second


# Derives by autograd only once the learner process has answered 20 backward calls (the
# first process answers two, for "Derived by hand"; the second, 80: backward parity,
# the contract, stability and gradcheck).
DERIVES_IN_THE_CONTRACT = sigmoid(
    SAVES_OUTPUT,
    """
    import builtins
    (y,) = ctx.saved_tensors
    answered = torch._C._current_graph_task_id() == -1  # a backward call, not the engine's
    builtins.answered = getattr(builtins, "answered", 0) + answered
    if builtins.answered > 20:
        with torch.enable_grad():
            x = torch.logit(y.detach()).requires_grad_()
            (g,) = torch.autograd.grad(torch.sigmoid(x), x, grad_output)
        return g
    return grad_output * y * (1 - y)
    """,
)


def test_a_derivation_only_the_second_process_sees_fails_derived_by_hand(service, tmp_path):
    """Every value is right; only the second process's watch sees the autograd pass.
    "Derived by hand" reports it: remove the look at ``also_watched`` in by_hand.py
    and this file passes."""
    stage, message, mistake = first_failure(
        check(service, tmp_path, "sigmoid", DERIVES_IN_THE_CONTRACT)
    )
    assert stage == "by_hand"
    assert "torch.autograd.grad" in message
    assert mistake == "derived_by_torch"


# Slow when called directly (the second process's stages), and ends its process at
# its 200th forward: in the first process, during the 500 calls in a row, which that
# process runs early while it waits for the contract.
ENDS_DURING_THE_CALLS = sigmoid(
    """
    import builtins, os
    builtins.forwards = getattr(builtins, "forwards", 0) + 1
    if builtins.forwards == 200:
        os._exit(0)
    y = torch.sigmoid(x)
    ctx.save_for_backward(y)
    return y
    """,
    """
    import time
    if torch._C._current_graph_task_id() == -1:
        time.sleep(0.01)
    (y,) = ctx.saved_tensors
    return grad_output * y * (1 - y)
    """,
)


def test_a_process_ending_in_a_stage_run_early_has_the_stages_before_it_said(service, tmp_path):
    """The contract comes from the second process, then "Calls as in training" fails
    with the first process's end, and only the stages after it are skipped. Block the
    stages as soon as the first process is gone (drop ``and not early`` in
    run_stages) and the contract is skipped, the failure said as a skip."""
    report = split_check(service, tmp_path, ENDS_DURING_THE_CALLS)
    verdicts = {s.id: s.verdict for s in report.stages}
    assert verdicts["contract"] is Verdict.PASS
    state = next(s for s in report.stages if s.id == "state")
    assert state.verdict is Verdict.FAIL and "os._exit" in state.message
    assert verdicts["stability"] is Verdict.SKIP and verdicts["gradcheck"] is Verdict.SKIP


AHEAD_HERE = ["backward", "contract", "stability", "gradcheck"]


@pytest.mark.parametrize(
    ("stop_after_failure", "alone", "wanted", "expected"),
    [
        (False, True, None, AHEAD_HERE),
        (True, True, None, []),
        (False, False, None, []),
        (False, False, True, AHEAD_HERE),
        (False, True, False, []),
    ],
)
def test_only_a_full_check_on_its_own_uses_a_second_process(
    stop_after_failure, alone, wanted, expected, monkeypatch
):
    """A run that stops at its first failure (validate's wrong variants) rarely reaches
    those stages, and beside other checks (grade, validate) every CPU is busy; a job's
    ``second_process`` forces it or forbids it."""
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    stages = ["load", "forward", "backward", "contract", "state", "stability", "gradcheck"]
    assert stages_ahead(stop_after_failure, alone, [*stages, "by_hand"], wanted) == expected


def test_a_machine_with_one_cpu_never_uses_a_second_process(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0})
    assert stages_ahead(False, True, ["load", *AHEAD]) == []


def test_a_check_beside_another_anywhere_uses_one_process(service, tmp_path):
    """CPUs are claimed machine-wide (a lock file per CPU, held while a check runs): a
    check that cannot claim two, because another service's check holds one, runs
    every stage in its first process. Ignore the claims (split whenever the CLI says
    the check is alone) and the contract prints the second process's token."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import json, time\n"
            "from trainer.checking import processes\n"
            "held = []\n"
            "for _ in range(2000):  # the other test worker's checks claim CPUs too\n"
            "    held += [c for c in [processes.claim_a_cpu()] if c is not None]\n"
            "    if held:\n"
            "        break\n"
            "    time.sleep(0.01)\n"
            "print(json.dumps(held), flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert json.loads(holder.stdout.readline()), "no CPU could be claimed"
        report = check(service, tmp_path, "sigmoid", TOKENS)
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert report.passed
    first = _tokens(report.output_by_stage.get("state", ""))
    assert _tokens(report.output_by_stage.get("contract", "")) == first


PRINTS_EACH_CALL = sigmoid(
    SAVES_OUTPUT,
    """
    print("backward of", tuple(grad_output.shape), grad_output.dtype)
    (y,) = ctx.saved_tensors
    return grad_output * y * (1 - y)
    """,
)


def test_what_the_second_process_prints_is_marked_run_by_run_as_in_one_process(service, tmp_path):
    """A failure shows what the code printed for its case: the second process's runs
    are marked in its output as the first process's are. Drop the sink's marks (in
    ahead.py) and only whole stages are marked."""
    path = tmp_path / "sigmoid.py"
    path.write_text(PRINTS_EACH_CALL, encoding="utf-8")
    apart, together = (
        run_check(CATALOG.get("sigmoid"), path, service=service, second_process=split)
        for split in (True, False)
    )
    ahead = {k: v for k, v in apart.output_by_stage.items() if k.split("|")[0] in AHEAD}
    alone = {k: v for k, v in together.output_by_stage.items() if k.split("|")[0] in AHEAD}
    assert any("|" in key for key in alone)
    assert ahead == alone


def test_a_formula_wrong_on_every_call_is_not_blamed_on_state_with_backward_ahead(
    service, tmp_path
):
    """Backward parity runs in the second process; the 500 calls, run early in the
    first, read its verdict from there (waited for). Read only the verdicts reported
    so far (drop VerdictsSoFar's look ahead) and state gets the blame's other words."""
    report = split_check(
        service, tmp_path, sigmoid(SAVES_OUTPUT, "(y,) = ctx.saved_tensors\nreturn y * (1 - y)\n")
    )
    assert first_failure(report)[0] == "backward"
    state = next(s for s in report.stages if s.id == "state")
    assert "every one of the" in state.message and "as Backward parity shows" in state.message


def test_a_hang_in_a_stage_run_ahead_is_said_of_that_stage(service, tmp_path):
    """Backward hangs in both processes: in the second during backward parity, in the
    first during the 500 calls it runs early. The timeout names the first stage
    started and not ended, whichever process ran it: remove the runner's list of
    started stages (it kept the last one) and "Calls as in training" is named."""
    path = tmp_path / "sigmoid.py"
    path.write_text(sigmoid(SAVES_OUTPUT, "while True:\n    pass\n"), encoding="utf-8")
    report = run_check(
        CATALOG.get("sigmoid"), path, service=service, second_process=True, timeout=2.5
    )
    failure = report.first_failure
    assert failure is not None and failure.id == "backward", report.stages
    assert "timed out" in failure.message


def test_a_second_process_ending_in_its_stage_skips_the_stages_after_it(service, tmp_path):
    """Backward, called by the checker (backward parity, in the second process), ends
    its process; the first process is alive, but as with one process every stage
    after the one it ended in is skipped. Drop ``ended_in`` in run_stages and the
    stages after it run, or fail with the process's end said again."""
    path = tmp_path / "sigmoid.py"
    source = sigmoid(
        SAVES_OUTPUT,
        """
        import os
        if torch._C._current_graph_task_id() == -1:
            os._exit(0)
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y)
        """,
    )
    path.write_text(source, encoding="utf-8")
    report = run_check(CATALOG.get("sigmoid"), path, service=service, second_process=True)
    verdicts = [(s.id, s.verdict) for s in report.stages]
    at = [s for s, _ in verdicts].index("backward")
    assert verdicts[at][1] is Verdict.FAIL
    assert all(v is Verdict.SKIP for _, v in verdicts[at + 1 :]), verdicts


class _SecondProcess:
    """What StagesAhead uses of a Sandbox, in process: a file that loads, a protection
    level, stages answered at once."""

    pid = 0
    alive = True
    ended = None
    optional_inputs = 0

    def __init__(self, protection: dict[str, object]) -> None:
        self.protection = protection
        self.patched: list[str] = []

    def load(self) -> object:
        return type("Loaded", (), {"problem": None})()

    def also_read(self, fd: int, read: object) -> None:
        return None

    def reset(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def hang_up(self) -> None:
        return None


def test_a_second_process_protected_less_than_the_first_has_its_stages_run_in_the_first():
    """The report names one protection level, the first process's: a stage whose
    process was protected otherwise runs again in the first. Accept the second
    process's outcome whatever its protection and its pass is reported."""
    from trainer.checking.trusted.ahead import StagesAhead
    from trainer.checking.trusted.stages import PASS, Checked, StageOutcome

    full = {"level": "full", "applied": {}, "missing": {}}
    partial = {"level": "partial", "applied": {}, "missing": {"files": "no Landlock"}}
    checked = Checked(
        function_class=object,  # type: ignore[arg-type]
        plan=SimpleNamespace(runs=()),  # type: ignore[arg-type]
        exercise=CATALOG.get("sigmoid"),
        path=Path("sigmoid.py"),
        sandbox=_SecondProcess(full),  # type: ignore[arg-type]
    )
    read, write = os.pipe()
    os.close(write)
    passes = {"contract": lambda _checked: StageOutcome(PASS, "ran in the second process")}
    for second, expected in ((full, "ran in the second process"), (partial, None)):
        ahead = StagesAhead(checked, _SecondProcess(second), os.dup(read), passes)  # type: ignore[arg-type]
        outcome = ahead.outcome("contract", checked.sandbox)
        assert (outcome.message if outcome else None) == expected
    os.close(read)
