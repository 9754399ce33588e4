"""Reference solution for the `reduce_mean` exercise.

y = x.mean(dim, keepdim). Each x element feeds one output element with weight
1/n, n = x.shape[dim]: backward puts the reduced dimension back (when keepdim
removed it), broadcasts grad_output along it and divides by n. No value of x
is needed, only its shape.
"""

import torch


class MyMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim):
        # The gradient depends on no value: keep the shape, not a tensor.
        ctx.shape = x.shape
        ctx.dim = dim % x.dim()  # a position counted on x's rank, also for negative dim
        ctx.keepdim = keepdim
        return x.mean(dim, keepdim=keepdim)

    @staticmethod
    def backward(ctx, grad_output):
        grad_x = None
        if ctx.needs_input_grad[0]:
            g = grad_output if ctx.keepdim else grad_output.unsqueeze(ctx.dim)
            # Broadcast along the reduced dimension; the division makes a fresh,
            # contiguous tensor in grad_output's dtype.
            grad_x = g.expand(ctx.shape) / ctx.shape[ctx.dim]
        return grad_x, None, None
