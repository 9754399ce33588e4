"""The gradcheck stage: torch's own gradcheck on the learner's answers, and where it disagrees.

On a failure, the (output, input) pair that disagrees most is found here with
random directions (gradcheck's own error text is never parsed), and for a
small pair the Jacobian entry that differs most, named by the forward
parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.gradcheck import GradcheckError

from trainer.checking.trusted.numeric import central_differences
from trainer.checking.trusted.plan import Run
from trainer.checking.trusted.proxy import LearnerFault, forward_outputs
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    _lines,
    apply,
    fault_diagnosis,
    output_name,
    summarise,
)
from trainer.spec import Exercise

_DISAGREES = "your backward disagrees with finite differences of your forward"


def gradcheck_stage(checked: Checked) -> StageOutcome:
    function_class, plan, exercise = checked.function_class, checked.plan, checked.exercise
    tolerances = exercise.tolerances
    failures: list[Failure] = []
    runs = plan.gradcheck_runs
    for run in runs:
        args = run.fresh_args()
        names = run.grad_names()
        positions = [i for i, p in enumerate(run.params) if p.name in names]
        inputs = tuple(
            a for i, a in enumerate(args) if i in positions and isinstance(a, torch.Tensor)
        )

        def function(
            *tensors: torch.Tensor,
            args: list[object] = args,
            positions: list[int] = positions,
            run: Run = run,
        ) -> Any:
            call = list(args)
            for position, tensor in zip(positions, tensors, strict=True):
                call[position] = tensor
            result = apply(function_class, call)
            _held_to_dtypes(forward_outputs(result, exercise), run, exercise)
            return result

        try:
            torch.autograd.gradcheck(
                function,
                inputs,
                eps=tolerances.gradcheck_eps,
                atol=tolerances.gradcheck_atol,
                rtol=tolerances.gradcheck_rtol,
                raise_exception=True,
                fast_mode=True,  # random projections: two calls instead of one per element
            )
        except GradcheckError:
            if failures:  # the report shows the first failure's details, and the others' runs
                failures.append(Failure(run, _DISAGREES))
            else:
                failures.append(_gradcheck_failure(run, names, function, inputs, exercise))
        except LearnerFault as fault:  # the proxy refuses what torch would
            failures.append(Failure(run, fault.message, fault.details, fault_diagnosis(fault)))
    return summarise(
        failures,
        len(runs),
        f"analytical and numerical Jacobians agree on {len(runs)} float64 runs "
        f"(eps {tolerances.gradcheck_eps:g}, atol {tolerances.gradcheck_atol:g}, "
        f"rtol {tolerances.gradcheck_rtol:g})",
    )


def _held_to_dtypes(outputs: tuple[torch.Tensor, ...], run: Run, exercise: Exercise) -> None:
    """gradcheck compares in the inputs' dtype: an output of another dtype (forward parity
    names it) is refused before gradcheck's own arithmetic trips on it."""
    for index, (got, want) in enumerate(zip(outputs, run.expected_outputs, strict=True)):
        if got.dtype != want.dtype:
            raise LearnerFault(
                f"{output_name(exercise, index)} of forward has dtype {got.dtype}, expected "
                f"{want.dtype} (see Forward parity): gradcheck runs in the inputs' dtype"
            )


def _gradcheck_failure(
    run: Run,
    names: list[str],
    function: Callable[..., object],
    inputs: tuple[torch.Tensor, ...],
    exercise: Exercise,
) -> Failure:
    """Which output and input disagree most, and where: found by probing each pair with
    random vectors (cheap), then, for a small pair, the worst Jacobian entry."""
    eps = exercise.tolerances.gradcheck_eps
    try:
        output_index, input_index = _worst_pair(function, inputs, eps)
    except Exception:  # a diagnosis is optional; the verdict stands without it
        return Failure(run, _DISAGREES)
    name = names[input_index] if input_index < len(names) else f"input {input_index + 1}"
    message = f"{_DISAGREES} for `{name}`"
    if exercise.outputs > 1:
        message += f" ({output_name(exercise, output_index)})"
    worst = _worst_jacobian_entry(function, inputs, output_index, input_index, name, exercise)
    return Failure(run, message, _lines(worst or ""))


def _outputs_of(function: Callable[..., object], tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    result = function(*tensors)
    return list(result) if isinstance(result, tuple | list) else [result]  # type: ignore[list-item]


def _worst_pair(
    function: Callable[..., object], inputs: tuple[torch.Tensor, ...], eps: float
) -> tuple[int, int]:
    """The (output, input) pair whose directional derivative u·J·v the learner's backward
    gets most wrong, relative to finite differences along v."""
    generator = torch.Generator().manual_seed(0)
    tensors = [t.detach().clone().requires_grad_(True) for t in inputs]
    outputs = _outputs_of(function, tensors)
    worst, pair = -1.0, (0, 0)
    for out_index, output in enumerate(outputs):
        if not output.is_floating_point():  # an integer output takes no gradient
            continue
        u = torch.randn(output.shape, dtype=output.dtype, generator=generator)
        grads = torch.autograd.grad(output, tensors, u, retain_graph=True, allow_unused=True)
        for in_index, (tensor, grad) in enumerate(zip(tensors, grads, strict=True)):
            v = torch.randn(tensor.shape, dtype=tensor.dtype, generator=generator)
            analytical = float((grad * v).sum()) if grad is not None else 0.0

            numerical = (
                _along(function, tensors, out_index, in_index, u, v, eps)
                - _along(function, tensors, out_index, in_index, u, v, -eps)
            ) / (2 * eps)
            gap = abs(analytical - numerical) / (1.0 + abs(numerical))
            if gap > worst:
                worst, pair = gap, (out_index, in_index)
    return pair


def _along(
    function: Callable[..., object],
    tensors: list[torch.Tensor],
    out_index: int,
    in_index: int,
    u: torch.Tensor,
    v: torch.Tensor,
    step: float,
) -> float:
    """u · f(x + step·v), the output weighted by u, with one input moved along v."""
    moved = [t.detach().clone() for t in tensors]
    moved[in_index] = moved[in_index] + step * v
    with torch.no_grad():
        return float((_outputs_of(function, moved)[out_index] * u).sum())


def _worst_jacobian_entry(
    function: Callable[..., object],
    inputs: tuple[torch.Tensor, ...],
    output_index: int,
    input_index: int,
    input_name: str,
    exercise: Exercise,
) -> str | None:
    """Where the analytical and numerical Jacobians differ most, as one line."""
    eps = exercise.tolerances.gradcheck_eps
    tensors = [t.detach().clone().requires_grad_(True) for t in inputs]
    target = tensors[input_index]
    try:
        output = _outputs_of(function, tensors)[output_index]
        if not isinstance(output, torch.Tensor) or target.numel() * output.numel() > 20_000:
            return None
        analytical = torch.zeros(output.numel(), target.numel(), dtype=torch.float64)
        for row in range(output.numel()):
            seed = torch.zeros_like(output).reshape(-1)
            seed[row] = 1.0
            (grad,) = torch.autograd.grad(
                output, target, seed.reshape(output.shape), retain_graph=True, allow_unused=True
            )
            if grad is not None:
                analytical[row] = grad.reshape(-1)

        def only(moved: torch.Tensor) -> torch.Tensor:
            call = [t.detach() for t in tensors]
            call[input_index] = moved
            with torch.no_grad():
                return _outputs_of(function, call)[output_index]

        numerical = central_differences(only, target, eps)
    except Exception:  # a diagnosis is optional; the verdict stands without it
        return None
    gap = (analytical - numerical).abs()
    row, column = divmod(int(gap.argmax()), target.numel())
    out_index = [int(i) for i in torch.unravel_index(torch.tensor(row), output.shape)]
    in_index = [int(i) for i in torch.unravel_index(torch.tensor(column), target.shape)]
    name = "out" if exercise.outputs == 1 else f"out{output_index + 1}"
    return (
        f"largest gap at d{name}{out_index} / d{input_name}{in_index}: "
        f"numerical {float(numerical[row, column]):.6g}, "
        f"from your backward {float(analytical[row, column]):.6g}"
    )
