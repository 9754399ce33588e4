"""The interviewer's follow-ups: after a right backward, how much does it keep, how much
does it allocate while it runs, how long does it take?

Each stage runs only when the exercise's active follow-up is of its kind (see
``Exercise.with_follow_up``) and judges one measured call, made in the learner's
process (:mod:`trainer.checking.protocol`): the follow-up's ``case`` (by default the
exercise's largest case) in float32, with fresh values. What is measured is the
learner's own forward and backward; budgets are relative to the call's inputs and
outputs, so that the figures read the same at any size.
"""

from __future__ import annotations

import statistics
import time

import torch

from trainer.checking import protocol
from trainer.checking.trusted.plan import _case_numel, _case_values, _cast, evaluate_reference
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import FAIL, PASS, Checked, StageOutcome, fault_diagnosis
from trainer.spec import FollowUp, TensorParam

SEED = 31


class _Call:
    """The measured call: its arguments (float32), which require grad, its outputs."""

    def __init__(self, checked: Checked, follow_up: FollowUp) -> None:
        exercise = checked.exercise
        case = follow_up.case or max(exercise.cases, key=_case_numel)
        generator = torch.Generator().manual_seed(SEED)
        self.args = list(_cast(_case_values(exercise, case, generator), torch.float32))
        self.params = exercise.parameters
        self.requires_grad = [
            isinstance(p, TensorParam) and p.requires_grad for p in exercise.parameters
        ]
        with torch.no_grad():
            self.outputs = evaluate_reference(exercise, self.args)
        self.label = case.describe()

    def size_of(self, what: str, unit: str = "elements") -> tuple[int, str]:
        """The count a budget is relative to, in ``unit`` (elements or bytes), and what
        it is in words."""

        def size(tensor: torch.Tensor) -> int:
            return tensor.numel() * (tensor.element_size() if unit == "bytes" else 1)

        inputs = {
            p.name: a
            for p, a in zip(self.params, self.args, strict=True)
            if isinstance(a, torch.Tensor)
        }
        if what == "output":
            return sum(size(o) for o in self.outputs), "the output"
        if what in inputs:
            return size(inputs[what]), f"`{what}`"
        sizes = {f"`{n}`": size(t) for n, t in inputs.items()}
        sizes["the output"] = max(size(o) for o in self.outputs)
        name = max(sizes, key=lambda n: sizes[n])
        return sizes[name], f"the largest input or output ({name})"


def _learner_failed(error: protocol.LearnerError, during: str, label: str) -> StageOutcome:
    """The learner's code failed ``during`` a measured call: its words, and the mistake's
    id when the failure names one."""
    fault = LearnerFault(error.message, error.details, mistake=error.mistake)
    return StageOutcome(FAIL, fault.message, fault.details, fault_diagnosis(fault), case=label)


def _times(factor: float) -> str:
    return f"{factor:g} ×"


def saved_stage(checked: Checked) -> StageOutcome:
    """What forward keeps for backward, against the follow-up's budget in elements or
    bytes."""
    follow_up = checked.exercise.follow_up
    assert follow_up is not None
    call = _Call(checked, follow_up)
    reply = checked.sandbox.call(protocol.Saved(args=call.args, requires_grad=call.requires_grad))
    if reply.error is not None:
        return _learner_failed(reply.error, "forward", call.label)
    base, named = call.size_of(follow_up.of, follow_up.unit)
    budget = follow_up.at_most * base
    kept = reply.bytes if follow_up.unit == "bytes" else reply.elements
    count = len(reply.kept)
    figures = (
        f"saved {count} tensor{'s' * (count != 1)} of {reply.elements:,} element"
        f"{'s' * (reply.elements != 1)} ({reply.bytes:,} bytes); budget {_times(follow_up.at_most)} "
        f"{named} = {int(budget):,} {follow_up.unit}"
    )
    details = [f"measured on {call.label}: " + (", ".join(reply.kept) or "nothing saved")]
    if kept > budget:
        return StageOutcome(
            FAIL,
            f"backward keeps more than it needs: {figures}",
            details,
            case=call.label,
        )
    return StageOutcome(PASS, f"backward keeps little: {figures}", details)


def _upstream(call: _Call) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(SEED + 1)
    return [
        torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.dtype)
        for o in call.outputs
        if o.is_floating_point()
    ]


def _size(count: float) -> str:
    """Bytes in words: 4.2 MB, 16 kB, 812 bytes."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{int(count)} bytes"


def working_memory_stage(checked: Checked) -> StageOutcome:
    """The peak of what backward allocates, against a multiple of the largest input or
    output: a backward that builds the Jacobian (n × n per row) is far above it."""
    follow_up = checked.exercise.follow_up
    assert follow_up is not None
    call = _Call(checked, follow_up)
    reply = checked.sandbox.call(
        protocol.WorkingMemory(
            args=call.args, requires_grad=call.requires_grad, upstream=_upstream(call)
        )
    )
    if reply.error is not None:
        return _learner_failed(reply.error, "backward", call.label)
    tensors = [a for a in call.args if isinstance(a, torch.Tensor)] + list(call.outputs)
    largest = max(t.numel() * t.element_size() for t in tensors)
    ratio = reply.peak_bytes / largest
    figures = (
        f"backward allocates up to {_size(reply.peak_bytes)} at once, {ratio:.3g} × the "
        f"largest input or output ({_size(largest)}); budget {_times(follow_up.at_most)}"
    )
    details = [f"measured on {call.label} (float32), every tensor backward's ops create"]
    if ratio > follow_up.at_most:
        return StageOutcome(
            FAIL,
            f"backward's working memory is too large: {figures}",
            details,
            case=call.label,
        )
    return StageOutcome(PASS, f"backward's working memory is small: {figures}", details)


SPEED_RUNS = 7


def _reference_seconds(checked: Checked, call: _Call, upstream: list[torch.Tensor]) -> float:
    """The median time of autograd's backward of the reference, warm, on one thread."""
    leaves = [
        a.detach().clone().requires_grad_(wanted) if isinstance(a, torch.Tensor) else a
        for a, wanted in zip(call.args, call.requires_grad, strict=True)
    ]
    outputs = [o for o in evaluate_reference(checked.exercise, leaves) if o.is_floating_point()]
    inputs = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the learner's process, which shares one CPU
    try:
        seconds = []
        for attempt in range(2 + SPEED_RUNS):
            started = time.perf_counter()
            torch.autograd.grad(outputs, inputs, upstream, retain_graph=True, allow_unused=True)
            if attempt >= 2:
                seconds.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(seconds)


def speed_stage(checked: Checked) -> StageOutcome:
    """backward's time against the reference's, both warm medians: a teaching signal (a
    Python loop over rows, a Jacobian), with a margin wide enough for a busy machine."""
    follow_up = checked.exercise.follow_up
    assert follow_up is not None
    call = _Call(checked, follow_up)
    upstream = _upstream(call)
    reply = checked.sandbox.call(
        protocol.BackwardTime(
            args=call.args, requires_grad=call.requires_grad, upstream=upstream, repeats=SPEED_RUNS
        )
    )
    if reply.error is not None:
        return _learner_failed(reply.error, "backward", call.label)
    if not reply.seconds:
        return StageOutcome(FAIL, "backward was not timed", case=call.label)
    mine = statistics.median(reply.seconds)
    reference = max(_reference_seconds(checked, call, upstream), 1e-6)
    ratio = mine / reference
    figures = (
        f"backward takes {mine * 1e3:.3g} ms, {ratio:.3g} × the reference's "
        f"{reference * 1e3:.3g} ms; budget {_times(follow_up.at_most)}"
    )
    details = [f"measured on {call.label} (float32), median of {len(reply.seconds)} warm runs"]
    if ratio > follow_up.at_most:
        return StageOutcome(FAIL, f"backward is slow: {figures}", details, case=call.label)
    return StageOutcome(PASS, f"backward is fast enough: {figures}", details)
