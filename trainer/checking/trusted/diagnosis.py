"""Name the classic mistake behind a wrong gradient, the way an interviewer would.

Given the true gradient and the learner's (and, where available, both again
for a second upstream gradient), try each rule of the table in turn:
forgetting ``grad_output``, a flipped sign, a wrong gradient the spec names, a
mask, a constant factor, a transpose, a missing sum over the batch, all zeros.
When none fits, say so plainly. The words live in :mod:`trainer.vocabulary`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from trainer.checking.trusted.compare import shape_text
from trainer.vocabulary import MISTAKES

# Kept before any learner code runs, so a patched torch cannot change a diagnosis.
_allclose = torch.allclose
_topk = torch.topk
_unravel = torch.unravel_index

VIEW_SIZE = 5


@dataclass(frozen=True)
class NamedMistake:
    """A classic mistake recognised in one input's gradient (or by a stage itself): its id
    in :data:`trainer.vocabulary.MISTAKES`, the forward parameter, the words, and where
    the values differ most. Distinct from :class:`trainer.api.Diagnosis`, a report's
    first failure in words for the Python API."""

    mistake: str
    input: str
    text: str
    view: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"mistake": self.mistake, "input": self.input, "text": self.text, "view": self.view}


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool:
    return a.shape == b.shape and bool(_allclose(a, b, rtol=rtol, atol=atol, equal_nan=False))


def compact_view(expected: torch.Tensor, got: torch.Tensor) -> list[dict[str, Any]]:
    """At most five elements, the largest errors first: index, expected, got."""
    if expected.shape != got.shape or expected.numel() == 0:
        return []
    error = (got.double() - expected.double()).abs().reshape(-1)
    error = torch.nan_to_num(error, nan=float("inf"))
    count = min(VIEW_SIZE, error.numel())
    view = []
    for flat in _topk(error, count).indices.tolist():
        index = [int(i) for i in _unravel(torch.tensor(flat), expected.shape)]
        view.append(
            {
                "index": index,
                "expected": float(expected.reshape(-1)[flat]),
                "got": float(got.reshape(-1)[flat]),
            }
        )
    return view


def _is_masked(want: torch.Tensor, upstream: torch.Tensor, atol: float) -> bool:
    """Every element either zero or the upstream gradient itself: a mask, nothing smooth."""
    g = upstream.detach().double()
    return bool(((want.abs() <= atol) | ((want - g).abs() <= atol + 1e-4 * g.abs())).all())


@dataclass(frozen=True)
class Evidence:
    """What a rule may look at: the right and the learner's gradient (float64), and more."""

    want: torch.Tensor
    have: torch.Tensor
    rtol: float
    atol: float
    # The same gradients for a second upstream gradient: an ignored grad_output shows.
    want_other: torch.Tensor | None = None
    have_other: torch.Tensor | None = None
    upstream: torch.Tensor | None = None
    # Wrong gradients the spec or the plan knows by name: mistake -> each (words, gradient).
    known: Mapping[str, Sequence[tuple[str, torch.Tensor]]] = field(default_factory=dict)

    def close(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        return _close(a, b, self.rtol, self.atol)


Rule = Callable[[Evidence], tuple[str, str] | None]


def _transposed_shape(e: Evidence) -> tuple[str, str] | None:
    swapped = e.have.dim() >= 2 and tuple(e.have.mT.shape) == tuple(e.want.shape)
    if swapped and e.close(e.have.mT, e.want):
        return "transposed", f"{MISTAKES['transposed']} (shape {shape_text(e.have.shape)})"
    return None


def _extra_dimension(e: Evidence) -> tuple[str, str] | None:
    if e.have.numel() == e.want.numel() and e.close(e.have.reshape(e.want.shape), e.want):
        return "wrong_shape", "drop the extra size-1 dimension (sum without keepdim, or squeeze)"
    return None


def _not_summed(e: Evidence) -> tuple[str, str] | None:
    if e.have.numel() <= e.want.numel():
        return None
    try:
        summed = e.have.sum_to_size(e.want.shape)
    except RuntimeError:
        return None
    return (
        ("not_summed_over_batch", MISTAKES["not_summed_over_batch"])
        if e.close(summed, e.want)
        else None
    )


def _all_zeros(e: Evidence) -> tuple[str, str] | None:
    if float(e.want.abs().max()) > e.atol and float(e.have.abs().max()) == 0.0:
        return "all_zeros", MISTAKES["all_zeros"]
    return None


def _no_grad_output(e: Evidence) -> tuple[str, str] | None:
    if (
        e.want_other is not None
        and e.have_other is not None
        and e.have_other.shape == e.have.shape
        and e.close(e.have_other, e.have)
        and not e.close(e.want_other, e.want)
    ):
        return "no_grad_output", MISTAKES["no_grad_output"]
    return None


def _sign_flipped(e: Evidence) -> tuple[str, str] | None:
    return ("sign_flipped", MISTAKES["sign_flipped"]) if e.close(e.have, -e.want) else None


def _known(e: Evidence) -> tuple[str, str] | None:
    """A wrong gradient the spec (or the plan) names: the learner's matches it."""
    for mistake, alternatives in e.known.items():
        for words, gradient in alternatives:
            if gradient.shape == e.have.shape and e.close(e.have, gradient.double()):
                return mistake, words
    return None


def _non_finite(e: Evidence) -> tuple[str, str] | None:
    """inf or nan where the right gradient is finite: a 0/0, a log of 0, an overflow."""
    bad = ~torch.isfinite(e.have) & torch.isfinite(e.want)
    if not bool(bad.any()):
        return None
    kinds = sorted({"nan" if bool(torch.isnan(v)) else "inf" for v in e.have[bad].flatten()[:64]})
    return (
        "non_finite",
        f"{MISTAKES['non_finite']} ({' and '.join(kinds)}: a 0/0, a log of 0, an exp that "
        "overflows?)",
    )


def _inverted_mask(e: Evidence) -> tuple[str, str] | None:
    if e.upstream is None or e.upstream.shape != e.want.shape:
        return None
    g = e.upstream.detach().double()
    if (
        _is_masked(e.want, g, e.atol)
        and e.close(e.have + e.want, g)
        and bool((e.want.abs() > e.atol).any())
    ):
        return "inverted_mask", MISTAKES["inverted_mask"]
    return None


def _missing_mask(e: Evidence) -> tuple[str, str] | None:
    flat = e.want.abs() <= e.atol
    if bool(flat.any()) and not bool(flat.all()):
        right_where_sloped = e.close(e.have[~flat], e.want[~flat])
        if right_where_sloped and float(e.have[flat].abs().max()) > e.atol:
            return "missing_mask", MISTAKES["missing_mask"]
    return None


def _constant_factor(e: Evidence) -> tuple[str, str] | None:
    denominator = float((e.want * e.want).sum())
    if denominator <= 0:
        return None
    factor = float((e.have * e.want).sum()) / denominator
    if abs(factor - 1) > 1e-3 and abs(factor) > 1e-6 and e.close(e.have, factor * e.want):
        return (
            "constant_factor",
            f"the gradient is off by a constant factor: {factor:.4g} times the right one",
        )
    return None


def _transposed_square(e: Evidence) -> tuple[str, str] | None:
    if e.have.dim() >= 2 and e.have.shape[-1] == e.have.shape[-2] and e.close(e.have.mT, e.want):
        return "transposed", MISTAKES["transposed"]
    return None


# The rules, in the order they are tried: the first that fits names the mistake.
SHAPE_RULES: tuple[Rule, ...] = (_transposed_shape, _extra_dimension, _not_summed)
VALUE_RULES: tuple[Rule, ...] = (
    _all_zeros,
    _no_grad_output,
    _sign_flipped,
    _known,
    _non_finite,
    _inverted_mask,
    _missing_mask,
    _constant_factor,
    _transposed_square,
)


def classify(
    expected: torch.Tensor,
    got: torch.Tensor,
    *,
    expected_other: torch.Tensor | None = None,
    got_other: torch.Tensor | None = None,
    upstream: torch.Tensor | None = None,
    known: Mapping[str, Sequence[tuple[str, torch.Tensor]]] | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> tuple[str, str]:
    """The mistake that turns ``expected`` into ``got``, with a sentence about it: the
    first rule of :data:`SHAPE_RULES` (shapes differ) or :data:`VALUE_RULES` that fits."""
    evidence = Evidence(
        want=expected.detach().double(),
        have=got.detach().double(),
        rtol=rtol,
        atol=atol,
        want_other=expected_other.detach().double() if expected_other is not None else None,
        have_other=got_other.detach().double() if got_other is not None else None,
        upstream=upstream,
        known=known or {},
    )
    rules = SHAPE_RULES if evidence.have.shape != evidence.want.shape else VALUE_RULES
    for rule in rules:
        found = rule(evidence)
        if found is not None:
            return found
    return "unknown", MISTAKES["unknown"]


def diagnose(
    name: str,
    expected: torch.Tensor,
    got: torch.Tensor,
    *,
    expected_other: torch.Tensor | None = None,
    got_other: torch.Tensor | None = None,
    upstream: torch.Tensor | None = None,
    known: Mapping[str, Sequence[tuple[str, torch.Tensor]]] | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> NamedMistake:
    mistake, text = classify(
        expected,
        got,
        expected_other=expected_other,
        got_other=got_other,
        upstream=upstream,
        known=known,
        rtol=rtol,
        atol=atol,
    )
    return NamedMistake(mistake=mistake, input=name, text=text, view=compact_view(expected, got))


def named(mistake: str, text: str, input_name: str = "") -> NamedMistake:
    """A mistake a stage recognised itself."""
    return NamedMistake(mistake=mistake, input=input_name, text=text)


def view_lines(diagnosis: NamedMistake, value: torch.Tensor | None = None) -> list[str]:
    """The compact view as short lines for the table; with ``value`` (the input the
    gradient belongs to, when it has the gradient's shape), the input there too."""
    lines = []
    for item in diagnosis.view:
        index = "[" + ", ".join(map(str, item["index"])) + "]"
        at = ""
        if value is not None and value.is_floating_point():
            at = f" (at {diagnosis.input} = {float(value[tuple(item['index'])]):.6g})"
        lines.append(
            f"  {diagnosis.input}{index}: expected {item['expected']:.6g}, "
            f"got {item['got']:.6g}{at}"
        )
    return lines
