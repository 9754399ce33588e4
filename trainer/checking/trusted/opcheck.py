"""The "torch.library.opcheck" stage, for an answer written as a custom op.

A custom op is what ``torch.compile`` sees through: it traces the op's fake (meta)
implementation for shapes and calls the gradient ``register_autograd`` gave it. A
gradient right in eager mode can still break there: a schema that hides a mutation,
an autograd registration torch does not find, no fake implementation. torch's own
``opcheck`` tests each, in the learner's process, on the check's float64 cases.
"""

from __future__ import annotations

import torch

from trainer.checking import protocol
from trainer.checking.trusted.proxy import fault_of
from trainer.checking.trusted.stages import FAIL, PASS, Checked, StageOutcome, fault_diagnosis

# opcheck's tests, with what failing one means to the learner.
TESTS = {
    "test_schema": "the op's schema does not describe what it does: an input it writes to "
    "must be listed in mutates_args, and an output may not alias an input",
    "test_autograd_registration": "the gradient is not registered where torch looks for it: "
    "give it with op.register_autograd(backward, setup_context=setup_context)",
    "test_faketensor": "the op has no fake implementation, or one that gives other shapes or "
    "dtypes than the op: register it with @op.register_fake, so torch.compile can trace it",
}


def opcheck_stage(checked: Checked) -> StageOutcome:
    runs = [r for r in checked.plan.runs if r.dtype == torch.float64][:2] or list(
        checked.plan.runs[:1]
    )
    for run in runs:
        names = run.grad_names()
        reply = checked.sandbox.call(
            protocol.OpCheck(
                args=run.fresh_args(),
                requires_grad=[p.name in names for p in run.params],
                tests=list(TESTS),
            )
        )
        fault = fault_of(reply)
        if fault is not None:
            return StageOutcome(
                FAIL, fault.message, fault.details, fault_diagnosis(fault), case=run.label
            )
        for test, why in reply.failed.items():
            words = TESTS.get(test, f"opcheck's {test} fails")
            return StageOutcome(
                FAIL, words, [f"{test}: {why.splitlines()[0][:300]}"], case=run.label
            )
    return StageOutcome(
        PASS,
        "torch.library.opcheck passes: the schema, the autograd registration and the fake "
        "implementation are what torch.compile needs",
    )
