"""The comparison of a learner's tensor with the expected one, in-process."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from trainer.checking.trusted.compare import compare_tensor
from trainer.spec import Tolerance

TOLERANCE = Tolerance(rtol=1e-3, atol=1e-5)
SPECIAL = [0.0, 1.0, -2.5, 1e-6, 1e30, math.inf, -math.inf, math.nan]


def _out_of_tolerance(got: float, want: float, slack: float = 0.0) -> bool:
    """The rule, element by element: NaN only where NaN is expected, infinities equal,
    else |got - want| <= atol + rtol * |want| + slack."""
    if math.isnan(got) or math.isnan(want):
        return math.isnan(got) != math.isnan(want)
    if math.isinf(got) and got == want:
        return False
    excess = abs(got - want) - (TOLERANCE.atol + TOLERANCE.rtol * abs(want) + slack)
    return math.isnan(excess) or excess > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_pair_of_special_values_is_judged_by_the_tolerance_rule(dtype: torch.dtype) -> None:
    pairs = list(itertools.product(SPECIAL, SPECIAL))
    got = torch.tensor([g for g, _ in pairs], dtype=dtype)
    want = torch.tensor([w for _, w in pairs], dtype=dtype)
    for index, (g, w) in enumerate(pairs):
        single = compare_tensor("x", want[index : index + 1], got[index : index + 1], TOLERANCE)
        expected_bad = _out_of_tolerance(float(got[index]), float(want[index]))
        assert (single is not None) == expected_bad, (g, w)
    whole = compare_tensor("x", want, got, TOLERANCE)
    wrong = [i for i, (g, w) in enumerate(pairs) if _out_of_tolerance(g, w)]
    assert whole is not None and whole.wrong is not None
    assert whole.wrong.nonzero().flatten().tolist() == wrong
    assert whole.summary == f"x is wrong at {len(wrong)} of {len(pairs)} elements"


def test_values_just_inside_and_just_outside_the_tolerance_pass_and_fail() -> None:
    want = torch.linspace(-3, 3, 101, dtype=torch.float64)
    allowed = TOLERANCE.atol + TOLERANCE.rtol * want.abs()
    assert compare_tensor("x", want, want + 0.99 * allowed, TOLERANCE) is None
    assert compare_tensor("x", want, want - 0.99 * allowed, TOLERANCE) is None
    outside = want.clone()
    outside[37] += 1.01 * allowed[37]
    mismatch = compare_tensor("x", want, outside, TOLERANCE)
    assert mismatch is not None and mismatch.index == (37,)
    assert "wrong at 1 of 101 elements" in mismatch.summary


def test_slack_widens_the_tolerance_element_by_element() -> None:
    want = torch.zeros(4, dtype=torch.float64)
    got = torch.tensor([0.0, 0.1, 0.0, 0.0], dtype=torch.float64)
    assert compare_tensor("x", want, got, TOLERANCE) is not None
    slack = torch.tensor([0.0, 0.2, 0.0, 0.0], dtype=torch.float64)
    assert compare_tensor("x", want, got, TOLERANCE, slack=slack) is None
    assert compare_tensor("x", want, got, TOLERANCE, slack=torch.tensor(0.2)) is None


def test_a_single_nan_or_infinity_among_many_right_values_fails_at_its_index() -> None:
    want = torch.randn(50_000, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    for bad_value in (math.nan, math.inf, -math.inf):
        got = want.clone()
        got[12_345] = bad_value
        mismatch = compare_tensor("grad", want, got, TOLERANCE)
        assert mismatch is not None and mismatch.index == (12_345,), bad_value
        assert "wrong at 1 of 50000 elements" in mismatch.summary


def test_attributes_are_compared_before_values() -> None:
    want = torch.zeros(3)
    assert "not a tensor" in compare_tensor("x", want, [0, 0, 0], TOLERANCE).summary  # type: ignore[union-attr]
    assert "shape (4,)" in compare_tensor("x", want, torch.zeros(4), TOLERANCE).summary  # type: ignore[union-attr]
    mismatch = compare_tensor("x", want, torch.zeros(3, dtype=torch.float64), TOLERANCE)
    assert mismatch is not None and "dtype torch.float64" in mismatch.summary
    assert compare_tensor("x", torch.zeros(0), torch.zeros(0), TOLERANCE) is None
