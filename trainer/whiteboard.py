"""The whiteboard: a gradient written as a formula, judged on the checker's inputs.

A formula (:mod:`trainer.formula`) is evaluated (:mod:`trainer.formula_torch`) in
float64 on the checker's own random inputs (:func:`reference_runs`: one run per
small case of the spec, with two random upstream gradients each), and compared
with the reference's gradient. A wrong one is named like a wrong backward: the
checker's diagnosis (forgets ``g``, sign, constant factor, transpose, missing sum,
the spec's own mistakes) in the words of a formula.

``python -m trainer.whiteboard SPEC...`` checks the ``derive`` section of specs
for `trainer validate`, which imports no torch itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from trainer.checking.trusted.diagnosis import classify, compact_view
from trainer.checking.trusted.plan import Run, reference_runs
from trainer.formula import EvaluationError, FormulaError, Node, output_names, understand
from trainer.formula_torch import DTYPE, Scalar, Scope, as_gradient, evaluate, shape_text
from trainer.spec import Derivation, Exercise

RTOL = 1e-6  # equivalent forms differ by rounding only; a mistake by far more
ATOL = 1e-9


# A verdict.


@dataclass(frozen=True)
class Right:
    runs: int  # the cases it was right on


@dataclass(frozen=True)
class Wrong:
    mistake: str  # a mistake id (the checker's, or the spec's), or "unknown"
    words: str  # what the learner reads
    case: str  # the first case it is wrong on, e.g. "x: (4, 5)"
    wrong_runs: int
    runs: int
    view: tuple[str, ...] = ()  # a few elements, expected against got
    error: EvaluationError | None = None  # where it could not be computed


@dataclass(frozen=True)
class NotUnderstood:
    error: FormulaError


Verdict = Right | Wrong | NotUnderstood


def _words(mistake: str, default: str, name: str, factor: float) -> str:
    """A diagnosis in the words of a formula: what the formula does, not backward."""
    said = {
        "no_grad_output": "your formula forgets g: it gives the same whatever the upstream "
        "gradient is, and the chain rule multiplies by it",
        "sign_flipped": "your formula has the sign flipped: it is minus the gradient",
        "all_zeros": "your formula is zero everywhere",
        "transposed": "your formula gives the transpose of the gradient",
        "not_summed_over_batch": f"your formula is not summed over the dimensions {name} is "
        "broadcast along (or reused over): each use adds to its gradient, so sum them",
        "missing_mask": "your formula lets the gradient through where the function is flat: "
        "a factor such as (x > 0) is missing or wrong",
        "inverted_mask": "your formula's mask is inverted: the gradient flows exactly where "
        "it should be zero",
        "constant_factor": f"your formula is off by a constant factor: {factor:.4g} times the "
        "gradient",
        "ignores_an_upstream": "your formula leaves out an upstream gradient: each output "
        "the loss uses adds its own term to the gradient, so each of g1, g2… appears",
        "unknown": "your formula does not give the gradient, and no classic mistake fits",
    }
    return said.get(mistake, default)


class Whiteboard:
    """One exercise's derivation: its names, and the runs a formula is held to."""

    def __init__(self, exercise: Exercise, seed: int = 0) -> None:
        if exercise.derive is None:
            raise ValueError(f"{exercise.id} has no derive section")
        self.exercise = exercise
        self.derivation: Derivation = exercise.derive
        self.runs: tuple[Run, ...] = reference_runs(exercise, seed)
        # Each run's names, with its first and with its second upstream gradient.
        self.scopes = [
            (self._scope(r, r.upstream), self._scope(r, r.upstream_other)) for r in self.runs
        ]

    def _scope(
        self, run: Run, upstream: Sequence[torch.Tensor]
    ) -> dict[str, torch.Tensor | Scalar]:
        scope: dict[str, torch.Tensor | Scalar] = {}
        for param, value in zip(run.params, run.args, strict=True):
            if param.name not in self.derivation.scope:
                continue
            if isinstance(value, torch.Tensor):
                scope[param.name] = value.to(DTYPE)
            elif isinstance(value, float | int | bool):
                scope[param.name] = value
        pairs = output_names(len(run.expected_outputs), [p.name for p in run.params])
        for (y, g), output, gradient in zip(pairs, run.expected_outputs, upstream, strict=True):
            # An integer output (top-k's indices) as float64 too, like an int input.
            scope[y], scope[g] = output.to(DTYPE), gradient.to(DTYPE)
        scope["grad_output"] = upstream[0].to(DTYPE)
        for name, text in self.derivation.names.items():
            scope[name] = evaluate(understand(text, list(scope)), scope)
        return scope

    def judge(self, input_name: str, text: str) -> Verdict:
        """Right, wrong (with the nearest classic mistake) or not understood."""
        try:
            node = understand(text, self.derivation.scope)
        except FormulaError as error:
            return NotUnderstood(error)
        return self.judge_node(input_name, node)

    def judge_node(self, input_name: str, node: Node) -> Right | Wrong:
        found: list[Wrong] = []
        for run, (scope, scope_other) in zip(self.runs, self.scopes, strict=True):
            verdict = self._judge_run(run, input_name, node, scope, scope_other)
            if verdict is not None:
                found.append(verdict)
        if not found:
            return Right(len(self.runs))
        first = _most_telling(found)
        return Wrong(
            first.mistake,
            first.words,
            first.case,
            len(found),
            len(self.runs),
            first.view,
            first.error,
        )

    def _judge_run(
        self, run: Run, input_name: str, node: Node, scope: Scope, scope_other: Scope
    ) -> Wrong | None:
        like = scope[input_name]
        assert isinstance(like, torch.Tensor)
        case = run.case.describe()
        expected = run.expected_grads[input_name].to(DTYPE)
        try:
            got = as_gradient(evaluate(node, scope), like)
        except EvaluationError as error:
            words = f"it cannot be computed for {case}: {error.message}"
            return Wrong("cannot_compute", words, case, 1, 1, error=error)
        atol = _atol(expected)
        if _close(got, expected):
            return None
        if (
            got.shape == expected.shape
            and bool(expected.isfinite().all())
            and not bool(got.isfinite().all())
        ):
            words = (
                "your formula is not finite (inf or nan) where the gradient is: a log or a "
                "square root of a negative number, a division by zero, or an overflow"
            )
            return Wrong("non_finite", words, case, 1, 1, _view(input_name, expected, got, like))
        view = _view(input_name, expected, got, like)
        if got.shape != expected.shape:
            view = (
                f"your formula gives {shape_text(got)} for {input_name}, which is {shape_text(expected)}",
            )
        for mistake, alternatives in run.known_wrong.get(input_name, {}).items():
            # The spec's own mistakes, whatever shape the formula keeps (a kept sum).
            for words, wrong in alternatives:
                if wrong.numel() == got.numel() and _close(got.reshape(wrong.shape), wrong):
                    return Wrong(mistake, _words(mistake, words, input_name, 0.0), case, 1, 1, view)
        try:
            got_other: torch.Tensor | None = as_gradient(evaluate(node, scope_other), like)
        except EvaluationError:
            got_other = None
        upstream = run.upstream[0] if run.upstream[0].shape == expected.shape else None
        mistake, default = classify(
            expected,
            got,
            expected_other=run.expected_grads_other[input_name],
            got_other=got_other,
            upstream=upstream,
            known=run.known_wrong.get(input_name, {}),
            rtol=RTOL,
            atol=atol,
        )
        factor = _factor(expected, got)
        if mistake == "constant_factor" and expected.numel() == 1:
            mistake = "unknown"  # one number is a multiple of any other
        if got.shape != expected.shape and mistake == "unknown":
            mistake, view = "wrong_shape", ()
            default = (
                f"your formula gives a {shape_text(got)} value for {input_name}, which is "
                f"{shape_text(expected)}"
            )
        words = _words(mistake, default, input_name, factor)
        return Wrong(mistake, words, case, 1, 1, view)


# Verdicts that compared no values: a shape that does not fit, a formula that cannot be
# computed. A named mistake on some cases tells more than they do.
_NO_VALUES = ("wrong_shape", "cannot_compute")


def _most_telling(found: Sequence[Wrong]) -> Wrong:
    """The wrong case to report: the mistake named on the most cases, when it is named
    on at least as many as "no mistake fits" (one element is a "constant factor" of
    anything; a consistent mistake shows on every case); else the verdict of the most
    cases (a shape that does not fit on most says more than the odd case that fits)."""
    counts: dict[str, int] = {}
    for wrong in found:
        counts[wrong.mistake] = counts.get(wrong.mistake, 0) + 1
    named = [w for w in found if w.mistake not in ("unknown", *_NO_VALUES)]
    if named:
        best = max(named, key=lambda w: counts[w.mistake])
        if counts[best.mistake] >= counts.get("unknown", 0):
            return best
    return max(found, key=lambda w: counts[w.mistake])


def _atol(expected: torch.Tensor) -> float:
    """The absolute tolerance: ATOL at the scale of the gradient's finite values."""
    finite = expected[expected.isfinite()]
    return ATOL * (1 + float(finite.abs().max()) if finite.numel() else 1)


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    atol = _atol(expected)
    return got.shape == expected.shape and bool(torch.allclose(got, expected, rtol=RTOL, atol=atol))


def _factor(expected: torch.Tensor, got: torch.Tensor) -> float:
    if got.shape != expected.shape:
        return 0.0
    denominator = float((expected * expected).sum())
    return float((got * expected).sum()) / denominator if denominator > 0 else 0.0


def _view(
    name: str, expected: torch.Tensor, got: torch.Tensor, like: torch.Tensor
) -> tuple[str, ...]:
    """The largest differences, at most three: where, the input there, expected, got."""
    lines = []
    for item in compact_view(expected, got)[:3]:
        index = tuple(item["index"])
        where = f"{name}[{', '.join(map(str, index))}]"
        at = f" (at {name} = {float(like[index]):.4g})" if like.shape == expected.shape else ""
        lines.append(f"{where}: expected {item['expected']:.6g}, got {item['got']:.6g}{at}")
    return tuple(lines)


def self_check(exercise: Exercise, seeds: Sequence[int] = (0, 1)) -> list[str]:
    """What is wrong with an exercise's ``derive`` section, each as ``derive.<field>:
    <problem>``: every answer must be right, every mistake's formula rejected with its
    mistake named, on the runs of each seed."""
    derivation = exercise.derive
    if derivation is None:
        return []
    problems: list[str] = []
    where = "derive"
    for seed in seeds:
        try:
            board = Whiteboard(exercise, seed)
        except EvaluationError as error:
            problems.append(f"{where}.names: cannot be computed: {error.message}")
            break
        for name, text in derivation.answers.items():
            verdict = board.judge(name, text)
            if not isinstance(verdict, Right):
                said = verdict.words if isinstance(verdict, Wrong) else verdict.error.message
                problems.append(
                    f"{where}.answers.{name}: the evaluator rejects it ({said}, for "
                    f"{verdict.case if isinstance(verdict, Wrong) else 'every case'}); it must "
                    "be the reference's gradient"
                )
        for mistake, formulas in derivation.mistakes.items():
            for name, text in formulas.items():
                verdict = board.judge(name, text)
                if isinstance(verdict, Right):
                    problems.append(
                        f"{where}.mistakes.{mistake}.{name}: the evaluator accepts it as right; "
                        "a mistake's formula must be wrong"
                    )
                elif isinstance(verdict, Wrong) and verdict.mistake != mistake:
                    problems.append(
                        f"{where}.mistakes.{mistake}.{name}: rejected, but named "
                        f"{verdict.mistake} instead of {mistake}"
                    )
    return list(dict.fromkeys(problems))


def main(paths: Sequence[str]) -> int:
    """``python -m trainer.whiteboard SPEC...``: each spec's derive problems as one JSON
    object, path -> problems (none for a spec that does not load: validation says why)."""
    from trainer.errors import SpecError
    from trainer.spec import load_exercise

    problems: dict[str, list[str]] = {}
    for path in paths:
        try:
            problems[path] = self_check(load_exercise(Path(path)))
        except SpecError:
            problems[path] = []  # validation reports the spec itself
    sys.stdout.write(json.dumps(problems) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
