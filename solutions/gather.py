"""Reference solution for the `gather` exercise.

out = torch.gather(x, dim, index): out[..., i, ...] = x[..., index[..., i, ...], ...],
the index replacing the position along `dim` only. Every element of out is one
element of x, so the gradient of x collects grad_output back into x's shape:
each upstream value is added at the position it was read from. An element read
k times gets the sum of k upstream values; an element never read gets 0.
"""

import torch


class MyGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, index):
        # Only the index (a tensor: save_for_backward) and x's shape (a tuple of
        # ints: a plain attribute) are needed; the values of x are not.
        ctx.save_for_backward(index)
        ctx.dim = dim
        ctx.x_shape = x.shape
        return torch.gather(x, dim, index)

    @staticmethod
    def backward(ctx, grad_output):
        (index,) = ctx.saved_tensors
        grad_x = None
        if ctx.needs_input_grad[0]:
            # Zeros in grad_output's dtype and device, shaped like x. scatter_add_
            # (never scatter_, which keeps only one of several writes to the same
            # place) adds each upstream value where its element came from.
            # A negative dim means the same axis for scatter_add_ as for gather.
            grad_x = grad_output.new_zeros(ctx.x_shape)
            grad_x.scatter_add_(ctx.dim, index, grad_output)
        # dim is a Python int and index an int64 tensor: neither has a gradient.
        return grad_x, None, None
