"""Reference solution for the `topk` exercise.

forward returns the k largest values along the last dim and their indices.
The indices are integers: no gradient flows through them, and
ctx.mark_non_differentiable says so. backward still receives one gradient per
output (zeros for the indices) and sends each value's gradient back to the
position it came from: a scatter through the saved indices. Every other
element of x gets zero.
"""

import torch


class TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        values, indices = torch.topk(x, k, dim=-1)
        ctx.mark_non_differentiable(indices)
        # The indices say where each value came from; at ties they are forward's
        # choice, so backward must use these very indices, not find them again.
        ctx.save_for_backward(indices)
        ctx.x_shape = x.shape
        return values, indices

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        # grad_out1: dL/dvalues, shaped like values. grad_out2 (for the indices)
        # is always zeros: the indices are not differentiable.
        (indices,) = ctx.saved_tensors
        grad_x = grad_out1.new_zeros(ctx.x_shape).scatter(-1, indices, grad_out1)
        return grad_x, None  # None for k, a Python int
