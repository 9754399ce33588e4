"""The stages of a check, run in the checking process on the learner's answers.

Each stage returns a :class:`StageOutcome`: a verdict and words for the
learner. The learner's code runs in the sandbox; here ``function_class`` is the
proxy whose forward and backward are the learner's, so torch's autograd and
``gradcheck`` below are the checker's own, untouched.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trainer.checking import transport
from trainer.checking.report import Verdict
from trainer.checking.trusted.compare import compare_tensor, shape_text
from trainer.checking.trusted.diagnosis import NamedMistake, diagnose, named, view_lines
from trainer.checking.trusted.plan import Plan, Run, differentiable
from trainer.checking.trusted.proxy import (
    LearnerFault,
    LearnerProcessEnded,
    Sandbox,
    forward_outputs,
)
from trainer.checking.vjp import vector_jacobian
from trainer.checking.wording import OUTPUT_MARK
from trainer.spec import Exercise
from trainer.vocabulary import Stage, selected, stages_for

if TYPE_CHECKING:
    from trainer.checking.trusted.ahead import StagesAhead

# One verdict type for the checker and the report.
PASS, FAIL, SKIP = Verdict.PASS, Verdict.FAIL, Verdict.SKIP


@dataclass
class StageOutcome:
    verdict: Verdict
    message: str
    details: list[str] = field(default_factory=list)
    diagnosis: NamedMistake | None = None
    notes: list[str] = field(default_factory=list)  # advice that does not fail the check
    pictures: list[dict[str, Any]] = field(default_factory=list)  # of a wrong gradient
    # The failure's words without the run they happened in: the same error in
    # another stage is recognised by it.
    error: str = ""
    case: str = ""  # the run the first failure happened in
    same_as: str = ""  # the stage (id) that gave this failure first: its words are not repeated
    # Where the first wrong gradient is, walking backward through the spec's chain: a
    # layer's name or an input's (backward parity, trusted.intermediates)
    first_wrong: str = ""
    # How long it ran, when it ran elsewhere or before its turn (see run_stages).
    seconds: float | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == PASS


@dataclass
class Checked:
    """What every stage works on."""

    function_class: type[torch.autograd.Function]  # the proxy: the learner's methods
    plan: Plan
    exercise: Exercise
    path: Path
    sandbox: Sandbox
    # Bytes the reference solution saves for backward, per run label (for advice).
    reference_saved: dict[str, int] = field(default_factory=dict)
    double_backward: bool = False
    # Validation only needs the first failure, its stage and its mistake: the stages
    # after it are skipped, and the backward and contract stages stop at their first
    # failing run (the runs after it would only be counted).
    stop_after_failure: bool = False
    # Only these stages run (and load); empty: every stage.
    only_stages: frozenset[str] = frozenset()
    # `trainer plot`: pictures of the gradient even when it is right.
    draw_always: bool = False
    # The verdicts of the stages run so far, by id (a later stage may read an earlier one's).
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    # What a second learner process's derivation watch saw, when one ran a stage ahead
    # (see :mod:`ahead`): a failure of "Derived by hand", or None.
    also_watched: Callable[[], StageOutcome | None] | None = None


@dataclass
class Failure:
    """One run that went wrong, with what to tell the learner."""

    run: Run | None
    message: str
    details: list[str] = field(default_factory=list)
    diagnosis: NamedMistake | None = None
    pictures: list[dict[str, Any]] = field(default_factory=list)
    severity: float = 0.0  # how wrong (compare.Mismatch.severity): the largest is shown first

    @property
    def same_for_every_run(self) -> bool:
        return self.diagnosis is not None and self.diagnosis.mistake == "not_written"


# The job's output mark and the stage running: what the learner's code prints
# after a mark belongs to that stage and run (see runner._Collected.add_output).
_OUTPUT: dict[str, str] = {"mark": "", "stage": ""}
# A thread that runs stages ahead (:mod:`ahead`) has an output of its own: its runs'
# marks go to its ``sink`` (the run's label), to be written with that output later.
ELSEWHERE = threading.local()


def output_mark(stage: str, label: str = "") -> bytes:
    """The line that marks what follows on the output as ``stage``'s (and a run's)."""
    return f"{OUTPUT_MARK}{_OUTPUT['mark']} {stage}{f'|{label}' if label else ''}\n".encode()


def mark_output(run: Run | None = None, stage: str | None = None) -> None:
    """Write the mark that attributes what follows on the output to a stage and a run.
    In a thread that runs stages ahead, a run's mark goes to that thread's sink."""
    if threading.current_thread() is not threading.main_thread():
        sink = getattr(ELSEWHERE, "sink", None)
        if sink is not None and run is not None:
            sink(run.label)
        return
    if stage is not None:
        _OUTPUT["stage"] = stage
    if not _OUTPUT["mark"]:
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        os.write(1, output_mark(_OUTPUT["stage"], run.label if run is not None else ""))


def summarise(failures: list[Failure], total: int, success: str) -> StageOutcome:
    """Pass with ``success``, or fail with the first failure and how many runs failed."""
    if not failures:
        return StageOutcome(PASS, success)
    first = failures[0]
    if first.same_for_every_run or first.run is None:
        return StageOutcome(
            FAIL,
            first.message,
            list(first.details),
            first.diagnosis,
            pictures=first.pictures,
            error=first.message,
        )
    message = f"{first.message} (for {first.run.label})"
    details = list(first.details)
    if len(failures) == total and total > 1:
        details.append(f"fails in all {total} runs")
    elif len(failures) > 1:
        others = "; ".join(f.run.label for f in failures[1:4] if f.run is not None)
        more = f" and {len(failures) - 4} more" if len(failures) > 4 else ""
        details.append(f"also fails for {others}{more} ({len(failures)} of {total} runs)")
    return StageOutcome(
        FAIL,
        message,
        details,
        first.diagnosis,
        pictures=first.pictures,
        error=first.message,
        case=first.run.label,
    )


def fault_diagnosis(fault: LearnerFault) -> NamedMistake | None:
    """The classic mistake a fault carries as its typed ``mistake``, as a diagnosis."""
    return named(fault.mistake, fault.message, fault.input) if fault.mistake else None


def apply(function_class: type[torch.autograd.Function], args: list[object]) -> object:
    call: Callable[..., object] = function_class.apply
    return call(*args)


def output_name(exercise: Exercise, index: int) -> str:
    """Outputs counted from 1, with the name the stubs give their upstream gradient."""
    if exercise.outputs == 1:
        return "the output"
    return f"output {index + 1} (the one grad_out{index + 1} belongs to)"


def learner_gradients(
    function_class: type[torch.autograd.Function],
    run: Run,
    exercise: Exercise,
    upstream: tuple[torch.Tensor, ...] | None = None,
    requires_grad: set[str] | None = None,
    args: list[object] | None = None,
) -> dict[str, torch.Tensor | None] | Failure:
    """The learner's gradients through autograd, as a training loop would get them."""
    names = (
        run.grad_names()
        if requires_grad is None
        else [n for n in run.grad_names() if n in requires_grad]
    )
    mark_output(run)
    if args is None:
        args = run.fresh_args()
    for param, value in zip(run.params, args, strict=True):
        if isinstance(value, torch.Tensor) and value.is_leaf:
            value.requires_grad_(param.name in names)
    try:
        outputs = forward_outputs(apply(function_class, args), exercise)
    except LearnerFault as fault:  # the proxy's forward refuses what torch would
        return Failure(run, fault.message, fault.details, fault_diagnosis(fault))
    for index, (expected, got) in enumerate(zip(run.expected_outputs, outputs, strict=True)):
        if got.shape != expected.shape:
            return Failure(
                run,
                f"cannot compare gradients: {output_name(exercise, index)} of forward has shape "
                f"{shape_text(got.shape)}, expected {shape_text(expected.shape)} (see Forward parity)",
            )
    wanting = [a for a, p in zip(args, run.params, strict=True) if p.name in names]
    floats, weights = differentiable(outputs, upstream if upstream is not None else run.upstream)
    try:
        grads = vector_jacobian(
            floats, [w for w in wanting if isinstance(w, torch.Tensor)], weights, allow_unused=True
        )
    except LearnerFault as fault:  # the proxy's backward refuses what autograd would
        return Failure(run, fault.message, fault.details, fault_diagnosis(fault))
    return dict(zip(names, grads, strict=True))


def compare_gradients(
    function_class: type[torch.autograd.Function],
    run: Run,
    exercise: Exercise,
    grads: dict[str, torch.Tensor | None],
    expected: dict[str, torch.Tensor],
    diagnose_mistake: bool = True,
) -> Failure | None:
    """The first input whose gradient is wrong, with the classic mistake it looks like."""
    for name, got in grads.items():
        if got is None:
            text = f"backward returned None for `{name}`, which requires grad"
            return Failure(
                run,
                text,
                diagnosis=named("none_for_required", text, name),
            )
        slack = run.grads_slack.get(name) if expected is run.expected_grads else None
        mismatch = compare_tensor(f"grad for `{name}`", expected[name], got, run.tolerance, slack)
        if not mismatch:
            continue
        details = _lines(mismatch.detail)
        if not diagnose_mistake or got.shape != expected[name].shape:
            return Failure(run, mismatch.summary, details)
        # Ask again with another upstream gradient: a backward that ignores
        # grad_output gives the same answer twice.
        other = learner_gradients(function_class, run, exercise, upstream=run.upstream_other)
        got_other = other.get(name) if isinstance(other, dict) else None
        found = diagnose(
            name,
            expected[name],
            got,
            expected_other=run.expected_grads_other[name],
            got_other=got_other,
            upstream=run.upstream[0] if len(run.upstream) == 1 else None,
            known=run.known_wrong.get(name),
            rtol=max(run.tolerance.rtol * 100, 1e-4),
            atol=max(run.tolerance.atol * 100, 1e-6),
        )
        summary = mismatch.summary
        value = dict(zip((p.name for p in run.params), run.args, strict=True)).get(name)
        same_shape = isinstance(value, torch.Tensor) and value.shape == got.shape
        details = [
            f"largest errors ({mismatch.allowed}):",
            *view_lines(found, value if same_shape else None),  # type: ignore[arg-type]
        ]
        if found.mistake == "unknown":
            details.insert(0, found.text[0].upper() + found.text[1:] + ".")
        else:
            summary += f": {found.text}"
        return Failure(run, summary, details, found)
    return None


def draw(
    checked: Checked,
    run: Run,
    grads: dict[str, torch.Tensor | None],
    diagnosis: NamedMistake | None,
    only_wrong: bool = True,
) -> list[dict[str, Any]]:
    """Pictures of the learner's gradients against the right ones (plain data, a few kB)."""
    from trainer.checking.trusted.pictures import gradient_pictures
    from trainer.checking.trusted.plan import kink_values

    mistakes = {diagnosis.input: diagnosis.mistake} if diagnosis else {}
    dense = checked.plan.picture_run
    if dense is not None:  # a curve over evenly spaced inputs reads better than random points
        dense_grads = learner_gradients(checked.function_class, dense, checked.exercise)
        if isinstance(dense_grads, dict):
            run, grads = dense, dense_grads
    try:
        pictures = gradient_pictures(
            {p.name: a for p, a in zip(run.params, run.args, strict=True)},
            run.expected_grads,
            grads,
            run.upstream[0] if len(run.upstream) == 1 else None,
            elementwise=checked.plan.elementwise,
            rtol=run.tolerance.rtol,
            atol=run.tolerance.atol,
            kinks=kink_values(checked.exercise, run),
            mistakes=mistakes,
            only_wrong=only_wrong,
        )
    except Exception:  # a picture is optional; the verdict stands without it
        return []
    return [dict(p) for p in pictures]


def _lines(*lines: str) -> list[str]:
    return [line for line in lines if line]


# -- running the stages ---------------------------------------------------------------------

StageBody = Callable[[Checked], StageOutcome]
Reporter = Callable[[str, Callable[[], StageOutcome]], StageOutcome]


def stage_body(stage: Stage) -> StageBody:
    module, function = stage.runs.split(":")
    body: StageBody = getattr(importlib.import_module(module), function)
    return body


def run_stages(
    checked: Checked,
    report: Reporter,
    ahead: StagesAhead | None = None,
    announce: Callable[[str], None] = lambda stage: None,
) -> None:
    """Run every stage in order, reporting each; later stages are skipped when they cannot run.

    A failure whose words an earlier stage already gave is reported as "same
    error as <stage> above", so one problem is read once. The stages ``ahead`` runs
    in a second process (:mod:`ahead`) are reported in their turn, from there; while
    this process would wait for one, it runs its own next stages early (``announce``
    says which starts), and reports them in their turn too.
    """
    sandbox = checked.sandbox
    blocked: str | None = None
    said: dict[str, Stage] = {}  # failure message -> the stage that gave it first
    stages = selected(stages_for(checked.exercise, checked.double_backward), checked.only_stages)
    early: dict[str, Callable[[], StageOutcome]] = {}  # run before their turn: their outcome
    for index, stage in enumerate(stages):
        # A process that ended during a stage run early still has the stages up to it said.
        if blocked is None and not sandbox.alive and not early:
            blocked = f"the process running your code {sandbox.ended}"
        if blocked is not None:
            if ahead is not None:
                ahead.abandon()
                ahead = None
            report(stage.id, functools.partial(StageOutcome, SKIP, f"skipped: {blocked}"))
            continue
        ran_early = early.pop(stage.id, None)
        run = ran_early or functools.partial(stage_body(stage), checked)
        elsewhere = ahead is not None and stage.id in ahead.stages
        if ahead is not None and elsewhere:
            for later in stages[index + 1 :]:
                if ahead.ready(stage.id) or not sandbox.alive:
                    break
                if ahead.may_run_early(later.id) and later.id not in early:
                    announce(later.id)
                    early[later.id] = _run_early(checked, later)
            run = functools.partial(_from_ahead, ahead, stage.id, sandbox, run)
        outcome = report(stage.id, functools.partial(_once, said, stage, sandbox, run))
        checked.verdicts[stage.id] = outcome.verdict
        ended = ahead.ended_in(stage.id) if ahead is not None else None
        if ended is not None:  # the second process ended in it: as one process would
            blocked = f"the process running your code {ended}"
        elif stage.id == "load" and not outcome.passed:
            blocked = "the file did not load"
        elif checked.stop_after_failure and outcome.verdict == FAIL:
            blocked = "an earlier stage failed (this run stops at the first failure)"
        if sandbox.alive and ran_early is None and not elsewhere:
            sandbox.reset()  # a stage run early was reset after, there


def _run_early(checked: Checked, stage: Stage) -> Callable[[], StageOutcome]:
    """Run ``stage`` now, before its turn; what its turn reports (its outcome, or the
    bug of ours it hit, raised there)."""
    sandbox = checked.sandbox
    started = time.monotonic()
    try:
        outcome = guarded(sandbox, functools.partial(stage_body(stage), checked))
        outcome.seconds = time.monotonic() - started
    except Exception as error:  # a bug of ours: raised again in the stage's turn
        failure = error

        def again() -> StageOutcome:
            raise failure

        return again
    finally:
        if sandbox.alive:
            sandbox.reset()
    return lambda: outcome


def _from_ahead(
    ahead: StagesAhead, stage: str, sandbox: Sandbox, here: Callable[[], StageOutcome]
) -> StageOutcome:
    outcome = ahead.outcome(stage, sandbox)
    return outcome if outcome is not None else here()


def _once(
    said: dict[str, Stage], stage: Stage, sandbox: Sandbox, body: Callable[[], StageOutcome]
) -> StageOutcome:
    outcome = guarded(sandbox, body)
    if outcome.verdict != FAIL:
        return outcome
    key = outcome.error or outcome.message
    if key in said:
        return StageOutcome(
            FAIL,
            f"same error as {said[key].title} above",
            diagnosis=outcome.diagnosis,
            notes=outcome.notes,
            same_as=said[key].id,
        )
    said[key] = stage
    return outcome


def guarded(sandbox: Sandbox, body: Callable[[], StageOutcome]) -> StageOutcome:
    """Run a stage; a dead learner process, a reply whose values cannot be read (the
    stages decode what the learner's process sent) or a patch of torch turns it into
    a failure."""
    already = len(sandbox.patched)
    try:
        outcome = body()
    except LearnerProcessEnded as ended:
        outcome = StageOutcome(FAIL, ended.message)
    except transport.WireError as error:
        outcome = StageOutcome(FAIL, sandbox.unreadable(error).message)
    patched = sandbox.patched[already:]
    if patched:
        shown = ", ".join(f"`{name}`" for name in patched[:5])
        return StageOutcome(
            FAIL,
            f"your code replaced {shown}. A solution must not patch torch or the checker; "
            "the checker's own results are computed in another process anyway.",
        )
    return outcome
