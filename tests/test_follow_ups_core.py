"""The interview core's follow-ups (issue 31 §1): attention, batch_norm, cross_entropy,
conv2d, max_pool2d and gelu.

For each: the reference passes the follow-up, the declared wrong variant passes the
base check and fails the follow-up for the stated reason (its figures against the
budget), and a right answer in another style passes too, so that the budget has room
for more than the reference's way of doing it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO, shared_service
from trainer.checking.report import Verdict
from trainer.checking.runner import run_check
from trainer.spec import load_exercise

WRONG = REPO / "solutions" / "wrong"
Stages = dict[str, tuple[Verdict, str]]


def _stages(exercise_id: str, follow_up: str, file: Path) -> Stages:
    exercise = load_exercise(
        REPO / "exercises" / f"{exercise_id}.yaml", f"exercises/{exercise_id}.yaml"
    ).with_follow_up(follow_up)
    report = run_check(exercise, file, service=shared_service(), catalogue_file=True)
    return {s.id: (s.verdict, s.message) for s in report.stages}


def _fails_only(stages: Stages, stage: str) -> str:
    """The message of ``stage``, which fails while every other stage passes or skips."""
    others = {k: v for k, (v, _) in stages.items() if k != stage and v is Verdict.FAIL}
    assert not others, stages
    verdict, message = stages[stage]
    assert verdict is Verdict.FAIL, stages
    return message


def _passes(stages: Stages, stage: str) -> str:
    assert all(v is not Verdict.FAIL for v, _ in stages.values()), stages
    verdict, message = stages[stage]
    assert verdict is Verdict.PASS, stages
    return message


# -- attention: what forward keeps grows with T per query, not T² per head -----------------


def test_attention_keeping_the_probabilities_fails_long_sequences_and_the_log_sum_exp_passes():
    wrong = _stages("attention", "long_sequences", WRONG / "attention" / "saves_probabilities.py")
    message = _fails_only(wrong, "follow_up_saved")
    # q, k, v (65,536 each) and P (4 · 4 · 256 · 256 = 1,048,576): 19 × q.
    assert "saved 4 tensors of 1,245,184 elements" in message, message
    assert "budget 8 × `q` = 524,288 elements" in message
    right = _stages("attention", "long_sequences", REPO / "solutions" / "attention.py")
    # q, k, v, the output and one log-sum-exp per query: 4.06 × q.
    assert "saved 5 tensors of 266,240 elements" in _passes(right, "follow_up_saved")


ATTENTION_MAX_AND_SUM = """
import math

import torch


class MyAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * scale
        t = scores.shape[-1]
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        if causal:
            scores = scores.masked_fill(future, float("-inf"))
        row_max = scores.amax(dim=-1, keepdim=True)
        row_sum = torch.exp(scores - row_max).sum(dim=-1, keepdim=True)
        ctx.save_for_backward(q, k, v, row_max, row_sum, future)
        ctx.scale, ctx.causal = scale, causal
        return torch.softmax(scores, dim=-1) @ v

    @staticmethod
    def backward(ctx, g):
        q, k, v, row_max, row_sum, future = ctx.saved_tensors
        scores = (q @ k.transpose(-2, -1)) * ctx.scale
        if ctx.causal:
            scores = scores.masked_fill(future, float("-inf"))
        p = torch.exp(scores - row_max) / row_sum
        dp = g @ v.transpose(-2, -1)
        ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
        grad_q = (ds @ k) * ctx.scale
        grad_k = (ds.transpose(-2, -1) @ q) * ctx.scale
        return grad_q, grad_k, p.transpose(-2, -1) @ g, None
"""


def test_attention_keeping_each_rows_max_and_sum_and_one_causal_mask_passes_long_sequences(
    write_file: Callable[[str, str], Path],
):
    # Two numbers per query, no output, and the (T, T) mask shared by every head.
    stages = _stages("attention", "long_sequences", write_file("a.py", ATTENTION_MAX_AND_SUM))
    assert "saved 6 tensors of 270,336 elements" in _passes(stages, "follow_up_saved")


# -- batch_norm: one tensor the size of x and a few numbers per channel ------------------


def test_batch_norm_keeping_x_the_centred_x_and_the_variance_fails_save_less():
    wrong = _stages(
        "batch_norm", "save_less", WRONG / "batch_norm" / "saves_centred_input_and_variance.py"
    )
    message = _fails_only(wrong, "follow_up_saved")
    assert "saved 4 tensors of 200,008 elements" in message, message
    assert "budget 1.05 × `x` = 105,000 elements" in message
    right = _stages("batch_norm", "save_less", REPO / "solutions" / "batch_norm.py")
    # x̂, 1/σ per channel and the weight.
    assert "saved 3 tensors of 100,008 elements" in _passes(right, "follow_up_saved")


BATCH_NORM_FROM_X = """
import torch


class MyBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        mean = x.mean(dim=dims, keepdim=True)
        rstd = torch.rsqrt(x.var(dim=dims, unbiased=False, keepdim=True) + eps)
        ctx.save_for_backward(x, mean, rstd, weight)
        return (x - mean) * rstd * weight.reshape(shape) + bias.reshape(shape)

    @staticmethod
    def backward(ctx, grad_output):
        x, mean, rstd, weight = ctx.saved_tensors
        dims = [0, *range(2, x.dim())]
        xhat = (x - mean) * rstd
        h = grad_output * weight.reshape(rstd.shape)
        grad_x = rstd * (
            h - h.mean(dims, keepdim=True) - xhat * (h * xhat).mean(dims, keepdim=True)
        )
        return grad_x, (grad_output * xhat).sum(dims), grad_output.sum(dims), None
"""


def test_batch_norm_keeping_x_with_the_mean_and_1_over_sigma_per_channel_passes_save_less(
    write_file: Callable[[str, str], Path],
):
    stages = _stages("batch_norm", "save_less", write_file("b.py", BATCH_NORM_FROM_X))
    assert "saved 4 tensors of 100,012 elements" in _passes(stages, "follow_up_saved")


# -- cross_entropy: one N × C tensor and the N target indices ----------------------------


def test_cross_entropy_keeping_a_one_hot_matrix_fails_save_less():
    wrong = _stages("cross_entropy", "save_less", WRONG / "cross_entropy" / "saves_one_hot.py")
    message = _fails_only(wrong, "follow_up_saved")
    assert "saved 2 tensors of 200,000 elements" in message, message
    assert "budget 1.5 × `logits` = 150,000 elements" in message
    right = _stages("cross_entropy", "save_less", REPO / "solutions" / "cross_entropy.py")
    # the probabilities and the 1,000 target indices.
    assert "saved 2 tensors of 101,000 elements" in _passes(right, "follow_up_saved")


CROSS_ENTROPY_FROM_LOGITS = """
import torch
import torch.nn.functional as F


class MyCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        ctx.save_for_backward(logits, target)
        return -torch.log_softmax(logits, dim=1).gather(1, target.unsqueeze(1)).mean()

    @staticmethod
    def backward(ctx, grad_output):
        logits, target = ctx.saved_tensors
        one_hot = F.one_hot(target, logits.shape[1]).to(logits.dtype)
        grad = torch.softmax(logits, dim=1) - one_hot
        return grad * (grad_output / logits.shape[0]), None
"""


def test_cross_entropy_keeping_the_logits_and_building_the_one_hot_in_backward_passes(
    write_file: Callable[[str, str], Path],
):
    stages = _stages("cross_entropy", "save_less", write_file("c.py", CROSS_ENTROPY_FROM_LOGITS))
    assert "saved 2 tensors of 101,000 elements" in _passes(stages, "follow_up_saved")


# -- conv2d: x and the weight, not the unfolded input -------------------------------------


def test_conv2d_keeping_the_unfolded_input_fails_save_less():
    wrong = _stages("conv2d", "save_less", WRONG / "conv2d" / "saves_unfolded_input.py")
    message = _fails_only(wrong, "follow_up_saved")
    # (4, 16·3·3, 32·32) columns: nine times x, and the weight.
    assert "saved 2 tensors of 592,128 elements" in message, message
    assert "budget 1.5 × `x` = 98,304 elements" in message
    right = _stages("conv2d", "save_less", REPO / "solutions" / "conv2d.py")
    assert "saved 2 tensors of 67,840 elements" in _passes(right, "follow_up_saved")


CONV2D_PADDED_IM2COL = """
import torch
import torch.nn.functional as F


class MyConv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding):
        n, _, h, w = x.shape
        c_out, _, kh, kw = weight.shape
        xp = F.pad(x, (padding,) * 4)
        ho = (h + 2 * padding - kh) // stride + 1
        wo = (w + 2 * padding - kw) // stride + 1
        columns = F.unfold(xp, (kh, kw), stride=stride)
        out = weight.reshape(c_out, -1) @ columns + bias.view(1, c_out, 1)
        ctx.save_for_backward(xp, weight, bias)
        ctx.stride, ctx.padding = stride, padding
        return out.reshape(n, c_out, ho, wo)

    @staticmethod
    def backward(ctx, grad_output):
        xp, weight, _ = ctx.saved_tensors
        s, p = ctx.stride, ctx.padding
        n, c_out = grad_output.shape[:2]
        kh, kw = weight.shape[2:]
        columns = F.unfold(xp, (kh, kw), stride=s)
        g = grad_output.reshape(n, c_out, -1)
        grad_xp = F.fold(weight.reshape(c_out, -1).T @ g, xp.shape[2:], (kh, kw), stride=s)
        grad_x = grad_xp[:, :, p : xp.shape[2] - p, p : xp.shape[3] - p]
        grad_weight = (g @ columns.transpose(1, 2)).sum(0).reshape(weight.shape)
        return grad_x, grad_weight, grad_output.sum((0, 2, 3)), None, None
"""


def test_conv2d_by_im2col_keeping_the_padded_input_weight_and_bias_passes_save_less(
    write_file: Callable[[str, str], Path],
):
    stages = _stages("conv2d", "save_less", write_file("d.py", CONV2D_PADDED_IM2COL))
    # 4 · 16 · 34 · 34 padded values, the weight and the bias: 1.16 × x.
    assert "saved 3 tensors of 76,304 elements" in _passes(stages, "follow_up_saved")


# -- max_pool2d: which element won, not the values ----------------------------------------


def test_max_pool2d_keeping_the_input_and_the_output_fails_what_backward_needs():
    wrong = _stages(
        "max_pool2d", "what_backward_needs", WRONG / "max_pool2d" / "saves_input_and_output.py"
    )
    message = _fails_only(wrong, "follow_up_saved")
    # x (294,912 bytes) and the output (73,728): 1.25 × x's bytes.
    assert "saved 2 tensors of 92,160 elements (368,640 bytes)" in message, message
    assert "budget 0.8 × `x` = 235,929 bytes" in message
    right = _stages("max_pool2d", "what_backward_needs", REPO / "solutions" / "max_pool2d.py")
    # one int64 position per window: half of x's bytes.
    assert "saved 1 tensor of 18,432 elements (147,456 bytes)" in _passes(right, "follow_up_saved")


MAX_POOL2D_WINNER_MASK = """
import torch
import torch.nn.functional as F


class MyMaxPool2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel_size, stride):
        k, s = kernel_size, stride
        n, c, h, w = x.shape
        windows = x.unfold(2, k, s).unfold(3, k, s)
        ho, wo = windows.shape[2], windows.shape[3]
        values, position = windows.reshape(n, c, ho, wo, k * k).max(dim=-1)
        # One bool per element of each window: True at the window's first maximum.
        ctx.save_for_backward(F.one_hot(position, k * k).bool())
        ctx.k, ctx.s, ctx.size = k, s, (h, w)
        return values

    @staticmethod
    def backward(ctx, grad_output):
        (won,) = ctx.saved_tensors
        n, c, ho, wo, kk = won.shape
        routed = grad_output.unsqueeze(-1) * won
        columns = routed.permute(0, 1, 4, 2, 3).reshape(n, c * kk, ho * wo)
        return F.fold(columns, ctx.size, ctx.k, stride=ctx.s), None, None
"""


def test_max_pool2d_keeping_a_bool_mark_per_window_element_passes_what_backward_needs(
    write_file: Callable[[str, str], Path],
):
    # As many elements as x with 2×2 windows, but one byte each: a quarter of x's bytes.
    stages = _stages(
        "max_pool2d", "what_backward_needs", write_file("e.py", MAX_POOL2D_WINNER_MASK)
    )
    assert "saved 1 tensor of 73,728 elements (73,728 bytes)" in _passes(stages, "follow_up_saved")


# -- gelu: a backward autograd can differentiate again ------------------------------------


def test_gelu_reading_tanh_saved_by_forward_fails_twice_differentiable_at_second_order():
    wrong = _stages("gelu", "twice_differentiable", WRONG / "gelu" / "saves_tanh_from_forward.py")
    assert wrong["second_order"][0] is Verdict.FAIL, wrong
    assert "does backward use a tensor forward computed and saved?" in wrong["second_order"][1]
    assert all(
        v is not Verdict.FAIL
        for k, (v, _) in wrong.items()
        if k not in ("second_order", "double_backward")
    ), wrong
    right = _stages("gelu", "twice_differentiable", REPO / "solutions" / "gelu.py")
    _passes(right, "second_order")
    _passes(right, "double_backward")


GELU_BY_COSH = """
import math

import torch

K = math.sqrt(2 / math.pi)


class MyGELU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * (1 + torch.tanh(K * (x + 0.044715 * x**3)))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        u = K * (x + 0.044715 * x**3)
        sech2 = 1 / torch.cosh(u) ** 2
        slope = 0.5 * (1 + torch.tanh(u)) + 0.5 * x * sech2 * K * (1 + 3 * 0.044715 * x**2)
        return grad_output * slope
"""


def test_gelu_with_sech_squared_from_cosh_in_backward_passes_twice_differentiable(
    write_file: Callable[[str, str], Path],
):
    stages = _stages("gelu", "twice_differentiable", write_file("f.py", GELU_BY_COSH))
    _passes(stages, "second_order")
    _passes(stages, "double_backward")


def test_the_readme_lists_every_follow_up_of_the_catalogue_with_its_exercises():
    from tests.conftest import CATALOG

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("The exercises with follow-ups, and what each asks:") :]
    table = table[: table.index("\n\n", table.index("| exercise |"))]
    listed = set()
    rows = [line for line in table.splitlines() if line.startswith("|")]
    for line in rows[2:]:  # after the header and its rule
        exercises, follow_up = line.split("|")[1:3]
        listed |= {(e.strip(), follow_up.strip(" `")) for e in exercises.split(",")}
    assert listed == {(e.id, f.id) for e in CATALOG.all for f in e.follow_ups}
