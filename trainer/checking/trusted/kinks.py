"""Kink points: exactly on a kink any subgradient passes; close to it, on both sides, the gradient must switch there."""

from __future__ import annotations

import torch

from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.diagnosis import named
from trainer.checking.trusted.plan import NEAR_KINK, KinkRun
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    learner_gradients,
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
                diagnosis=named("kink_value", text, point.param),
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
            near = True
            text = f"next to the kinks, {mismatch.summary}"
            tensor = dict(zip((p.name for p in run.params), run.args, strict=True)).get(name)
            if mismatch.index is not None and isinstance(tensor, torch.Tensor):
                (flat,) = mismatch.index
                value = float(tensor.reshape(-1)[flat])
                kink = min(kink_run.points, key=lambda p: abs(p.value - value))
                side = "above" if value > kink.value else "below"
                distance = abs(value - kink.value)
                where = f"{name}[{_unflat(flat, tensor.shape)}] = {value:.8g}"
                if distance <= max(NEAR_KINK[run.dtype]) * max(1.0, abs(kink.value)):
                    text = (
                        f"close to the kink `{name}` = {kink.value:g} ({kink.expression}), at "
                        f"{where} ({distance:.1g} {side}), {mismatch.summary}: the gradient "
                        "must switch exactly at the kink, not before or after it"
                    )
                else:  # the worst element is not near a kink: not a kink mistake
                    near = False
                    text = (
                        f"away from the kinks (at {where}, {distance:.3g} from the nearest, "
                        f"{kink.value:g}), {mismatch.summary}"
                    )
            diagnosis = named("near_kink", text, name) if near else None
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
