"""Reference solution for the `softmax` exercise.

y = softmax(x, dim): y_i = exp(x_i) / sum_j exp(x_j), along `dim`. Every output
depends on every input of its slice, so the Jacobian of one slice is the full
matrix dy_i/dx_j = y_i * (delta_ij - y_j). backward never builds that matrix:
multiplying it by the upstream gradient g collapses to
    grad_x = y * (g - sum_j(g_j * y_j))
with the sum taken along `dim` and kept as a size-1 dimension for broadcasting.
"""

import torch


class MySoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        # Subtracting the max along dim changes nothing mathematically (it cancels
        # between numerator and denominator) but keeps exp() from overflowing.
        shifted = x - x.amax(dim=dim, keepdim=True)
        exps = torch.exp(shifted)
        y = exps / exps.sum(dim=dim, keepdim=True)
        # The Jacobian is written entirely with y, so y is all backward needs.
        ctx.save_for_backward(y)
        # dim is a Python int, not a tensor: a plain ctx attribute.
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        dim = ctx.dim
        # sum_j g_j * y_j for each slice along dim; keepdim so it broadcasts back.
        dot = (grad_output * y).sum(dim=dim, keepdim=True)
        # Diagonal term y_i * g_i minus the cross terms y_i * sum_j g_j * y_j.
        grad_x = y * (grad_output - dot)
        # One value per forward input: dim is an int, so its gradient is None.
        return grad_x, None
