"""Inputs the spec allows but random draws never produce (issue 27, classes 1, 2 and 4):
for each, a wrong file that fails for the stated reason and a right file, in an odd
style, that passes. All checks share the worker's warm server.

Which structured value set catches which file (trusted/structured.py):
- a shared offset (float32): a one-pass variance;
- near-constant values (float64): a one-pass variance even in float64;
- whole rows and channels of exact zeros: a 0/0 on a padding row;
- tensors at the bounds of their domain: a mask filled with -1e4;
- ties at every pair of positions of a window: a tie rule other than the statement's.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import pytest
import torch

from tests.conftest import CATALOG, REPO, shared_service
from trainer.checking.report import CheckReport, Verdict
from trainer.checking.runner import CheckingService, run_check
from trainer.checking.trusted import structured
from trainer.checking.trusted.plan import build_plan

WRONG = REPO / "solutions" / "wrong"


@pytest.fixture
def service() -> CheckingService:
    return shared_service()


def check(service: CheckingService, tmp_path: Path, exercise: str, source: str) -> CheckReport:
    path = tmp_path / f"{exercise}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return run_check(CATALOG.get(exercise), path, service=service)


def failure(report: CheckReport) -> tuple[str, str]:
    failed = report.first_failure
    assert failed is not None, "passed"
    return failed.id, failed.message


def passes(report: CheckReport) -> None:
    assert report.passed, [(s.id, s.message) for s in report.stages if s.verdict is Verdict.FAIL]


# 1. Structured values ----------------------------------------------------------------------

BATCH_NORM_TWO_PASS = """\
import torch


class MyBatchNorm(torch.autograd.Function):
    # Statistics as sums over a (C, M) view, the gradient in its "sum" form:
    # dx = r / M * (M h - sum(h) - xhat * sum(h xhat)).
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        channels = x.transpose(0, 1).reshape(x.shape[1], -1)  # (C, M)
        count = channels.shape[1]
        mean = channels.sum(1, keepdim=True) / count
        centred = channels - mean
        var = (centred * centred).sum(1, keepdim=True) / count
        r = 1.0 / torch.sqrt(var + eps)
        xhat = centred * r
        ctx.save_for_backward(xhat, r, weight)
        ctx.x_shape = x.shape
        y = xhat * weight[:, None] + bias[:, None]
        moved = (x.shape[1], x.shape[0], *x.shape[2:])
        return y.reshape(moved).transpose(0, 1)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, r, weight = ctx.saved_tensors
        g = grad_output.transpose(0, 1).reshape(xhat.shape)
        count = xhat.shape[1]
        h = g * weight[:, None]
        dx = r / count * (count * h - h.sum(1, keepdim=True) - xhat * (h * xhat).sum(1, keepdim=True))
        shape = ctx.x_shape
        dx = dx.reshape((shape[1], shape[0], *shape[2:])).transpose(0, 1)
        return dx, (g * xhat).sum(1), g.sum(1), None
"""


def test_a_one_pass_variance_fails_on_a_shared_offset_in_float32(service, tmp_path):
    source = (WRONG / "batch_norm" / "one_pass_variance.py").read_text()
    stage, message = failure(check(service, tmp_path, "batch_norm", source))
    assert stage == "stability"
    # The run's note names the structured values: "(float32, x near 600 (a shared offset), at …".
    assert re.search(r"\(float32, .*?at x\[[\d, ]+\] = (59[89]|60[012])", message), message  # ≈ 600
    assert "a shared offset" in message and "cancellation" in message, message


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_two_pass_batch_norm_in_float32_passes_on_a_shared_offset(service, tmp_path, seed):
    """Its float32 mean is off by an ulp of 600 or so: forgiven on every draw (seed 2
    fails if structured runs forgive only what the other domain runs do)."""
    path = tmp_path / "batch_norm.py"
    path.write_text(BATCH_NORM_TWO_PASS, encoding="utf-8")
    passes(run_check(CATALOG.get("batch_norm"), path, service=service, seed=seed))


ONE_PASS_IN_FLOAT64 = """\
import torch


class MyBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        wide = x.double()  # statistics in float64, whatever the input
        mean = wide.mean(dim=dims, keepdim=True)
        var = {variance}
        rstd = torch.rsqrt(var + eps)
        xhat = ((wide - mean) * rstd).to(x.dtype)
        rstd = rstd.to(x.dtype)
        ctx.save_for_backward(xhat, rstd, weight)
        return xhat * weight.reshape(shape) + bias.reshape(shape)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, rstd, weight = ctx.saved_tensors
        dims = [0, *range(2, grad_output.dim())]
        h = grad_output * weight.reshape(rstd.shape)
        mean_h = h.mean(dim=dims, keepdim=True)
        grad_x = rstd * (h - mean_h - xhat * (h * xhat).mean(dim=dims, keepdim=True))
        return grad_x, (grad_output * xhat).sum(dim=dims), grad_output.sum(dim=dims), None
"""


def test_a_one_pass_variance_in_float64_fails_on_near_constant_values(service, tmp_path):
    """Accumulating in float64 saves the one-pass variance from a shared offset in
    float32, not from a spread of a millionth of the values."""
    source = ONE_PASS_IN_FLOAT64.format(
        variance="(wide * wide).mean(dim=dims, keepdim=True) - mean * mean"
    )
    stage, message = failure(check(service, tmp_path, "batch_norm", source))
    assert stage == "stability"
    assert re.search(r"\(float64, .*?at x\[[\d, ]+\] = (600|599\.999)\b", message), message
    assert "near-constant values" in message, message


def test_a_two_pass_variance_in_float64_passes_on_near_constant_values(service, tmp_path):
    source = ONE_PASS_IN_FLOAT64.format(
        variance="((wide - mean) ** 2).mean(dim=dims, keepdim=True)"
    )
    passes(check(service, tmp_path, "batch_norm", source))


RMS_NORM_BY_THE_CUBE = """\
import torch


class MyRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ms = torch.mean(x**2, dim=-1, keepdim=True)
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        return weight * x / torch.sqrt(ms + ctx.eps)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        r = (torch.mean(x**2, dim=-1, keepdim=True) + ctx.eps) ** -0.5
        h = grad_output * weight
        grad_x = r * h - x * r**3 * torch.mean(h * x, dim=-1, keepdim=True)
        grad_w = torch.einsum("...d,...d->d", grad_output, x * r)
        return grad_x, grad_w, None
"""


def test_a_projection_onto_x_fails_with_nan_on_a_row_of_zeros(service, tmp_path):
    source = (WRONG / "rms_norm" / "projection_over_norm.py").read_text()
    report = check(service, tmp_path, "rms_norm", source)
    stage, message = failure(report)
    assert stage == "stability"
    assert "has nan at" in message and "] = 0," in message
    assert report.first_failure is not None
    assert (report.first_failure.diagnosis or {}).get("mistake") == "non_finite"


def test_an_rms_norm_written_with_the_cube_of_r_passes_on_rows_of_zeros(service, tmp_path):
    passes(check(service, tmp_path, "rms_norm", RMS_NORM_BY_THE_CUBE))


ATTENTION_EINSUM = """\
import math

import torch


def probabilities(q, k, causal):
    scores = torch.einsum("...td,...ud->...tu", q, k) / math.sqrt(q.shape[-1])
    if causal:
        n = scores.shape[-1]
        visible = torch.ones(n, n, dtype=torch.bool).tril()
        scores = torch.where(visible, scores, float("-inf"))
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    weights = shifted.exp()
    return weights / weights.sum(dim=-1, keepdim=True)


class MyAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        p = probabilities(q, k, causal)
        ctx.save_for_backward(q, k, v)
        ctx.causal = causal
        return torch.einsum("...tu,...ud->...td", p, v)

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v = ctx.saved_tensors
        p = probabilities(q, k, ctx.causal)
        dp = torch.einsum("...td,...ud->...tu", grad_output, v)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
        return (
            torch.einsum("...tu,...ud->...td", ds, k),
            torch.einsum("...tu,...td->...ud", ds, q),
            torch.einsum("...tu,...td->...ud", p, grad_output),
            None,
        )
"""


def test_a_mask_filled_with_minus_1e4_fails_where_every_visible_score_is_lower(service, tmp_path):
    source = (WRONG / "attention" / "mask_fill_minus_1e4.py").read_text()
    stage, message = failure(check(service, tmp_path, "attention", source))
    assert stage == "stability"
    assert re.search(r"\(float64, .*?at q\[[\d, ]+\] = 100, k\[[\d, ]+\] = -100", message), message


def test_attention_recomputed_with_einsum_and_minus_inf_passes_at_the_bounds(service, tmp_path):
    passes(check(service, tmp_path, "attention", ATTENTION_EINSUM))


# 2. Ties ------------------------------------------------------------------------------------

MAX_POOL_LOOPS = """\
import torch


class MyMaxPool2d(torch.autograd.Function):
    # Row by row, column by column: a later element must be strictly larger to win.
    @staticmethod
    def forward(ctx, x, kernel_size, stride):
        n, c, h, w = x.shape
        ho, wo = (h - kernel_size) // stride + 1, (w - kernel_size) // stride + 1
        out = x.new_empty(n, c, ho, wo)
        winners = []
        for i in range(ho):
            for j in range(wo):
                best = x[:, :, i * stride, j * stride].clone()
                at = torch.zeros(n, c, 2, dtype=torch.long)
                at[..., 0], at[..., 1] = i * stride, j * stride
                for di in range(kernel_size):
                    for dj in range(kernel_size):
                        value = x[:, :, i * stride + di, j * stride + dj]
                        better = value > best
                        best = torch.where(better, value, best)
                        at[..., 0] = torch.where(better, i * stride + di, at[..., 0])
                        at[..., 1] = torch.where(better, j * stride + dj, at[..., 1])
                out[:, :, i, j] = best
                winners.append(at)
        ctx.save_for_backward(torch.stack(winners, 2))
        ctx.shape = x.shape
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (winners,) = ctx.saved_tensors
        n, c, h, w = ctx.shape
        flat = (winners[..., 0] * w + winners[..., 1]).reshape(n, c, -1)
        grad = grad_output.new_zeros(n, c, h * w)
        grad.scatter_add_(2, flat, grad_output.reshape(n, c, -1))
        return grad.reshape(n, c, h, w), None, None
"""


def test_a_column_major_tie_rule_fails_on_ties_away_from_the_corner(service, tmp_path):
    source = (WRONG / "max_pool2d" / "ties_column_major.py").read_text()
    stage, message = failure(check(service, tmp_path, "max_pool2d", source))
    assert stage == "stability"
    assert "grad for `x` is wrong" in message and "(float64, " in message and "at x[" in message
    assert "tied at pairs of positions" in message, message


def test_a_max_pool_that_scans_row_by_row_passes_every_tie(service, tmp_path):
    passes(check(service, tmp_path, "max_pool2d", MAX_POOL_LOOPS))


def test_the_ties_cover_every_pair_of_positions_of_every_window_size():
    """Max pooling: for every kernel size in the cases, each pair of positions of a
    window is tied at the window's top in some run."""
    exercise = CATALOG.get("max_pool2d")
    plan = build_plan(exercise, 0)
    tied = [r for r in plan.domain_runs if "tied at pairs" in r.note]
    covered: set[tuple[int, tuple[int, int], tuple[int, int]]] = set()
    for run in tied:
        x, k, s = run.args
        assert isinstance(x, torch.Tensor) and isinstance(k, int) and isinstance(s, int)
        windows = x.unfold(2, k, s).unfold(3, k, s).reshape(*x.shape[:2], -1, k * k)
        for window in windows.reshape(-1, k * k):
            top = window == window.max()
            if int(top.sum()) == 2:
                first, second = (int(i) for i in top.nonzero().reshape(-1))
                covered.add((k, divmod(first, k), divmod(second, k)))
    for k in {c.values["kernel_size"] for c in exercise.cases} - {1}:
        assert isinstance(k, int)
        cells = list(itertools.product(range(k), repeat=2))
        for pair in itertools.combinations(cells, 2):
            assert (k, *pair) in covered, (k, pair)


def test_topk_ties_straddle_the_kth_place_at_every_pair_of_positions():
    exercise = CATALOG.get("topk")
    plan = build_plan(exercise, 0)
    assert plan.tie_runs and not any("tied" in r.note for r in plan.domain_runs)
    for case in exercise.cases:
        k, shape = case.values["k"], case.values["x"]
        assert isinstance(k, int) and isinstance(shape, tuple)
        n = shape[-1]
        if n < 2 or k == n:  # all chosen: no place to straddle (the rounded ties see the order)
            continue
        seen = set()
        for run in plan.tie_runs:
            if run.case is not case:
                continue
            (x, _) = run.args
            assert isinstance(x, torch.Tensor)
            for row in x.reshape(-1, n):
                for i, j in itertools.combinations(range(n), 2):
                    if row[i] == row[j]:
                        seen.add((i, j, int((row > row[i]).sum())))
        for i, j in itertools.combinations(range(n), 2):
            assert (i, j, 0) in seen, (case.values, i, j)
            if k - 1 <= n - 2:
                assert (i, j, k - 1) in seen, (case.values, i, j)  # one in, one out


TOPK_BY_STABLE_SORT = """\
import torch


class TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        order = torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :k]
        values = x.gather(-1, order)
        ctx.mark_non_differentiable(order)
        ctx.save_for_backward(order)
        ctx.x_shape = x.shape
        return values, order

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        (order,) = ctx.saved_tensors
        grad = grad_values.new_zeros(ctx.x_shape)
        return grad.scatter_add(-1, order, grad_values), None
"""


def test_a_topk_that_breaks_ties_its_own_way_passes_every_tie(service, tmp_path):
    """Which of tied elements forward reports is its own choice (stable sort here, not
    torch.topk's): the tie runs check that backward follows it, never that it is torch's."""
    passes(check(service, tmp_path, "topk", TOPK_BY_STABLE_SORT))


def test_windows_are_found_only_where_an_output_copies_one_of_its_inputs():
    x = torch.arange(12.0).reshape(3, 4)
    found = structured.windows(lambda t: t.amax(-1), x)
    assert found is not None and sorted(w.positions for w in found) == [
        (0, 1, 2, 3),
        (4, 5, 6, 7),
        (8, 9, 10, 11),
    ]
    assert structured.windows(lambda t: t.softmax(-1), x) is None
    assert structured.windows(lambda t: t.relu(), x) is None  # one input per output


# 4. Shapes ------------------------------------------------------------------------------------

BROADCAST_BY_SUM_TO_SIZE = """\
import torch


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = (grad_output @ b.mT).sum_to_size(a.shape)
        grad_b = (a.mT @ grad_output).sum_to_size(b.shape)
        return grad_a, grad_b
"""


def test_a_gradient_summed_over_one_batch_dimension_fails_for_a_4d_a_and_a_2d_b(service, tmp_path):
    source = (WRONG / "broadcast_matmul" / "sums_one_batch_dim.py").read_text()
    stage, message = failure(check(service, tmp_path, "broadcast_matmul", source))
    assert stage == "contract"
    assert "grad for `b` has shape (3, 4, 3)" in message and "a: (2, 3, 2, 4), b: (4, 3)" in message


def test_a_broadcast_matmul_reduced_with_sum_to_size_passes_every_pattern(service, tmp_path):
    passes(check(service, tmp_path, "broadcast_matmul", BROADCAST_BY_SUM_TO_SIZE))


def test_broadcast_matmul_cases_cover_each_side_and_rank_differences_up_to_two():
    patterns = set()
    for case in CATALOG.get("broadcast_matmul").cases:
        a, b = case.values["a"], case.values["b"]
        assert isinstance(a, tuple) and isinstance(b, tuple)
        batch_a, batch_b = a[:-2], b[:-2]
        width = max(len(batch_a), len(batch_b))
        padded_a = (1,) * (width - len(batch_a)) + batch_a
        padded_b = (1,) * (width - len(batch_b)) + batch_b
        a_stretches = any(x < y for x, y in zip(padded_a, padded_b, strict=True))
        b_stretches = any(y < x for x, y in zip(padded_a, padded_b, strict=True))
        patterns.add((len(a) - len(b), a_stretches, b_stretches))
    for difference in (-2, -1, 1, 2):  # the smaller side always stretches
        assert (difference, difference < 0, difference > 0) in patterns, difference
    for stretching in [(True, False), (False, True), (True, True), (False, False)]:
        assert (0, *stretching) in patterns, stretching


ATTENTION_GROWING_MASK = ATTENTION_EINSUM.replace(
    "        visible = torch.ones(n, n, dtype=torch.bool).tril()\n",
    "        visible = MASKS.setdefault(n, torch.ones(n, n, dtype=torch.bool).tril())\n",
).replace("import torch\n", "import torch\n\nMASKS = {}\n", 1)


def test_a_mask_buffer_of_256_positions_fails_on_the_long_case(service, tmp_path):
    source = (WRONG / "attention" / "mask_buffer_256.py").read_text()
    stage, message = failure(check(service, tmp_path, "attention", source))
    assert stage == "forward"
    assert "q: (1, 1100, 4)" in message


def test_attention_with_a_mask_cached_per_length_passes_the_long_case(service, tmp_path):
    passes(check(service, tmp_path, "attention", ATTENTION_GROWING_MASK))


def test_attention_runs_a_causal_case_past_every_common_buffer_size():
    lengths = [
        c.values["q"][-2]  # type: ignore[index]
        for c in CATALOG.get("attention").cases
        if c.values["causal"]
    ]
    assert max(lengths) > 1024
