"""Correct solutions written in the styles learners bring pass; the classic mistakes fail.

The "classic write-up" variants follow the shape of the usual tutorial code
(class names, signatures, what they save), so that a learner's existing code
drops into a scratch file and gets the verdict it deserves.
"""

from __future__ import annotations

import pytest

from tests.conftest import check_json, first_failure

CORRECT = {
    "sigmoid": {
        "classic write-up: saves the output": """
            import torch
            from torch.autograd import Function


            class MySigmoid(Function):
                @staticmethod
                def forward(ctx, x):
                    out = 1.0 / (1.0 + torch.exp(-x))
                    ctx.save_for_backward(out)
                    return out

                @staticmethod
                def backward(ctx, grad_output):
                    (out,) = ctx.saved_tensors
                    return grad_output * out * (1.0 - out)
        """,
        "saves the input and recomputes": """
            import torch


            class MySigmoid(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return torch.sigmoid(x)

                @staticmethod
                def backward(ctx, grad_output):
                    (x,) = ctx.saved_tensors
                    s = torch.sigmoid(x)
                    return grad_output * s * (1 - s)
        """,
        "torch 2 setup_context style": """
            import torch


            class MySigmoid(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return torch.sigmoid(x)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(output)

                @staticmethod
                def backward(ctx, grad_output):
                    (y,) = ctx.saved_tensors
                    return grad_output * y * (1 - y)
        """,
        "variadic backward and a helper function": """
            import torch


            def local_slope(y):
                return y * (1 - y)


            class MySigmoid(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.sigmoid()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, *grads):
                    (y,) = ctx.saved_tensors
                    return grads[0] * local_slope(y)
        """,
    },
    "linear": {
        "classic write-up: saves x, weight and bias": """
            import torch
            from torch.autograd import Function


            class MyLinearFunction(Function):
                @staticmethod
                def forward(ctx, x, weight, bias):
                    ctx.save_for_backward(x, weight, bias)
                    return x @ weight.T + bias

                @staticmethod
                def backward(ctx, grad_output):
                    x, weight, bias = ctx.saved_tensors
                    return grad_output @ weight, grad_output.T @ x, grad_output.sum(dim=0)
        """,
        "einsum": """
            import torch


            class MyLinearFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, bias):
                    ctx.save_for_backward(x, weight)
                    return torch.einsum("bi,oi->bo", x, weight) + bias

                @staticmethod
                def backward(ctx, g):
                    x, weight = ctx.saved_tensors
                    return (
                        torch.einsum("bo,oi->bi", g, weight),
                        torch.einsum("bo,bi->oi", g, x),
                        torch.einsum("bo->o", g),
                    )
        """,
        "F.linear with torch.mm and needs_input_grad": """
            import torch
            import torch.nn.functional as F


            class MyLinearFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, bias):
                    ctx.save_for_backward(x, weight)
                    return F.linear(x, weight, bias)

                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    gx = torch.mm(grad_output, weight) if ctx.needs_input_grad[0] else None
                    gw = torch.mm(grad_output.t(), x) if ctx.needs_input_grad[1] else None
                    gb = grad_output.sum(0) if ctx.needs_input_grad[2] else None
                    return gx, gw, gb
        """,
    },
    "clipped_relu": {
        "classic write-up: clip_val on ctx and a float mask": """
            import torch


            class ClippedReLUFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, input_tensor, clip_val):
                    clip_val = float(clip_val)
                    ctx.save_for_backward(input_tensor)
                    ctx.clip_val = clip_val
                    return input_tensor.clamp(min=0, max=clip_val)

                @staticmethod
                def backward(ctx, grad_output):
                    (input_tensor,) = ctx.saved_tensors
                    mask = (input_tensor > 0) & (input_tensor < ctx.clip_val)
                    return grad_output * mask.float(), None
        """,
        "torch.where with inclusive bounds": """
            import torch


            class ClippedReLUFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, input_tensor, clip_val):
                    ctx.save_for_backward(input_tensor)
                    ctx.clip_val = clip_val
                    return torch.clamp(input_tensor, 0, clip_val)

                @staticmethod
                def backward(ctx, grad_output):
                    (x,) = ctx.saved_tensors
                    inside = (x >= 0) & (x <= ctx.clip_val)
                    return torch.where(inside, grad_output, torch.zeros_like(grad_output)), None
        """,
        "clone and zero the clipped entries": """
            import torch


            class ClippedReLUFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, input_tensor, clip_val):
                    ctx.save_for_backward(input_tensor)
                    ctx.clip_val = clip_val
                    return input_tensor.clamp(0, clip_val)

                @staticmethod
                def backward(ctx, grad_output):
                    (x,) = ctx.saved_tensors
                    grad = grad_output.clone()
                    grad[(x < 0) | (x > ctx.clip_val)] = 0
                    return grad, None
        """,
    },
    "softmax": {
        # In float32 at x near 600, logsumexp rounds at the inputs' scale: every element
        # of a row is off by one common factor, forgiven as rounding (plan.ROUNDING_FLOOR).
        "exp of x minus logsumexp, a row's dot product by einsum": """
            import torch


            class MySoftmax(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, dim):
                    ctx.save_for_backward(x)
                    ctx.dim = dim
                    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))

                @staticmethod
                def backward(ctx, grad_output):
                    (x,) = ctx.saved_tensors
                    y = torch.exp(x - torch.logsumexp(x, dim=ctx.dim, keepdim=True))
                    yl, gl = y.movedim(ctx.dim, -1), grad_output.movedim(ctx.dim, -1)
                    dot = torch.einsum("...i,...i->...", gl, yl).unsqueeze(-1)
                    return (yl * gl - yl * dot).movedim(-1, ctx.dim).contiguous(), None
        """,
    },
}

CASES = [(ex, name, source) for ex, styles in CORRECT.items() for name, source in styles.items()]


@pytest.mark.parametrize(
    ("exercise_id", "style", "source"), CASES, ids=[f"{e}: {n}" for e, n, _ in CASES]
)
def test_a_correct_solution_in_a_common_style_passes(exercise_id, style, source, write_file):
    code, report = check_json(exercise_id, write_file(f"{exercise_id}.py", source))
    assert code == 0, first_failure(report)
    assert report["passed"] is True


def test_the_classic_clipped_relu_without_the_mask_fails_at_backward(write_file):
    path = write_file(
        "clipped_relu.py",
        """
        import torch


        class ClippedReLUFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input_tensor, clip_val):
                ctx.save_for_backward(input_tensor)
                ctx.clip_val = float(clip_val)
                return input_tensor.clamp(min=0, max=ctx.clip_val)

            @staticmethod
            def backward(ctx, grad_output):
                grad_input = grad_output.clone()
                return grad_input, None
        """,
    )
    code, report = check_json("clipped_relu", path)
    assert code == 1
    failure = first_failure(report)
    assert failure is not None
    assert failure["id"] == "backward"
    assert "grad for `input_tensor` is wrong at" in failure["message"]
