"""The gradcheck stage: torch's own gradcheck on the learner's answers, and where it disagrees.

On a failure, gradcheck's message only says which input; the Jacobian entry
where the learner's backward and finite differences of its forward differ most
is computed here, and named by the forward parameter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.gradcheck import GradcheckError

from trainer.checking.trusted.plan import Run
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    _lines,
    apply,
    explain,
    output_name,
    summarise,
)
from trainer.spec import Exercise

_MISMATCH = re.compile(r"output (\d+) with respect to input (\d+)")


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
            *tensors: torch.Tensor, args: list[object] = args, positions: list[int] = positions
        ) -> Any:
            call = list(args)
            for position, tensor in zip(positions, tensors, strict=True):
                call[position] = tensor
            return apply(function_class, call)

        try:
            torch.autograd.gradcheck(
                function,
                inputs,
                eps=tolerances.gradcheck_eps,
                atol=tolerances.gradcheck_atol,
                rtol=tolerances.gradcheck_rtol,
                raise_exception=True,
            )
        except GradcheckError as error:
            failures.append(_gradcheck_failure(error, run, names, function, inputs, exercise))
        except Exception as error:  # a learner's fault, or torch rejecting its result
            message, details = explain(error, "gradcheck", exercise.param_names)
            failures.append(Failure(run, message, details))
    return summarise(
        failures,
        len(runs),
        f"analytical and numerical Jacobians agree on {len(runs)} float64 runs "
        f"(eps {tolerances.gradcheck_eps:g}, atol {tolerances.gradcheck_atol:g}, "
        f"rtol {tolerances.gradcheck_rtol:g})",
    )


def _gradcheck_failure(
    error: GradcheckError,
    run: Run,
    names: list[str],
    function: Callable[..., object],
    inputs: tuple[torch.Tensor, ...],
    exercise: Exercise,
) -> Failure:
    text = str(error)
    match = _MISMATCH.search(text)
    if not match:
        return Failure(run, f"gradcheck failed: {text.splitlines()[0]}")
    output_index, input_index = int(match.group(1)), int(match.group(2))
    name = names[input_index] if input_index < len(names) else f"input {input_index}"
    message = f"your backward disagrees with finite differences of your forward for `{name}`"
    if exercise.outputs > 1:
        message += f" ({output_name(exercise, output_index)})"
    worst = _worst_jacobian_entry(function, inputs, output_index, input_index, name, exercise)
    return Failure(run, message, _lines(worst or ""))


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
        result = function(*tensors)
        outputs = result if isinstance(result, tuple | list) else (result,)
        output = outputs[output_index]
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
        numerical = torch.zeros_like(analytical)
        with torch.no_grad():
            for column in range(target.numel()):
                shifted = []
                for sign in (1.0, -1.0):
                    probe = [t.detach().clone() for t in tensors]
                    probe[input_index].reshape(-1)[column] += sign * eps
                    value = function(*probe)
                    values = value if isinstance(value, tuple | list) else (value,)
                    shifted.append(values[output_index].reshape(-1).to(torch.float64))
                numerical[:, column] = (shifted[0] - shifted[1]) / (2 * eps)
    except Exception:  # a diagnosis is optional; the verdict stands without it
        return None
    gap = (analytical - numerical).abs()
    row, column = divmod(int(gap.argmax()), target.numel())
    out_index = [int(i) for i in torch.unravel_index(torch.tensor(row), output.shape)]
    in_index = [int(i) for i in torch.unravel_index(torch.tensor(column), target.shape)]
    name = "out" if exercise.outputs == 1 else f"out{output_index}"
    return (
        f"largest gap at d{name}{out_index} / d{input_name}{in_index}: "
        f"numerical {float(numerical[row, column]):.6g}, "
        f"from your backward {float(analytical[row, column]):.6g}"
    )
