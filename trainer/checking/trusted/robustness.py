"""Stages beyond parity: kink points, numerical stability, double backward and CUDA."""

from __future__ import annotations

import torch

from trainer.checking import values
from trainer.checking.trusted.compare import Mismatch, compare_tensor
from trainer.checking.trusted.numeric import central_differences
from trainer.checking.trusted.plan import DTYPE_NAMES, KinkRun, Run
from trainer.checking.trusted.proxy import LearnerFault, forward_outputs
from trainer.checking.trusted.stages import (
    SKIP,
    Checked,
    Failure,
    StageOutcome,
    apply,
    explain,
    learner_gradients,
    output_name,
    summarise,
)


def _kink_failure(checked: Checked, kink_run: KinkRun) -> Failure | None:
    run = kink_run.run
    grads = learner_gradients(checked.function_class, run, checked.exercise)
    if isinstance(grads, Failure):
        return grads
    upstream = run.upstream[0].reshape(-1)
    for point in kink_run.points:
        got = grads.get(point.param)
        if got is None:
            return Failure(run, f"backward returned None for `{point.param}`, which requires grad")
        g = float(upstream[point.flat_index])
        value = float(got.reshape(-1)[point.flat_index])
        slope = value / g if abs(g) > 1e-12 else 0.0
        slack = 1e-4 + run.tolerance.rtol * 10
        if not point.low - slack <= slope <= point.high + slack:
            where = (
                point.expression if point.expression != f"{point.value:g}" else f"{point.value:g}"
            )
            text = (
                f"at the kink `{point.param}` = {point.value:g} ({where}), your gradient is "
                f"{slope:.4g} × grad_output; any value from {point.low:g} to {point.high:g} "
                "times grad_output is a valid subgradient"
            )
            return Failure(
                run,
                text,
                diagnosis={"mistake": "kink_value", "input": point.param, "text": text, "view": []},
            )
    # Away from the kinks, the usual comparison (kink elements masked out).
    for name, expected in run.expected_grads.items():
        got = grads.get(name)
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            continue
        masked_expected = expected.clone().reshape(-1)
        masked_got = got.detach().clone().reshape(-1)
        for point in kink_run.points:
            if point.param == name:
                masked_expected[point.flat_index] = 0.0
                masked_got[point.flat_index] = 0.0
        mismatch = compare_tensor(f"grad for `{name}`", masked_expected, masked_got, run.tolerance)
        if mismatch:
            text = f"next to the kinks, {mismatch.summary}"
            tensor = dict(zip((p.name for p in run.params), run.args, strict=True)).get(name)
            if mismatch.index is not None and isinstance(tensor, torch.Tensor):
                (flat,) = mismatch.index
                value = float(tensor.reshape(-1)[flat])
                kink = min(kink_run.points, key=lambda p: abs(p.value - value))
                side = "above" if value > kink.value else "below"
                text = (
                    f"close to the kink `{name}` = {kink.value:g} ({kink.expression}), at "
                    f"{name}[{_unflat(flat, tensor.shape)}] = {value:.8g} "
                    f"({abs(value - kink.value):.1g} {side}), {mismatch.summary}: the gradient "
                    "must switch exactly at the kink, not before or after it"
                )
            diagnosis = {"mistake": "near_kink", "input": name, "text": text, "view": []}
            return Failure(run, text, [mismatch.detail], diagnosis)
    return None


def _unflat(flat: int, shape: torch.Size) -> str:
    return ", ".join(str(int(i)) for i in torch.unravel_index(torch.tensor(flat), shape))


def kinks_stage(checked: Checked) -> StageOutcome:
    failures = []
    for kink_run in checked.plan.kink_runs:
        failure = _kink_failure(checked, kink_run)
        if failure is not None:
            failures.append(failure)
    points = sorted({p.expression for k in checked.plan.kink_runs for p in k.points})
    return summarise(
        failures,
        len(checked.plan.kink_runs),
        f"at the kinks ({', '.join(points)}) your gradient is a valid subgradient "
        f"on {len(checked.plan.kink_runs)} runs",
    )


def stability_stage(checked: Checked) -> StageOutcome:
    """The spec's extreme probes, then every case across the domain (log-scale inputs,
    upstream gradients from 1e-3 to 1e3): finite where the reference is, and equal to it."""
    failures: list[Failure] = []
    runs = (*checked.plan.stability_runs, *checked.plan.domain_runs)
    for run in runs:
        failure = _domain_failure(checked, run)
        if failure is not None:
            failures.append(failure)
            break  # one clear failure: the rest of the domain says the same
    elements = sum(r.numel for r in runs)
    return summarise(
        failures,
        len(runs),
        f"forward and backward match the reference on {len(runs)} runs across the domain "
        f"({elements} values up to the largest magnitudes, upstream gradients from 1e-3 "
        "to 1e3), in float32 and float64",
    )


def _input_at(run: Run, index: tuple[int, ...] | None, shape: torch.Size) -> str:
    """The inputs at ``index`` when an input has the output's shape (element-wise ops)."""
    if index is None:
        return ""
    parts = []
    for param, value in zip(run.params, run.args, strict=True):
        if isinstance(value, torch.Tensor) and value.shape == shape and value.is_floating_point():
            where = "[" + ", ".join(map(str, index)) + "]"
            parts.append(f"{param.name}{where} = {float(value[index]):.6g}")
        elif not isinstance(value, torch.Tensor):
            parts.append(f"{param.name} = {value}")
    return ", ".join(parts)


def _domain_failure(checked: Checked, run: Run) -> Failure | None:
    exercise = checked.exercise
    try:
        outputs = forward_outputs(apply(checked.function_class, run.fresh_args()), exercise)
    except Exception as error:  # a learner's fault, or torch rejecting its result
        message, details = explain(error, "forward")
        return Failure(run, message, details)
    for index, (expected, got) in enumerate(zip(run.expected_outputs, outputs, strict=True)):
        if not bool(torch.isfinite(got).all()):
            return _not_finite(run, "forward gives", got)
        slack = run.outputs_slack[index] if run.outputs_slack else None
        mismatch = compare_tensor(output_name(exercise, index), expected, got, run.tolerance, slack)
        if mismatch:
            return _off_domain(run, mismatch, expected.shape, "forward")
    grads = learner_gradients(checked.function_class, run, exercise)
    if isinstance(grads, Failure):
        return grads
    for name, got_grad in grads.items():
        if got_grad is None:
            continue
        if not bool(torch.isfinite(got_grad).all()):
            return _not_finite(run, f"the gradient for `{name}` has", got_grad)
        expected_grad = run.expected_grads[name]
        mismatch = compare_tensor(
            f"grad for `{name}`", expected_grad, got_grad, run.tolerance, run.grads_slack.get(name)
        )
        if mismatch:
            return _off_domain(run, mismatch, expected_grad.shape, "backward", run.upstream)
    return None


def _off_domain(
    run: Run,
    mismatch: Mismatch,
    shape: torch.Size,
    during: str,
    upstream: tuple[torch.Tensor, ...] = (),
) -> Failure:
    """Words for a value that is wrong somewhere across the domain: where, and a guess why."""
    where = _input_at(run, mismatch.index, shape)
    text = f"{mismatch.summary} ({DTYPE_NAMES[run.dtype]}{', at ' + where if where else ''})"
    mistake = "wrong_on_domain"
    if during == "backward" and len(upstream) == 1 and mismatch.wrong is not None:
        scale = upstream[0].detach().abs().to(torch.float64)
        if scale.shape == mismatch.wrong.shape and bool(mismatch.wrong.any()):
            wrong_scale = float(scale[mismatch.wrong].min())
            right = ~mismatch.wrong
            if (
                bool(right.any())
                and wrong_scale > float(scale[right].max()) * 0.999
                and wrong_scale > 1
            ):
                mistake = "scales_grad_output"
                text += (
                    f": wrong only where |grad_output| > {wrong_scale:.3g}. Does backward clip "
                    "or rescale grad_output? It must multiply by it, whatever its size"
                )
    if mistake == "wrong_on_domain":
        text += (
            ": the formula must hold over the whole domain, large magnitudes included "
            "(a clamp, a threshold or a shortcut that is only right near 0?)"
        )
    details = [mismatch.detail] if mismatch.detail else []
    return Failure(None, text, details, {"mistake": mistake, "input": "", "text": text, "view": []})


def _not_finite(run: Run, what: str, tensor: torch.Tensor) -> Failure:
    flat = tensor.detach().reshape(-1)
    first = int((~torch.isfinite(flat)).nonzero()[0, 0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), tensor.shape))
    value = float(flat[first])
    where = _input_at(run, index, tensor.shape) or run.case.describe()
    shown = "[" + ", ".join(map(str, index)) + "]"
    text = (
        f"{what} {value} at {shown} for {where} ({DTYPE_NAMES[run.dtype]}), where the "
        "reference is finite: rewrite it in a numerically stable form"
    )
    return Failure(
        None, text, diagnosis={"mistake": "non_finite", "input": "", "text": text, "view": []}
    )


def double_backward_stage(checked: Checked) -> StageOutcome:
    """Second derivatives: finite differences of the learner's own first-order backward."""
    failures: list[Failure] = []
    runs = checked.plan.gradcheck_runs[:2]
    for run in runs:
        try:
            failure = _double_backward_failure(checked, run)
        except LearnerFault as fault:
            failure = Failure(run, fault.message, fault.details)
        if failure is not None:
            failures.append(failure)
    return summarise(
        failures,
        len(runs),
        f"second derivatives through your backward agree with finite differences on {len(runs)} runs",
    )


def _double_backward_failure(checked: Checked, run: Run) -> Failure | None:
    sandbox, exercise = checked.sandbox, checked.exercise
    names = run.grad_names()
    flags = [p.name in names for p in run.params]
    args = run.fresh_args()
    vector = tuple(torch.randn_like(run.expected_grads[n]) for n in names)
    blobs: list[bytes] = []
    request = {
        "op": "double",
        "args": values.encode(list(args), blobs),
        "requires_grad": flags,
        "upstream": values.encode(list(run.upstream), blobs),
        "vector": values.encode(list(vector), blobs),
    }
    reply, reply_blobs = sandbox.call(request, blobs)
    error = reply.get("error")
    if isinstance(error, dict):
        raise LearnerFault(str(error.get("message")), [str(d) for d in error.get("details", [])])
    analytical = values.decode(reply.get("second"), reply_blobs)
    if not isinstance(analytical, list | tuple):
        return Failure(run, "the second-order gradients could not be read")
    eps = checked.exercise.tolerances.gradcheck_eps
    positions = [i for i, p in enumerate(run.params) if p.name in names]

    def first_order_dot(shifted: list[object]) -> float:
        grads = learner_gradients(checked.function_class, run, exercise, args=shifted)
        if isinstance(grads, Failure):
            raise LearnerFault(grads.message, grads.details)
        return float(
            sum((g * v).sum() for g, v in zip(grads.values(), vector, strict=True) if g is not None)
        )

    for slot, position in enumerate(positions):
        base = args[position]
        assert isinstance(base, torch.Tensor)

        def dot_at(moved: torch.Tensor, position: int = position) -> torch.Tensor:
            shifted = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
            shifted[position] = moved
            return torch.tensor(first_order_dot(shifted), dtype=torch.float64)

        numerical = central_differences(dot_at, base, eps).reshape(-1)
        got = analytical[slot] if slot < len(analytical) else None
        if not isinstance(got, torch.Tensor):
            got = torch.zeros_like(base)
        mismatch = compare_tensor(
            f"second derivative for `{run.params[position].name}`",
            numerical.reshape(base.shape),
            got.to(base.dtype),
            type(run.tolerance)(rtol=1e-3, atol=1e-5),
        )
        if mismatch:
            return Failure(
                run,
                f"{mismatch.summary}: is your backward built from differentiable torch ops?",
                [mismatch.detail],
            )
    return None


def cuda_stage(checked: Checked) -> StageOutcome:
    if not torch.cuda.is_available():
        return StageOutcome(SKIP, "skipped: no GPU (torch.cuda.is_available() is False)")
    sandbox = checked.sandbox
    sandbox.device = "cuda"
    try:
        failures: list[Failure] = []
        for run in checked.plan.runs:
            grads = learner_gradients(checked.function_class, run, checked.exercise)
            if isinstance(grads, Failure):
                failures.append(grads)
                continue
            for name, got in grads.items():
                if got is None:
                    continue
                mismatch = compare_tensor(
                    f"grad for `{name}` on the GPU", run.expected_grads[name], got, run.tolerance
                )
                if mismatch:
                    failures.append(Failure(run, mismatch.summary, [mismatch.detail]))
                    break
    finally:
        sandbox.device = "cpu"
    return summarise(
        failures, len(checked.plan.runs), "forward and backward on the GPU match the CPU reference"
    )
