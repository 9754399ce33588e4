"""Domain and stability: every case across the domain on a log scale, with wide upstream gradients, and the spec's probes."""

from __future__ import annotations

import torch

from trainer.checking.trusted.compare import Mismatch, compare_tensor
from trainer.checking.trusted.diagnosis import named
from trainer.checking.trusted.plan import DTYPE_NAMES, Run
from trainer.checking.trusted.proxy import forward_outputs
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    apply,
    explain,
    learner_gradients,
    output_name,
    summarise,
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
            return _off_domain(
                run,
                mismatch,
                expected_grad.shape,
                "backward",
                run.upstream,
                (expected_grad, got_grad),
            )
    return None


def _off_domain(
    run: Run,
    mismatch: Mismatch,
    shape: torch.Size,
    during: str,
    upstream: tuple[torch.Tensor, ...] = (),
    gradients: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Failure:
    """Words for a value that is wrong somewhere across the domain: where, and a guess why."""
    where = _input_at(run, mismatch.index, shape)
    text = f"{mismatch.summary} ({DTYPE_NAMES[run.dtype]}{', at ' + where if where else ''})"
    mistake = "wrong_on_domain"
    if _clips(upstream, gradients, mismatch.wrong):
        assert mismatch.wrong is not None
        bound = float(upstream[0].detach().abs().to(torch.float64)[mismatch.wrong].min())
        mistake = "scales_grad_output"
        text += (
            f": wrong only where |grad_output| > {bound:.3g}. Does backward clip or rescale "
            "grad_output? It must multiply by it, whatever its size"
        )
    if mistake == "wrong_on_domain":
        text += (
            ": the formula must hold over the whole domain, large magnitudes included "
            "(a clamp, a threshold or a shortcut that is only right near 0?)"
        )
    details = [mismatch.detail] if mismatch.detail else []
    return Failure(None, text, details, named(mistake, text))


def _clips(
    upstream: tuple[torch.Tensor, ...],
    gradients: tuple[torch.Tensor, torch.Tensor] | None,
    wrong: torch.Tensor | None,
) -> bool:
    """A backward that clips grad_output at some bound T gives got = T·expected/|g| where
    |g| > T: got/expected·|g| is the same number T (above 1) at every wrong element."""
    if len(upstream) != 1 or gradients is None or wrong is None or not bool(wrong.any()):
        return False
    expected, got = (t.detach().to(torch.float64) for t in gradients)
    g = upstream[0].detach().abs().to(torch.float64)
    if not expected.shape == got.shape == g.shape == wrong.shape:
        return False
    usable = wrong & (expected.abs() > 0)
    if not bool(usable.any()):
        return False
    bound = (got[usable] / expected[usable]) * g[usable]
    middle = float(bound.median())
    return middle > 1 and bool(((bound - middle).abs() <= 1e-3 * middle).all())


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
    return Failure(None, text, diagnosis=named("non_finite", text))
