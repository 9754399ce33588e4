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

from trainer.checking import values
from trainer.checking.trusted.diagnosis import named
from trainer.checking.trusted.proxy import fault_of
from trainer.checking.trusted.stages import FAIL, PASS, Checked, StageOutcome, fault_diagnosis


def by_hand_stage(checked: Checked) -> StageOutcome:
    runs = [r for r in checked.plan.runs if r.dtype == torch.float64][:2] or list(
        checked.plan.runs[:1]
    )
    for run in runs:
        names = run.grad_names()
        blobs: list[bytes] = []
        request = {
            "op": "by_hand",
            "args": values.encode(list(run.args), blobs),
            "requires_grad": [p.name in names for p in run.params],
            "upstream": values.encode(list(run.upstream), blobs),
        }
        reply, _ = checked.sandbox.call(request, blobs)
        fault = fault_of(reply)
        if fault is not None:
            return StageOutcome(FAIL, fault.message, fault.details, fault_diagnosis(fault))
        findings = reply.get("findings")
        if isinstance(findings, list) and findings:
            text = str(reply.get("message", "backward lets torch derive the gradient"))
            details = reply.get("details", [])
            return StageOutcome(
                FAIL,
                text,
                [str(d) for d in details] if isinstance(details, list) else [],
                named("derived_by_torch", text),
            )
    return StageOutcome(
        PASS,
        "from its import to the last call of the check, your file derives the gradient "
        "with ordinary tensor operations: no autograd, torch.func transform, torch "
        "backward kernel, graph tracer, finite differences or sympy works it out for you",
    )
