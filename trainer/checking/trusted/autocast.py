"""The "under autocast" stage: a numerically sensitive op in a mixed-precision step.

Under ``torch.autocast`` torch runs some ops (matmul first of all) in a lower
precision. An op whose accuracy needs float32 says so with
``torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)`` on forward and
``torch.amp.custom_bwd`` on backward: forward then runs in float32 with autocast off,
and backward in the same state. This stage calls forward under CPU autocast with
bfloat16 on the float32 cases and runs backward through the engine: the outputs and
the gradients must be float32 and as close to the reference as float32 allows.
"""

from __future__ import annotations

import torch

from trainer.checking import protocol
from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.proxy import fault_of
from trainer.checking.trusted.stages import FAIL, PASS, Checked, StageOutcome, fault_diagnosis

_DECORATE = (
    'decorate forward with @torch.amp.custom_fwd(device_type="cpu", '
    'cast_inputs=torch.float32) and backward with @torch.amp.custom_bwd(device_type="cpu")'
)


def autocast_stage(checked: Checked) -> StageOutcome:
    runs = [r for r in checked.plan.runs if r.dtype == torch.float32]
    for run in runs:
        names = run.grad_names()
        reply = checked.sandbox.call(
            protocol.Autocast(
                args=run.fresh_args(),
                requires_grad=[p.name in names for p in run.params],
                upstream=list(run.upstream),
            )
        )
        outputs = reply.outputs if isinstance(reply.outputs, list) else []
        for index, (got, want) in enumerate(zip(outputs, run.expected_outputs, strict=False)):
            if isinstance(got, torch.Tensor) and got.dtype != want.dtype:
                text = (
                    f"under torch.autocast (bfloat16), forward's output {index} is {got.dtype}, "
                    f"not {want.dtype}: autocast ran its ops in low precision; {_DECORATE}"
                )
                return StageOutcome(FAIL, text, case=run.label)
        fault = fault_of(reply)
        if fault is not None:
            text = f"{fault.message} ({_DECORATE}?)"
            return StageOutcome(FAIL, text, fault.details, fault_diagnosis(fault), case=run.label)
        for index, (got, want) in enumerate(zip(outputs, run.expected_outputs, strict=False)):
            # The slack backward and forward parity give: twice torch's own float32 error
            # on this run (an answer truer than torch's float32 is no low precision).
            slack = run.outputs_slack[index] if run.outputs_slack else None
            mismatch = compare_tensor(f"output {index}", want, got, run.tolerance, slack)
            if mismatch:
                text = f"under torch.autocast (bfloat16), {mismatch.summary}; {_DECORATE}"
                return StageOutcome(FAIL, text, [mismatch.detail], case=run.label)
        grads = reply.grads if isinstance(reply.grads, list) else []
        for name, got in zip(names, grads, strict=False):
            want = run.expected_grads[name]
            if isinstance(got, torch.Tensor) and got.dtype != want.dtype:
                text = (
                    f"with backward called under torch.autocast, the gradient for `{name}` is "
                    f"{got.dtype}, not {want.dtype}: backward ran in low precision; {_DECORATE}"
                )
                return StageOutcome(FAIL, text, case=run.label)
            slack = run.grads_slack.get(name)
            mismatch = compare_tensor(f"grad for `{name}`", want, got, run.tolerance, slack)
            if mismatch:
                text = (
                    f"with backward called under torch.autocast (bfloat16), {mismatch.summary}: "
                    "its ops ran in low precision; decorate backward with "
                    '@torch.amp.custom_bwd(device_type="cpu"), which runs it as forward ran'
                )
                return StageOutcome(FAIL, text, [mismatch.detail], case=run.label)
    return StageOutcome(
        PASS,
        f"under torch.autocast (bfloat16) forward and backward stay in float32 and match the "
        f"reference on {len(runs)} float32 runs",
    )
