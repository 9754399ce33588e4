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

import torch

from trainer.checking import protocol
from trainer.checking.trusted.plan import _case_numel, _case_values, _cast, evaluate_reference
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import FAIL, PASS, Checked, StageOutcome, explain
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

    def elements_of(self, what: str) -> tuple[int, str]:
        """The elements a budget is relative to, and their name in words."""
        inputs = {
            p.name: a
            for p, a in zip(self.params, self.args, strict=True)
            if isinstance(a, torch.Tensor)
        }
        if what == "output":
            return sum(o.numel() for o in self.outputs), "the output"
        if what in inputs:
            return inputs[what].numel(), f"`{what}`"
        sizes = {f"`{n}`": t.numel() for n, t in inputs.items()}
        sizes["the output"] = max(o.numel() for o in self.outputs)
        name = max(sizes, key=lambda n: sizes[n])
        return sizes[name], f"the largest input or output ({name})"


def _learner_failed(error: protocol.LearnerError, during: str, label: str) -> StageOutcome:
    message, details = explain(LearnerFault(error.message, error.details), during)
    return StageOutcome(FAIL, message, details, case=label)


def _times(factor: float) -> str:
    return f"{factor:g} ×"


def saved_stage(checked: Checked) -> StageOutcome:
    """What forward keeps for backward, against the follow-up's budget in elements."""
    follow_up = checked.exercise.follow_up
    assert follow_up is not None
    call = _Call(checked, follow_up)
    reply = checked.sandbox.call(protocol.Saved(args=call.args, requires_grad=call.requires_grad))
    if reply.error is not None:
        return _learner_failed(reply.error, "forward", call.label)
    base, named = call.elements_of(follow_up.of)
    budget = follow_up.at_most * base
    count = len(reply.kept)
    figures = (
        f"saved {count} tensor{'s' * (count != 1)} of {reply.elements:,} element"
        f"{'s' * (reply.elements != 1)} ({reply.bytes:,} bytes); budget {_times(follow_up.at_most)} "
        f"{named} = {int(budget):,} elements"
    )
    details = [f"measured on {call.label}: " + (", ".join(reply.kept) or "nothing saved")]
    if reply.elements > budget:
        return StageOutcome(
            FAIL,
            f"backward keeps more than it needs: {figures}",
            details,
            case=call.label,
        )
    return StageOutcome(PASS, f"backward keeps little: {figures}", details)
