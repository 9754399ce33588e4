"""Domain and stability: every case across the domain on a log scale, with wide upstream gradients, and the spec's probes."""

from __future__ import annotations

import torch

from trainer.checking.trusted.compare import Mismatch, compare_tensor
from trainer.checking.trusted.diagnosis import named
from trainer.checking.trusted.plan import DTYPE_NAMES, Run
from trainer.checking.trusted.proxy import LearnerFault, forward_outputs
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    apply,
    fault_diagnosis,
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
    except LearnerFault as fault:  # the proxy's forward refuses what torch would
        return Failure(run, fault.message, fault.details, fault_diagnosis(fault))
    for index, (expected, got) in enumerate(zip(run.expected_outputs, outputs, strict=True)):
        if not bool(torch.isfinite(got).all()):
            return _not_finite(run, "forward gives", got)
        slack = run.outputs_slack[index] if run.outputs_slack else None
        mismatch = compare_tensor(output_name(exercise, index), expected, got, run.tolerance, slack)
        if mismatch:
            return _off_domain(run, mismatch, expected.shape, "forward", values=(expected, got))
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
    values: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Failure:
    """Words for a value that is wrong somewhere across the domain: where, and why when
    the evidence says (see :func:`_reason`)."""
    where = _input_at(run, mismatch.index, shape)
    what = DTYPE_NAMES[run.dtype] + (f", {run.note}" if run.note else "")
    text = f"{mismatch.summary} ({what}{', at ' + where if where else ''})"
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
        reason = _reason(run, mismatch, shape, gradients or values)
        text += ": the formula must hold over the whole domain" + (f", {reason}" if reason else "")
    details = [mismatch.detail] if mismatch.detail else []
    return Failure(None, text, details, named(mistake, text))


def _reason(
    run: Run,
    mismatch: Mismatch,
    shape: torch.Size,
    pair: tuple[torch.Tensor, torch.Tensor] | None,
) -> str:
    """Why the values are wrong, as far as the evidence goes; "" when it says nothing.

    * wrong only where an input ties with another of its values: the tie rule;
    * in float32, a small relative error: precision lost (cancellation);
    * wrong exactly at the largest magnitudes, and badly: a clamp or threshold.
    """
    wrong = mismatch.wrong
    if pair is None or wrong is None or not bool(wrong.any()):
        return ""
    expected, got = (t.detach().to(torch.float64) for t in pair)
    if expected.shape != wrong.shape or got.shape != wrong.shape:
        return ""
    inputs = [
        a.detach().to(torch.float64)
        for a in run.args
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.shape == shape
    ]
    if inputs and bool((~wrong).any()):
        x = inputs[0]
        tied = _tied(x)
        if bool(tied[wrong].all()) and not bool(tied[~wrong].all()):
            return (
                "ties included: it is wrong only where inputs are equal. On a tie the "
                "gradient must go where the spec says (check the tie rule)"
            )
    scale = expected.abs().clamp_min(1e-300)
    relative = float(((got - expected).abs() / scale)[wrong].max())
    if run.dtype == torch.float32 and relative < 0.05:
        return (
            "in float32 too: it is off by a small fraction, precision lost to "
            "cancellation (E[x²] − E[x]² loses it when the mean is large against the "
            "spread: subtract the mean before you square)"
        )
    if inputs:
        magnitude = inputs[0].abs()
        smallest_wrong = float(magnitude[wrong].min())
        if smallest_wrong > 1 and smallest_wrong >= float(magnitude.median()):
            return (
                "large magnitudes included: it is wrong only at large inputs. A clamp, a "
                "threshold or a shortcut that is only right near 0?"
            )
    return ""


def _tied(x: torch.Tensor) -> torch.Tensor:
    """Where an element of ``x`` equals another element of ``x``."""
    flat = x.reshape(-1)
    _, inverse, counts = torch.unique(flat, return_inverse=True, return_counts=True)
    tied: torch.Tensor = (counts[inverse] > 1).reshape(x.shape)
    return tied


def _clips(
    upstream: tuple[torch.Tensor, ...],
    gradients: tuple[torch.Tensor, torch.Tensor] | None,
    wrong: torch.Tensor | None,
) -> bool:
    """A backward that clips grad_output at some bound T gives got = T·expected/|g| where
    |g| > T: got/expected·|g| is the same number T (above 1) at every wrong element, and
    every element with |g| above T is wrong. One or two elements lost to float32's
    rounding agree with any T: they are no clip while others above it are right."""
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
    if not (middle > 1 and bool(((bound - middle).abs() <= 1e-3 * middle).all())):
        return False
    spared = (g > middle * (1 + 1e-3)) & (expected.abs() > 0) & ~wrong
    return not bool(spared.any())


def _not_finite(run: Run, what: str, tensor: torch.Tensor) -> Failure:
    flat = tensor.detach().reshape(-1)
    first = int((~torch.isfinite(flat)).nonzero()[0, 0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), tensor.shape))
    value = float(flat[first])
    where = _input_at(run, index, tensor.shape) or run.case.describe()
    if run.note:
        where += f" ({run.note})"
    shown = "[" + ", ".join(map(str, index)) + "]"
    why = (
        "an overflow (exp of a large value? subtract the max first)"
        if value in (float("inf"), float("-inf"))
        else "0/0, inf − inf or inf·0 (a division by a sum or norm that is 0 here, or an "
        "overflow cancelled later)"
    )
    text = (
        f"{what} {value} at {shown} for {where} ({DTYPE_NAMES[run.dtype]}), where the "
        f"reference is finite: {why}; rewrite it in a numerically stable form"
    )
    return Failure(None, text, diagnosis=named("non_finite", text))
