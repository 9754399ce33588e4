"""Tools for exercise authors: validate specs against their solutions, scaffold new ones."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from trainer.bugs import bug_message
from trainer.catalog import requires_problems, solution_path, wrong_variant_path
from trainer.checking.report import CheckReport, Verdict
from trainer.checking.runner import CheckingService, run_check
from trainer.content_rules import (
    AnswerShares,
    OtherQuestion,
    content_warnings,
    questions_of,
    shared_questions,
)
from trainer.errors import SpecError, TrainerError
from trainer.spec import Exercise, WrongVariant, load_exercise
from trainer.vocabulary import follow_up_stages


@dataclass
class VariantResult:
    variant: WrongVariant
    failed_at: str | None  # the first failing stage; None when it passed
    mistake: str | None
    missing: Path | None = None  # the declared file, where there is none
    first_wrong: str = ""  # where the report says the first wrong gradient is

    @property
    def ok(self) -> bool:
        return (
            self.failed_at == self.variant.fails_at
            and (self.variant.mistake is None or self.mistake == self.variant.mistake)
            and (self.variant.first_wrong is None or self.first_wrong == self.variant.first_wrong)
        )

    def describe(self) -> str:
        if self.missing is not None:
            return f"{self.variant.file}: no such file: {_shown(self.missing)} (wrong_variants)"
        want = self.variant.fails_at + (f"/{self.variant.mistake}" if self.variant.mistake else "")
        got = (
            "passed"
            if self.failed_at is None
            else self.failed_at + (f"/{self.mistake}" if self.mistake else "")
        )
        if self.variant.first_wrong is not None:
            want += f", first wrong at {self.variant.first_wrong}"
            got += f", first wrong at {self.first_wrong or 'nowhere said'}"
        return f"{self.variant.file}: expected {want}, got {got}"


@dataclass
class Validation:
    spec: str
    exercise_id: str = ""
    schema: str = ""  # empty when the spec loads; else the one-line error
    stub: str = ""  # empty when the stub fails as it should; else what went wrong
    solution: str = ""  # empty when the reference passes; else the first failure
    # Empty when the formulas of `derive` hold (trainer.whiteboard); else one per line.
    derive: str = ""
    variants: list[VariantResult] = field(default_factory=list)
    # Broken content rules (trainer.content_rules): shown, never a failure.
    warnings: list[str] = field(default_factory=list)
    # The untouched stub's check, every stage: where it fails, and why.
    stub_report: CheckReport | None = field(default=None, repr=False)
    # A check of it that a bug of ours stopped (trainer.bugs): then validate exits 3.
    bug: bool = False
    # The stub's or the solution's check could not run (the spec's reference, say): the
    # wrong variants' errors are its knock-ons.
    not_run: bool = False

    @property
    def ok(self) -> bool:
        return not (self.schema or self.stub or self.solution or self.derive) and all(
            v.ok for v in self.variants
        )

    @property
    def problems(self) -> list[str]:
        """Every problem, each once. The schema's are one per line. When the spec itself
        stops every check (a reference that fails to run), the stub's and the solution's
        checks say so alike, and the wrong variants' errors are its knock-ons: said once."""
        found = [
            line
            for p in (self.schema, self.stub, self.solution, self.derive)
            for line in p.splitlines()
        ]
        found += [
            v.describe()
            for v in self.variants
            if not v.ok and not (self.not_run and v.failed_at == "error")
        ]
        return list(dict.fromkeys(found))


COULD_NOT_RUN = "the check could not run: "


DERIVE_TIMEOUT = 600.0  # seconds for the formulas of every spec validated at once


def _derive_check(paths: Sequence[Path]) -> subprocess.Popen[str]:
    """The specs' ``derive`` formulas evaluated with torch (``python -m
    trainer.whiteboard``), in a process of their own: validate imports no torch."""
    return subprocess.Popen(
        [sys.executable, "-m", "trainer.whiteboard", *map(str, paths)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _derive_problems(process: subprocess.Popen[str], paths: Sequence[Path]) -> dict[str, list[str]]:
    """What that process found, per path; a process that fails is a problem of each."""
    try:
        output, errors = process.communicate(timeout=DERIVE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        why = f"the check of its formulas took over {DERIVE_TIMEOUT:g} s"
        return {str(p): [f"derive: {why}"] for p in paths}
    try:
        found = json.loads(output)
    except json.JSONDecodeError:
        last = (errors.strip().splitlines() or ["it printed nothing"])[-1]
        return {str(p): [f"derive: its formulas could not be checked: {last}"] for p in paths}
    return {str(k): [str(p) for p in v] for k, v in found.items()}


def _shown(path: Path) -> str:
    """A path from the working folder when it is below it, else whole."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _first_failure(report: CheckReport) -> tuple[str | None, str | None, str, str]:
    """The first failing stage, the mistake it names, its words and where it says the
    first wrong gradient is."""
    failure = report.first_failure
    if failure is None:
        return None, None, "", ""
    mistake = (failure.diagnosis or {}).get("mistake")
    named = mistake if isinstance(mistake, str) else None
    return failure.id, named, failure.message, failure.first_wrong


def _stub_points(exercise: Exercise, report: CheckReport) -> str:
    """Empty when the stub's passed stages are worth nothing; else what it would earn."""
    weights = exercise.stage_weights()
    earned = [s.id for s in report.stages if s.verdict is Verdict.PASS and weights.get(s.id)]
    if not earned:
        return ""
    points = sum(weights[stage] for stage in earned)
    return (
        f"the untouched stub earns {points} points in a grade (it passes {', '.join(earned)}): "
        "make the stub fail those stages, or give them weight 0 (weights:)"
    )


def shared_quiz_paths(roots: Sequence[Path]) -> list[Path]:
    """The shared quizzes of catalogue roots: ``quizzes/*.yaml`` (e.g. the concepts quiz)."""
    return [path for root in roots for path in sorted((root / "quizzes").glob("*.yaml"))]


def _shared_questions(paths: Sequence[Path]) -> list[OtherQuestion]:
    """The questions of shared quiz files; a file that cannot be read gives none."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found: list[OtherQuestion] = []
    for path in paths:
        try:
            data = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=loader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        found += shared_questions(data, f"{path.parent.name}/{path.name}")
    return found


def _pool(exercises: Sequence[Exercise], catalogue: Sequence[Path]) -> list[Exercise]:
    """``exercises`` and the other specs of ``catalogue`` that load (a spec that does not
    load is skipped: validating it says why)."""
    pool = list(exercises)
    seen = {e.source.resolve() for e in exercises}
    for path in catalogue:
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            pool.append(load_exercise(path))
        except SpecError:
            continue
    return pool


def prerequisite_problems(
    exercises: Sequence[Exercise], catalogue: Sequence[Path] = ()
) -> dict[str, str]:
    """What is wrong with the ``requires`` of each of ``exercises``, judged against the
    whole catalogue: unknown ids, later tracks, cycles (``catalog.requires_problems``).
    Without a catalogue there is nothing to judge them against: no problems."""
    if not catalogue:
        return {}
    problems = requires_problems(_pool(exercises, catalogue))
    return {e.id: problems[e.id] for e in exercises if e.id in problems}


def content_warnings_by_id(
    exercises: Sequence[Exercise],
    catalogue: Sequence[Path] = (),
    shared_quizzes: Sequence[Path] = (),
) -> dict[str, list[str]]:
    """The content-rule warnings of each exercise, by id.

    Questions are compared with those of ``exercises``, of the other specs in
    ``catalogue`` (a spec that does not load is skipped: validating it says why)
    and of the ``shared_quizzes`` files.
    """
    pool = _pool(exercises, catalogue)
    others = questions_of(pool) + _shared_questions(shared_quizzes)
    shares = AnswerShares.of(pool)
    return {e.id: [str(w) for w in content_warnings(e, others, shares)] for e in exercises}


def validate(
    specs: Sequence[tuple[Path, str]],
    jobs: int | None = None,
    on_done: Callable[[], None] | None = None,
    catalogue: Sequence[Path] = (),
    shared_quizzes: Sequence[Path] = (),
    service: CheckingService | None = None,
) -> list[Validation]:
    """Check every spec, its stub, its reference solution and its wrong variants, in parallel.

    ``specs`` are (path, display name) pairs. Each check runs in its own
    process, so threads are enough to keep every core busy. Each spec's
    content is also held to :mod:`trainer.content_rules`, its questions
    compared with the other specs of ``catalogue`` and the ``shared_quizzes``;
    what breaks a rule becomes a warning, never a failure. The checks run on
    ``service`` when given (left running), else on a checking server of their own,
    started only when there is something to check.
    """
    workers = jobs or os.cpu_count() or 1
    results: list[Validation] = []
    # What to check, in the order results are gathered: (result, kind, exercise, file, variant).
    checks: list[tuple[Validation, str, Exercise, Path, WrongVariant | None]] = []
    loaded: list[tuple[Validation, Exercise]] = []
    with tempfile.TemporaryDirectory(prefix="trainer-validate-") as scratch:
        for path, name in specs:
            result = Validation(spec=name)
            results.append(result)
            try:
                exercise = load_exercise(path, name)
            except SpecError as error:
                result.schema = error.message
                continue
            result.exercise_id = exercise.id
            loaded.append((result, exercise))
            stub = Path(scratch) / exercise.id / f"{exercise.id}.py"
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text(exercise.stub, encoding="utf-8")
            checks.append((result, "stub", exercise, stub, None))
            reference = solution_path(exercise)
            if reference.is_file():
                checks.append((result, "solution", exercise, reference, None))
                # The reference passes every follow-up too: its stages only, the others
                # ran just above.
                for follow_up in exercise.follow_ups:
                    active = exercise.with_follow_up(follow_up.id)
                    checks.append((result, "follow-up", active, reference, None))
            else:
                result.solution = f"no reference solution at {reference}"
            for declared in exercise.wrong_variants:
                file = wrong_variant_path(exercise, declared.file)
                if not file.is_file():
                    result.variants.append(VariantResult(declared, "missing file", None, file))
                    continue
                # A follow-up's wrong answer passes the base check and fails the follow-up:
                # checked with it active, its first failure is the follow-up's stage.
                checked = (
                    exercise.with_follow_up(declared.follow_up) if declared.follow_up else exercise
                )
                checks.append((result, "variant", checked, file, declared))

        derived = [(result, e) for result, e in loaded if e.derive is not None]
        formulas = _derive_check([e.source for _, e in derived]) if derived else None
        futures: dict[int, Future[CheckReport]] = {}
        with contextlib.ExitStack() as running:
            if checks:
                # torch is imported once, by a warm process; each check is a fork of it.
                warm = service or running.enter_context(CheckingService())
                pool = running.enter_context(ThreadPoolExecutor(max_workers=workers))
                # Spec by spec (the checking server keeps the plans of the last few), each
                # reference first: it runs every stage, the longest check of its spec.
                spec_of = {id(result): n for n, (result, _) in enumerate(loaded)}

                def turn(index: int) -> tuple[int, bool]:
                    result, kind, _, _, _ = checks[index]
                    return spec_of[id(result)], kind != "solution"

                for index in sorted(range(len(checks)), key=turn):
                    _, kind, exercise, file, _ = checks[index]
                    graded = exercise.follow_up
                    # A wrong variant is judged by its first failure: skip the rest. The
                    # stub runs every stage: one it passes must be worth no points.
                    futures[index] = pool.submit(
                        run_check,
                        exercise,
                        file,
                        solution=solution_path(exercise),
                        service=warm,
                        stop_after_failure=kind == "variant",
                        catalogue_file=True,
                        only_stages=follow_up_stages(graded.check)
                        if kind == "follow-up" and graded is not None
                        else (),
                        # Its checks keep every CPU busy: a second process per check
                        # would only cost its fork and its load.
                        second_process=False,
                    )
                    if on_done is not None:
                        futures[index].add_done_callback(lambda _: on_done())

            # Prerequisites and content rules are cheap: they run while the checks do.
            prerequisites = prerequisite_problems([e for _, e in loaded], catalogue)
            for result, exercise in loaded:
                if exercise.id in prerequisites:
                    result.schema = f"{result.spec}: {prerequisites[exercise.id]}"
            warnings = content_warnings_by_id([e for _, e in loaded], catalogue, shared_quizzes)
            for result, exercise in loaded:
                result.warnings = warnings[exercise.id]

            for index, (result, kind, exercise, _, variant) in enumerate(checks):
                try:
                    report = futures[index].result()
                    if report.bug is not None:  # no verdict on the spec's files: ours
                        result.bug = True
                        bug = report.bug
                        raise TrainerError(bug_message(bug.where, bug.path, bug.error))
                except TrainerError as error:
                    message = f"{COULD_NOT_RUN}{error.message}"
                    if kind == "variant" and variant is not None:
                        result.variants.append(VariantResult(variant, "error", None))
                    elif kind == "stub":
                        result.stub, result.not_run = message, True
                    else:
                        result.solution, result.not_run = message, True
                    continue
                stage, mistake, message, first_wrong = _first_failure(report)
                if kind == "stub":
                    result.stub_report = report
                    if stage is None:
                        result.stub = "the untouched stub passes every stage: it must fail"
                    else:
                        result.stub = _stub_points(exercise, report)
                elif kind in ("solution", "follow-up") and stage is not None:
                    following = exercise.active_follow_up
                    during = f" (follow-up {following})" if following else ""
                    result.solution = f"the reference solution fails at {stage}{during}: {message}"
                elif kind == "variant" and variant is not None:
                    result.variants.append(
                        VariantResult(variant, stage, mistake, None, first_wrong)
                    )
        if formulas is not None:
            found = _derive_problems(formulas, [e.source for _, e in derived])
            for result, exercise in derived:
                problems = found.get(str(exercise.source), [])
                result.derive = "\n".join(f"{result.spec}: {p}" for p in problems)
    return results


_SPEC_TEMPLATE = """# Exercise spec: every field is documented in docs/spec-format.md.
format_version: 1
id: {id}
title: {title}
difficulty: easy          # easy | medium | hard | expert: orders `trainer list`
order: 100                # position among exercises of the same difficulty
track: activations        # the topic `trainer list` groups it under (see docs/spec-format.md)
requires: []              # ids of the exercises to do first (same or earlier track)
class_name: {class_name}  # the Function subclass the learner's file must define

# Shown by `trainer start`: what to write, the signature, what the checker compares.
statement: |
  Write the backward pass of `y = 3 * x` as a custom `torch.autograd.Function`
  called `{class_name}`. Replace this text with your exercise.

  What the checker tests (name every stage it runs: `trainer validate` warns):

  - that your file loads and defines `{class_name}`;
  - forward against the reference, and your gradient against the one autograd
    gets for it, under random upstream gradients, in float32 and float64;
  - the backward contract, with `backward` called directly;
  - that the gradient is derived by hand, not by autograd;
  - calls as in training: 500 calls in a row, shared graphs;
  - the domain: values across the whole range, compared with the reference's;
  - `torch.autograd.gradcheck` in float64;
  - on a machine with a GPU, forward and backward again on CUDA.

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

# Revealed one at a time by `trainer hint`: the idea, then the math for one
# element, then the complete formula in math notation. No code: that is the
# solution's (`trainer validate` warns about code in the last hint).
hints:
  - "The chain rule: multiply grad_output by the local derivative."
  - "For one element, y_i = 3·x_i: what is dy_i/dx_i?"
  - "dL/dx_i = 3 · g_i, with g = grad_output."

# Multiple choice; `answer` counts from 1; the explanation is shown either way.
# Spread the right answers over the positions, and do not make the right one
# the longest choice (`trainer validate` warns).
quiz:
  - question: For x of shape (4, 5), what shape does backward's gradient for x have?
    choices: ["(20, 20), the Jacobian", "(4, 5), like x", "(), a scalar"]
    answer: 2
    explanation: backward returns a vector-Jacobian product, shaped like its input.
  - question: With an upstream gradient of 0.5, what does y = 3·x send back to x?
    choices: ["3", "0.5", "1.5"]
    answer: 3
    explanation: 3 times the upstream gradient; 3 alone forgets grad_output.
  - question: What must forward save for the backward of y = 3·x?
    choices: ["x, to evaluate the slope at it", "Nothing: the slope is 3 everywhere", "y"]
    answer: 2
    explanation: the slope of 3·x does not depend on x, so backward needs no tensor at all.

tolerances: {{}}          # defaults: float32 rtol 1e-5 atol 1e-6; float64 rtol 1e-7 atol 1e-10

notes: |
  Shown with the solution after a pass: what to notice.

# The worked derivation: shown under the first passing check and by `trainer
# explain`. Math, no code, lines of at most 72 columns (shown as laid out, never
# reflowed): from the forward's definition to the formula backward computes, then
# where learners go wrong. Unicode math renders in every terminal: ∂ Σ · ᵀ ⊙ ².
derivation: |
  Forward, element by element:  y = 3·x.  Write g = ∂L/∂y (grad_output).

  The local slope is dy/dx = 3, the same everywhere. Each y_i depends
  on x_i alone, so ∂L/∂x_i = Σ_j g_j · ∂y_j/∂x_i = 3 · g_i:
    ∂L/∂x = 3 · g.

  Where learners go wrong:
  • 3 alone is the slope, not ∂L/∂x: multiply by g.
  • Nothing needs saving: the slope does not depend on x.

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
