"""The "derived by hand" stage: the learner derives the gradient, not torch.

A backward that re-runs the forward under ``torch.enable_grad`` and calls
``torch.autograd.grad``, or calls ``torch.func.vjp``, ``jacrev`` or one of
torch's own ``*_backward`` kernels, gets every value right without deriving
anything; so do finite differences, the complex step and sympy. The learner's
process watches its file from the first line of its import to the last call of
the check (:mod:`trainer.checking.learner.derivation`, where what counts is
listed): this stage runs last, asks for one more forward and backward through
the engine and one direct backward call, and reports everything the watch saw
in every stage before it.
"""

from __future__ import annotations

import torch

from trainer.checking import protocol
from trainer.checking.trusted.diagnosis import named
from trainer.checking.trusted.proxy import fault_of
from trainer.checking.trusted.stages import FAIL, PASS, Checked, StageOutcome, fault_diagnosis


def by_hand_stage(checked: Checked) -> StageOutcome:
    runs = [r for r in checked.plan.runs if r.dtype == torch.float64][:2] or list(
        checked.plan.runs[:1]
    )
    for run in runs:
        names = run.grad_names()
        reply = checked.sandbox.call(
            protocol.ByHand(
                args=list(run.args),
                requires_grad=[p.name in names for p in run.params],
                upstream=list(run.upstream),
            )
        )
        fault = fault_of(reply)
        if fault is not None:
            return StageOutcome(FAIL, fault.message, fault.details, fault_diagnosis(fault))
        if reply.findings:
            text = reply.message or "backward lets torch derive the gradient"
            return StageOutcome(FAIL, text, reply.details, named("derived_by_torch", text))
    if checked.also_watched is not None:  # the second process that ran a stage ahead
        seen = checked.also_watched()
        if seen is not None:
            return seen
    return StageOutcome(
        PASS,
        "from its import to the last call of the check, your file derives the gradient "
        "with ordinary tensor operations: no autograd, torch.func transform, torch "
        "backward kernel, graph tracer, finite differences or sympy works it out for you",
    )
