"""Tools for exercise authors: validate specs against their solutions, scaffold new ones."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from trainer.catalog import solution_path, wrong_variant_path
from trainer.checking.report import CheckReport
from trainer.checking.runner import CheckingService, run_check
from trainer.errors import SpecError, TrainerError
from trainer.spec import Exercise, WrongVariant, load_exercise


@dataclass
class VariantResult:
    variant: WrongVariant
    failed_at: str | None  # the first failing stage; None when it passed
    mistake: str | None

    @property
    def ok(self) -> bool:
        return self.failed_at == self.variant.fails_at and (
            self.variant.mistake is None or self.mistake == self.variant.mistake
        )

    def describe(self) -> str:
        want = self.variant.fails_at + (f"/{self.variant.mistake}" if self.variant.mistake else "")
        got = (
            "passed"
            if self.failed_at is None
            else self.failed_at + (f"/{self.mistake}" if self.mistake else "")
        )
        return f"{self.variant.file}: expected {want}, got {got}"


@dataclass
class Validation:
    spec: str
    exercise_id: str = ""
    schema: str = ""  # empty when the spec loads; else the one-line error
    stub: str = ""  # empty when the stub fails as it should; else what went wrong
    solution: str = ""  # empty when the reference passes; else the first failure
    variants: list[VariantResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.schema or self.stub or self.solution) and all(v.ok for v in self.variants)

    @property
    def problems(self) -> list[str]:
        found = [p for p in (self.schema, self.stub, self.solution) if p]
        return found + [v.describe() for v in self.variants if not v.ok]


def _first_failure(report: CheckReport) -> tuple[str | None, str | None, str]:
    failure = report.first_failure
    if failure is None:
        return None, None, ""
    mistake = (failure.diagnosis or {}).get("mistake")
    return failure.id, mistake if isinstance(mistake, str) else None, failure.message


def validate(
    specs: Sequence[tuple[Path, str]],
    jobs: int | None = None,
    on_done: Callable[[], None] | None = None,
) -> list[Validation]:
    """Check every spec, its stub, its reference solution and its wrong variants, in parallel.

    ``specs`` are (path, display name) pairs. Each check runs in its own
    process, so threads are enough to keep every core busy.
    """
    workers = jobs or os.cpu_count() or 1
    results: list[Validation] = []
    # torch is imported once, by a warm process; each check is a fork of it.
    with (
        tempfile.TemporaryDirectory(prefix="trainer-validate-") as scratch,
        CheckingService() as warm,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        pending: list[tuple[Validation, str, Future[CheckReport], WrongVariant | None]] = []

        def submit(exercise: Exercise, file: Path) -> Future[CheckReport]:
            future = pool.submit(
                run_check, exercise, file, solution=solution_path(exercise), service=warm
            )
            if on_done is not None:
                future.add_done_callback(lambda _: on_done())
            return future

        for path, name in specs:
            result = Validation(spec=name)
            results.append(result)
            try:
                exercise = load_exercise(path, name)
            except SpecError as error:
                result.schema = error.message
                continue
            result.exercise_id = exercise.id
            stub = Path(scratch) / exercise.id / f"{exercise.id}.py"
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text(exercise.stub, encoding="utf-8")
            pending.append((result, "stub", submit(exercise, stub), None))
            reference = solution_path(exercise)
            if reference.is_file():
                pending.append((result, "solution", submit(exercise, reference), None))
            else:
                result.solution = f"no reference solution at {reference}"
            for declared in exercise.wrong_variants:
                file = wrong_variant_path(exercise, declared.file)
                if not file.is_file():
                    result.variants.append(VariantResult(declared, "missing file", None))
                    continue
                pending.append((result, "variant", submit(exercise, file), declared))

        for result, kind, future, variant in pending:
            try:
                report = future.result()
            except TrainerError as error:
                message = f"the check could not run: {error.message}"
                if kind == "variant" and variant is not None:
                    result.variants.append(VariantResult(variant, "error", None))
                elif kind == "stub":
                    result.stub = message
                else:
                    result.solution = message
                continue
            stage, mistake, message = _first_failure(report)
            if kind == "stub" and stage is None:
                result.stub = "the untouched stub passes every stage: it must fail"
            elif kind == "solution" and stage is not None:
                result.solution = f"the reference solution fails at {stage}: {message}"
            elif kind == "variant" and variant is not None:
                result.variants.append(VariantResult(variant, stage, mistake))
    return results


_SPEC_TEMPLATE = """# Exercise spec: every field is documented in docs/spec-format.md.
format_version: 1
id: {id}
title: {title}
difficulty: easy          # easy | medium | hard: orders `trainer list`
order: 100                # position among exercises of the same difficulty
class_name: {class_name}  # the Function subclass the learner's file must define

# Shown by `trainer start`: what to write, the signature, what the checker compares.
statement: |
  Write the backward pass of `y = 3 * x` as a custom `torch.autograd.Function`
  called `{class_name}`. Replace this text with your exercise.

# The arguments of forward after ctx, in order. Tensors get uniform random
# values in [low, high]; scalars (float, int, bool) get the values of each case.
parameters:
  - name: x
    type: tensor
    low: -2.0
    high: 2.0

# The same computation with torch's own ops (names: torch, F, math, parameters).
reference: 3 * x

# Concrete calls: a shape for each tensor, a value for each scalar. Each runs in
# float32 and float64; gradcheck runs each in float64, so keep them small.
cases:
  - {{x: [5]}}
  - {{x: [3, 4]}}
  - {{x: [2, 3, 2]}}

# The scratch file `trainer start` writes: a working forward, an empty backward.
stub: |
  import torch


  class {class_name}(torch.autograd.Function):
      @staticmethod
      def forward(ctx, x):
          return 3 * x

      @staticmethod
      def backward(ctx, grad_output):
          # TODO: return dL/dx.
          raise NotImplementedError("backward() is not written yet")

# Revealed one at a time by `trainer hint`, from a nudge to nearly the code.
hints:
  - "The chain rule: multiply grad_output by the local derivative."
  - "The derivative of 3x is 3."
  - "Return `3 * grad_output`."

# Multiple choice; `answer` counts from 1; the explanation is shown either way.
quiz:
  - question: What shape does backward's gradient for x have?
    choices: ["The shape of x", "The shape of the Jacobian", "A scalar"]
    answer: 1
    explanation: backward returns a vector-Jacobian product, shaped like its input.
  - question: What does grad_output hold?
    choices: ["dL/dy", "dy/dx", "ones"]
    answer: 1
    explanation: the gradient of the loss with respect to this function's output.
  - question: Why does gradcheck want float64?
    choices: ["Finite differences need the digits", "float32 cannot require grad", "Speed"]
    answer: 1
    explanation: with eps around 1e-6, float32 keeps too few digits for the difference.

tolerances: {{}}          # defaults: float32 rtol 1e-5 atol 1e-6; float64 rtol 1e-7 atol 1e-10

notes: |
  Shown with the solution after a pass: what to notice.

# Known-wrong solutions in solutions/wrong/{id}/: each must fail first at
# `fails_at`, with the checker naming `mistake` when one is given.
wrong_variants:
  - file: forgets_grad_output.py
    fails_at: backward
    mistake: no_grad_output
    why: returns the local derivative without multiplying by grad_output
"""

_SOLUTION_TEMPLATE = '''"""Reference solution for `{id}`: replace with your exercise's."""

import torch


class {class_name}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 3 * x

    @staticmethod
    def backward(ctx, grad_output):
        # dy/dx = 3 everywhere: nothing to save.
        return 3 * grad_output
'''

_WRONG_TEMPLATE = """import torch


class {class_name}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 3 * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.full_like(x, 3.0)  # wrong: ignores grad_output
"""


def scaffold(root: Path, exercise_id: str) -> list[Path]:
    """Write a spec, a solution and a wrong variant for ``exercise_id`` under ``root``."""
    from trainer.spec import ID_PATTERN

    if not ID_PATTERN.match(exercise_id):
        raise TrainerError(
            f"`{exercise_id}` is not a valid id: use lower case letters, digits and _, "
            "starting with a letter (e.g. my_softmax)."
        )
    class_name = "My" + "".join(part.capitalize() for part in exercise_id.split("_"))
    title = exercise_id.replace("_", " ").capitalize() + " with a hand-written backward"
    files = {
        root / "exercises" / f"{exercise_id}.yaml": _SPEC_TEMPLATE,
        root / "solutions" / f"{exercise_id}.py": _SOLUTION_TEMPLATE,
        root / "solutions" / "wrong" / exercise_id / "forgets_grad_output.py": _WRONG_TEMPLATE,
    }
    existing = [p for p in files if p.exists()]
    if existing:
        raise TrainerError(
            f"{existing[0]} already exists: nothing was written. Choose another id, or remove it."
        )
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            template.format(id=exercise_id, class_name=class_name, title=title), encoding="utf-8"
        )
    return list(files)
