"""Verdict truth, round four: what probing the checker with odd right answers and subtle
wrong ones found. Each file is one a learner writes, in our own words."""

from __future__ import annotations

from tests.conftest import CATALOG
from tests.test_truth import check, first_failure, passes, service

__all__ = ["service"]  # the fixture, shared with test_truth


def test_an_autocast_answer_truer_than_torchs_float32_passes_under_autocast(service, tmp_path):
    """Decorated as asked, computing in float64 inside: under autocast its gradient is
    closer to the truth than torch's own float32 one. The autocast stage compared it
    without the slack backward parity gives (twice torch's float32 error) and called it
    low precision. Drop the slack in ``autocast_stage`` and this file fails."""
    source = """
        import torch
        from torch.amp import custom_bwd, custom_fwd


        class ScoreLogSumExp(torch.autograd.Function):
            @staticmethod
            @custom_fwd(device_type="cpu", cast_inputs=torch.float32)
            def forward(ctx, x, w):
                scores = x.double() @ w.double()
                lse = torch.logsumexp(scores, -1)
                ctx.save_for_backward(x, w, torch.exp(scores - lse[:, None]))
                return lse.to(x.dtype)

            @staticmethod
            @custom_bwd(device_type="cpu")
            def backward(ctx, grad_output):
                x, w, p = ctx.saved_tensors
                g = p * grad_output.double()[:, None]
                return (g @ w.double().T).to(x.dtype), (x.double().T @ g).to(w.dtype)
    """
    passes(check(service, tmp_path, "autocast_logsumexp", source))


def test_an_autocast_backward_left_in_low_precision_still_fails(service, tmp_path):
    """The slack is torch's float32 error, not bfloat16's: a backward run in bfloat16 is
    still named."""
    source = """
        import torch
        from torch.amp import custom_fwd


        class ScoreLogSumExp(torch.autograd.Function):
            @staticmethod
            @custom_fwd(device_type="cpu", cast_inputs=torch.float32)
            def forward(ctx, x, w):
                scores = x @ w
                lse = torch.logsumexp(scores, -1)
                ctx.save_for_backward(x, w, torch.exp(scores - lse[:, None]))
                return lse

            @staticmethod
            def backward(ctx, grad_output):
                x, w, p = ctx.saved_tensors
                g = p * grad_output[:, None]
                return (g @ w.T).to(x.dtype), (x.T @ g).to(w.dtype)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "autocast_logsumexp", source))
    assert stage == "autocast", message


def test_a_forward_that_changes_its_input_in_place_fails_forward_parity(service, tmp_path):
    """Shifting the logits where they lie (``x.sub_(max)``) gives the right softmax and the
    right gradient for a fresh input, and changes the caller's tensor: reused in the
    network (a residual, a second loss) it is wrong. Every call gets its own copies, so
    only a look at the inputs after forward can tell. Remove ``_changed_inputs`` from
    the forward handler and this file passes every stage."""
    source = """
        import torch


        class MySoftmax(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, dim):
                x.sub_(x.amax(dim=dim, keepdim=True))  # saves a copy, changes the caller's
                y = x.exp()
                y = y / y.sum(dim=dim, keepdim=True)
                ctx.save_for_backward(y)
                ctx.dim = dim
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                dot = (grad_output * y).sum(dim=ctx.dim, keepdim=True)
                return y * (grad_output - dot), None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "softmax", source))
    assert stage == "forward", message
    assert "changed its input `x` in place" in message


def test_an_in_place_function_that_marks_and_returns_its_input_passes(service, tmp_path):
    """What an in-place Function is for: it changes x, says so and gives x back."""
    source = """
        import torch


        class ExpInPlace(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.exp_()
                ctx.mark_dirty(x)
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return grad_output * y
    """
    passes(check(service, tmp_path, "exp_inplace", source))


def test_a_cache_keyed_by_the_shapes_alone_fails_calls_with_other_arguments(service, tmp_path):
    """Average pooling's divisors kept per (plane, kernel, stride, padding), forgetting
    count_include_pad: no two cases of the spec share a plane and a kernel with another
    count, so only calls of the first case's shapes with the other cases' arguments
    (``plan._sibling_runs``) find it. Remove the siblings from ``repeat_pool`` and this
    file passes every stage."""
    source = """
        import torch
        import torch.nn.functional as F

        _DIVISORS = {}


        def divisors(h, w, k, s, p, count_pad):
            key = (h, w, k, s, p)  # the count is not in the key
            if key not in _DIVISORS:
                ones = torch.ones(1, 1, h, w, dtype=torch.float64)
                if count_pad:
                    ones = F.pad(ones, (p, p, p, p), value=1.0)
                    summed = F.avg_pool2d(ones, k, s, 0) * k * k
                else:
                    summed = F.avg_pool2d(ones, k, s, p, count_include_pad=True) * k * k
                _DIVISORS[key] = summed[0, 0]
            return _DIVISORS[key]


        class MyAvgPool2d(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, kernel_size, stride, padding, count_include_pad):
                ctx.args = (kernel_size, stride, padding, count_include_pad, x.shape)
                return F.avg_pool2d(
                    x, kernel_size, stride, padding, count_include_pad=count_include_pad
                )

            @staticmethod
            def backward(ctx, grad_output):
                k, s, p, count_pad, (n, c, h, w) = ctx.args
                share = grad_output / divisors(h, w, k, s, p, count_pad).to(grad_output.dtype)
                ho, wo = grad_output.shape[-2:]
                padded = share.new_zeros(n, c, h + 2 * p, w + 2 * p)
                for a in range(k):
                    for b in range(k):
                        rows = slice(a, a + s * (ho - 1) + 1, s)
                        cols = slice(b, b + s * (wo - 1) + 1, s)
                        padded[:, :, rows, cols] += share
                return padded[:, :, p : p + h, p : p + w], None, None, None, None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "avg_pool2d", source))
    assert stage == "state", message
    assert "count_include_pad" in message and "kept from an earlier call" in message


def test_dropout_at_p_zero_still_drops_what_the_mask_drops(service, tmp_path):
    """p = 0 is in the domain ([0, 1)): nothing is scaled, the mask still applies. A
    backward that takes p = 0 for "no dropout" passed while no case had p = 0."""
    source = """
        import torch


        class MyDropout(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, mask, p):
                ctx.save_for_backward(mask)
                ctx.p = p
                return x * mask / (1 - p)

            @staticmethod
            def backward(ctx, grad_output):
                (mask,) = ctx.saved_tensors
                if ctx.p == 0:
                    return grad_output.clone(), None, None  # "no dropout"
                return grad_output * mask / (1 - ctx.p), None, None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "dropout", source))
    assert stage == "backward", message


def test_a_clip_kept_as_a_float32_tensor_moves_the_kink_and_fails(service, tmp_path):
    """``torch.tensor(clip_val)`` is float32: in float64 the kink moves to 0.30000001192,
    and inputs between it and 0.3 get a gradient of 1 where the truth is 0. Only a point
    that close (1e-9) sees it, and only with a clip float32 cannot hold. Drop 1e-9 from
    ``plan.NEAR_KINK`` and this file passes every stage."""
    source = """
        import torch


        class ClippedReLUFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input_tensor, clip_val):
                clip = torch.tensor(clip_val)  # float32, whatever the input's dtype
                ctx.save_for_backward(input_tensor, clip)
                return input_tensor.clamp(min=0, max=clip_val)

            @staticmethod
            def backward(ctx, grad_output):
                x, clip = ctx.saved_tensors
                inside = (x > 0) & (x < clip)
                return grad_output * inside.to(grad_output.dtype), None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "clipped_relu", source))
    assert stage == "kinks", message
    assert "0.3 (clip_val)" in message


def test_no_point_next_to_one_kink_lands_on_another():
    """With kinks at 0 and at a clip of 0.1, the point 0.1 above 0 is the clip itself: set
    there unmasked, its gradient is read as a neighbour's and a right answer fails (the
    reference did, with the float32 rounding of 0.1). ``plan._nearest`` leaves it out."""
    import dataclasses

    import torch

    from trainer.checking.trusted.plan import build_plan
    from trainer.spec import Case

    exercise = CATALOG.get("clipped_relu")
    case = Case({"input_tensor": (6, 5), "clip_val": 0.1})
    plan = build_plan(dataclasses.replace(exercise, cases=(case,)), 0)
    assert plan.kink_runs
    for kink_run in plan.kink_runs:
        tensor = kink_run.run.args[0]
        assert isinstance(tensor, torch.Tensor)
        values = tensor.reshape(-1).to(torch.float64)
        kinks = {p.flat_index for p in kink_run.points}
        others = [i for i in range(len(values)) if i not in kinks]
        assert not any(abs(float(values[i]) - 0.1) < 1e-12 for i in others)


def test_a_clip_is_named_only_when_every_larger_grad_output_is_wrong():
    """A few elements lost to float32 rounding agree with "a clip at T" for any T; a clip
    makes every element with |grad_output| above T wrong. Softmax's cancellation in
    float32 was called a clip of grad_output. Drop the check of the elements spared in
    ``stability._clips`` and this test fails."""
    import torch

    from trainer.checking.trusted.stability import _clips

    g = torch.tensor([0.5, 2.0, 3.0, 4.0, 0.1, 5.0], dtype=torch.float64)
    expected = torch.tensor([1.0, -2.0, 1.5, 0.5, 2.0, 1.0], dtype=torch.float64)
    clipped = expected * torch.where(g > 1.5, 1.5 / g, torch.ones_like(g))
    wrong = g > 1.5
    assert _clips((g,), (expected, clipped), wrong)
    rounded = expected.clone()
    rounded[2] *= 1 + 1e-4  # one element off by float32's rounding
    one = torch.zeros_like(wrong)
    one[2] = True
    assert not _clips((g,), (expected, rounded), one)


def test_a_norm_clamped_by_an_eps_guard_fails_on_a_row_of_tiny_values(service, tmp_path):
    """``/ norm.clamp_min(1e-4)`` is right at zero rows and at every size random draws
    give, and wrong by norm/1e-4 on a nonzero row smaller than that. Drop the tiny row
    from ``structured.value_sets`` and this file passes every stage."""
    source = """
        import torch


        class SafeNorm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                norm = x.pow(2).sum(-1).sqrt()
                ctx.save_for_backward(x, norm)
                return norm

            @staticmethod
            def backward(ctx, grad_output):
                x, norm = ctx.saved_tensors
                return x * (grad_output / norm.clamp_min(1e-4)).unsqueeze(-1)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "safe_norm", source))
    assert stage == "stability", message
    assert "tiny values" in message


def test_a_tie_rule_faked_with_a_tiny_ramp_fails_on_near_ties(service, tmp_path):
    """Picking the window's first maximum by ``argmax(window - 1e-7 * position)`` is right
    on exact ties and on random values, and wrong where a later element is larger by
    less than the ramp. Drop the near-tie input of ``structured.tie_sets`` and this file
    passes every stage."""
    source = """
        import torch


        class MyMaxPool2d(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, kernel_size, stride):
                k, s = kernel_size, stride
                n, c, _, w = x.shape
                patches = x.unfold(2, k, s).unfold(3, k, s)
                ho, wo = patches.shape[2], patches.shape[3]
                flat = patches.reshape(n, c, ho, wo, k * k)
                ramp = 1e-7 * torch.arange(k * k, dtype=x.dtype)
                where = (flat - ramp).argmax(dim=-1)  # "the first maximum"
                rows = torch.arange(ho).view(ho, 1) * s + where // k
                cols = torch.arange(wo).view(1, wo) * s + where % k
                ctx.save_for_backward(rows * w + cols)
                ctx.shape = x.shape
                return flat.amax(dim=-1)

            @staticmethod
            def backward(ctx, grad_output):
                (source,) = ctx.saved_tensors
                n, c, h, w = ctx.shape
                grad = grad_output.new_zeros(n, c, h * w)
                grad.scatter_add_(2, source.reshape(n, c, -1), grad_output.reshape(n, c, -1))
                return grad.reshape(n, c, h, w), None, None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "max_pool2d", source))
    assert stage == "stability", message
    assert "nearly tied" in message


def test_an_embedding_backward_that_needs_a_batch_axis_fails_on_a_0_dim_index(service, tmp_path):
    """``indices`` may have any shape, none included: ``grad_output.flatten(0, -2)`` raises
    for a single 0-dim lookup."""
    source = """
        import torch


        class MyEmbedding(torch.autograd.Function):
            @staticmethod
            def forward(ctx, indices, weight, padding_idx):
                ctx.save_for_backward(indices)
                ctx.rows = weight.shape[0]
                ctx.pad = padding_idx % weight.shape[0]
                return weight[indices]

            @staticmethod
            def backward(ctx, grad_output):
                (indices,) = ctx.saved_tensors
                rows = grad_output.flatten(0, -2)  # (lookups, D)
                grad = rows.new_zeros(ctx.rows, rows.shape[-1])
                grad.index_add_(0, indices.reshape(-1), rows)
                grad[ctx.pad] = 0
                return None, grad, None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "embedding", source))
    assert stage == "backward", message
    assert "IndexError" in message


def test_the_textbook_eps_guard_passes_on_a_row_of_tiny_values(service, tmp_path):
    """``/ (norm + 1e-12)`` is off by 1e-12 / norm: the tiny row stays far enough above it
    (near 1e-5) for float64's tolerance. At 1e-6 this right answer failed."""
    source = """
        import torch


        class SafeNorm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                norm = torch.linalg.vector_norm(x, dim=-1)
                ctx.save_for_backward(x, norm)
                return norm

            @staticmethod
            def backward(ctx, grad_output):
                x, norm = ctx.saved_tensors
                return (grad_output / (norm + 1e-12)).unsqueeze(-1) * x
    """
    passes(check(service, tmp_path, "safe_norm", source))


def test_a_backward_dividing_by_the_weight_fails_where_a_channel_is_pruned(service, tmp_path):
    """x̂ got back from the output as y / weight saves memory and is exact, but a weight
    with a zero (a pruned channel, a zero-initialised gamma) turns every gradient of the
    row into NaN. Leave 1-D tensors without a zero in ``structured.with_zero_slices``
    and this file passes every stage."""
    source = """
        import torch


        class MyRMSNorm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, eps):
                r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                y = x * r * weight
                ctx.save_for_backward(y, r, weight)  # not x: x̂ = y / weight later
                return y

            @staticmethod
            def backward(ctx, g):
                y, r, weight = ctx.saved_tensors
                xhat = y / weight
                gw = (g * xhat).reshape(-1, weight.shape[0]).sum(0)
                gh = g * weight
                gx = r * (gh - xhat * (gh * xhat).mean(-1, keepdim=True))
                return gx, gw, None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "rms_norm", source))
    assert stage == "stability", message


def test_a_view_that_merges_leading_dimensions_fails_on_channels_last_tensors(service, tmp_path):
    """``grad_output.view(-1, H, W)`` works on contiguous tensors and on the transposed
    layout the contract already tried; a channels_last or head-split tensor cannot be
    viewed so, as a network hands them over. Drop the ``permuted`` layout from the
    contract stage and this file passes every stage."""
    source = """
        import torch


        class MySoftmax(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, dim):
                y = torch.softmax(x, dim)
                ctx.save_for_backward(y)
                ctx.dim = dim
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                shape = y.shape
                if y.dim() >= 3:  # work on (batch, rows, columns)
                    dim = ctx.dim % y.dim() - (y.dim() - 3) if ctx.dim % y.dim() >= y.dim() - 2 else None
                    if dim is not None:
                        y3 = y.view(-1, *shape[-2:])
                        g3 = grad_output.view(-1, *shape[-2:])
                        dot = (g3 * y3).sum(dim, keepdim=True)
                        return (y3 * (g3 - dot)).view(shape), None
                dot = (grad_output * y).sum(ctx.dim, keepdim=True)
                return y * (grad_output - dot), None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "softmax", source))
    assert stage == "contract", message
    assert "channels-last" in message


def test_a_cache_keyed_by_the_weights_identity_fails_once_an_optimizer_changes_it(
    service, tmp_path
):
    """Wᵀ kept per weight by ``id`` (dropped when the weight dies, so ids never clash):
    every call of the 500 gets fresh tensors, and two steps of accumulation leave the
    values alone, so it passed; an optimizer's step changes the very tensor in place.
    Remove ``_updated_in_place`` from the scenarios and this file passes every stage."""
    source = """
        import weakref

        import torch

        _TRANSPOSED = {}


        def transposed(weight):
            key = id(weight)
            if key not in _TRANSPOSED:
                _TRANSPOSED[key] = weight.detach().t().contiguous()
                weakref.finalize(weight, _TRANSPOSED.pop, key, None)
            return _TRANSPOSED[key]


        class MyLinearFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, bias):
                ctx.save_for_backward(x, weight)
                return x @ weight.t() + bias

            @staticmethod
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_x = grad_output @ transposed(weight).t()
                return grad_x, grad_output.t() @ x, grad_output.sum(0)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "linear", source))
    assert stage == "state", message
    assert "changed in place" in message
