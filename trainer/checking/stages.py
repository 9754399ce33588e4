"""The stages after loading: forward parity, backward parity and gradcheck.

Each stage returns a :class:`StageOutcome` (a verdict and words for the
learner); an exception from the learner's code is part of the verdict, never a
crash of the checker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.autograd.gradcheck import GradcheckError

from trainer.checking.compare import compare_tensor, shape_text
from trainer.checking.learner import describe_exception, learner_traceback, raised_in
from trainer.checking.plan import Plan, Run
from trainer.spec import Exercise

# Kept before any learner code runs, so a patched torch cannot change a verdict.
_autograd_grad = torch.autograd.grad
_gradcheck = torch.autograd.gradcheck
_zeros_like = torch.zeros_like


_NOT_WRITTEN = " is not written yet"


def _apply(function_class: type[torch.autograd.Function], args: list[object]) -> object:
    apply: Callable[..., object] = function_class.apply
    return apply(*args)


@dataclass
class StageOutcome:
    passed: bool
    message: str
    details: list[str] = field(default_factory=list)


@dataclass
class _Failure:
    run: Run
    message: str
    details: list[str] = field(default_factory=list)

    @property
    def same_for_every_run(self) -> bool:
        return _NOT_WRITTEN in self.message.split(":")[0]


def _summarise(failures: list[_Failure], total: int, success: str) -> StageOutcome:
    if not failures:
        return StageOutcome(True, success)
    first = failures[0]
    if first.same_for_every_run:
        return StageOutcome(False, first.message)
    message = f"{first.message} (for {first.run.label})"
    details = list(first.details)
    if len(failures) == total and total > 1:
        details.append(f"fails in all {total} runs")
    elif len(failures) > 1:
        others = "; ".join(f.run.label for f in failures[1:4])
        more = f" and {len(failures) - 4} more" if len(failures) > 4 else ""
        details.append(f"also fails for {others}{more} ({len(failures)} of {total} runs)")
    return StageOutcome(False, message, details)


def _nonempty(*lines: str) -> list[str]:
    return [line for line in lines if line]


def explain_learner_error(error: BaseException, path: Path, during: str) -> tuple[str, list[str]]:
    """Words for an exception that came out of the learner's forward or backward."""
    frames = learner_traceback(error, path)
    for method in ("backward", "forward"):
        if isinstance(error, NotImplementedError) and raised_in(error, path, method):
            return (
                f"{method}(){_NOT_WRITTEN}: it still raises NotImplementedError. "
                f"Write it in {path.name}, then run `trainer check` again.",
                [],
            )
    if isinstance(error, SystemExit):
        return f"your code called sys.exit({error.code!r}) during {during}", frames
    if isinstance(error, RecursionError):
        return f"{during} recursed without end (RecursionError)", frames[-4:]
    if frames:
        return f"{during} raised {describe_exception(error)}", frames
    # Raised by torch itself, after the learner's method returned.
    if during == "backward":
        return f"autograd rejected what backward returned: {describe_exception(error)}", []
    if during == "forward":
        return f"torch rejected what forward did: {describe_exception(error)}", []
    return f"{during} raised {describe_exception(error)}", []


def _outputs(result: object, exercise: Exercise) -> tuple[torch.Tensor, ...] | str:
    """The learner's forward result as a tuple of tensors, or why it cannot be one."""
    if exercise.outputs == 1:
        if isinstance(result, torch.Tensor):
            return (result,)
        if isinstance(result, tuple | list):
            return f"forward returned a {type(result).__name__} of {len(result)} values; expected one tensor"
        return f"forward returned a {type(result).__name__}; expected a tensor"
    if not isinstance(result, tuple | list) or len(result) != exercise.outputs:
        return f"forward must return {exercise.outputs} tensors as a tuple"
    for index, item in enumerate(result):
        if not isinstance(item, torch.Tensor):
            return f"forward's output {index} is a {type(item).__name__}, not a tensor"
    return tuple(result)


def _output_name(exercise: Exercise, index: int) -> str:
    return "the output" if exercise.outputs == 1 else f"output {index}"


def _call_forward(
    function_class: type[torch.autograd.Function], run: Run, exercise: Exercise, path: Path
) -> tuple[list[object], tuple[torch.Tensor, ...]] | _Failure:
    args = run.fresh_args()
    try:
        result = _apply(function_class, args)
    except BaseException as error:  # the learner's code may raise anything
        message, details = explain_learner_error(error, path, "forward")
        return _Failure(run, message, details)
    outputs = _outputs(result, exercise)
    if isinstance(outputs, str):
        return _Failure(run, outputs)
    if any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        for output in outputs:
            forward_class = getattr(type(output.grad_fn), "_forward_cls", None)
            if output.requires_grad and forward_class is not function_class:
                return _Failure(
                    run,
                    f"the output was not produced by `{function_class.__name__}.apply`: "
                    "its gradient would not come from your backward",
                )
    return args, outputs


def forward_stage(
    function_class: type[torch.autograd.Function], plan: Plan, exercise: Exercise, path: Path
) -> StageOutcome:
    failures: list[_Failure] = []
    for run in plan.runs:
        called = _call_forward(function_class, run, exercise, path)
        if isinstance(called, _Failure):
            failures.append(called)
            continue
        _, outputs = called
        for index, (expected, got) in enumerate(zip(run.expected_outputs, outputs, strict=True)):
            mismatch = compare_tensor(_output_name(exercise, index), expected, got, run.tolerance)
            if mismatch:
                failures.append(_Failure(run, mismatch.summary, _nonempty(mismatch.detail)))
                break
    return _summarise(
        failures,
        len(plan.runs),
        f"matches `{exercise.reference}` on {len(plan.runs)} runs (float32 and float64)",
    )


def _learner_gradients(
    function_class: type[torch.autograd.Function], run: Run, exercise: Exercise, path: Path
) -> dict[str, torch.Tensor | None] | _Failure:
    called = _call_forward(function_class, run, exercise, path)
    if isinstance(called, _Failure):
        return called
    args, outputs = called
    for index, (expected, got) in enumerate(zip(run.expected_outputs, outputs, strict=True)):
        if got.shape != expected.shape:
            return _Failure(
                run,
                f"cannot compare gradients: {_output_name(exercise, index)} of forward has shape "
                f"{shape_text(got.shape)}, expected {shape_text(expected.shape)} (see Forward parity)",
            )
    names = run.grad_names()
    wanting = [a for a, p in zip(args, run.params, strict=True) if p.name in names]
    try:
        grads = _autograd_grad(
            outputs,
            [w for w in wanting if isinstance(w, torch.Tensor)],
            run.upstream,
            allow_unused=True,
        )
    except BaseException as error:  # the learner's backward may raise anything
        message, details = explain_learner_error(error, path, "backward")
        return _Failure(run, message, details)
    return dict(zip(names, grads, strict=True))


def backward_stage(
    function_class: type[torch.autograd.Function], plan: Plan, exercise: Exercise, path: Path
) -> StageOutcome:
    failures: list[_Failure] = []
    for run in plan.runs:
        grads = _learner_gradients(function_class, run, exercise, path)
        if isinstance(grads, _Failure):
            failures.append(grads)
            continue
        for name, got in grads.items():
            if got is None:
                failures.append(
                    _Failure(run, f"backward returned None for `{name}`, which requires grad")
                )
                break
            mismatch = compare_tensor(
                f"grad for `{name}`", run.expected_grads[name], got, run.tolerance
            )
            if mismatch:
                failures.append(_Failure(run, mismatch.summary, _nonempty(mismatch.detail)))
                break
    names = ", ".join(f"`{n}`" for n in plan.runs[0].grad_names())
    return _summarise(
        failures,
        len(plan.runs),
        f"gradients for {names} match autograd of `{exercise.reference}` on {len(plan.runs)} runs "
        "with random upstream gradients",
    )


_MISMATCH = re.compile(r"output (\d+) with respect to input (\d+)")


def gradcheck_stage(
    function_class: type[torch.autograd.Function], plan: Plan, exercise: Exercise, path: Path
) -> StageOutcome:
    tolerances = exercise.tolerances
    failures: list[_Failure] = []
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
            return _apply(function_class, call)

        try:
            _gradcheck(
                function,
                inputs,
                eps=tolerances.gradcheck_eps,
                atol=tolerances.gradcheck_atol,
                rtol=tolerances.gradcheck_rtol,
                raise_exception=True,
            )
        except GradcheckError as error:
            failures.append(_gradcheck_failure(error, run, names, function, inputs, exercise))
        except BaseException as error:  # the learner's code may raise anything
            message, details = explain_learner_error(error, path, "gradcheck")
            failures.append(_Failure(run, message, details))
    return _summarise(
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
    inputs: tuple[object, ...],
    exercise: Exercise,
) -> _Failure:
    text = str(error)
    match = _MISMATCH.search(text)
    if not match:
        return _Failure(run, f"gradcheck failed: {text.splitlines()[0]}")
    output_index, input_index = int(match.group(1)), int(match.group(2))
    name = names[input_index] if input_index < len(names) else f"input {input_index}"
    message = f"your backward disagrees with finite differences of your forward for `{name}`"
    if exercise.outputs > 1:
        message += f" ({_output_name(exercise, output_index)})"
    worst = _worst_jacobian_entry(function, inputs, output_index, input_index, name, exercise)
    return _Failure(run, message, [worst] if worst else [])


def _worst_jacobian_entry(
    function: Callable[..., object],
    inputs: tuple[object, ...],
    output_index: int,
    input_index: int,
    input_name: str,
    exercise: Exercise,
) -> str | None:
    """Where the analytical and numerical Jacobians differ most, as one line."""
    eps = exercise.tolerances.gradcheck_eps
    tensors = [
        t.detach().clone().requires_grad_(True) for t in inputs if isinstance(t, torch.Tensor)
    ]
    target = tensors[input_index]
    try:
        result = function(*tensors)
        outputs = result if isinstance(result, tuple | list) else (result,)
        output = outputs[output_index]
        if not isinstance(output, torch.Tensor) or target.numel() * output.numel() > 20_000:
            return None
        analytical = torch.zeros(output.numel(), target.numel(), dtype=torch.float64)
        for row in range(output.numel()):
            seed = _zeros_like(output).reshape(-1)
            seed[row] = 1.0
            (grad,) = _autograd_grad(
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
    except BaseException:  # a diagnosis is optional; the verdict stands without it
        return None
    gap = (analytical - numerical).abs()
    row, column = divmod(int(gap.argmax()), target.numel())
    out_index = [int(i) for i in torch.unravel_index(torch.tensor(row), output.shape)]
    in_index = [int(i) for i in torch.unravel_index(torch.tensor(column), target.shape)]
    name = "out" if exercise.outputs == 1 else f"out{output_index}"
    return (
        f"largest gap at d{name}{out_index} / d{input_name}{in_index}: numerical {float(numerical[row, column]):.6g}, "
        f"from your backward {float(analytical[row, column]):.6g}"
    )
