"""Right gradients, one slice at a time in a Python loop: the fast follow-up fails it."""

import torch


class MySoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = torch.exp(x - x.amax(dim=dim, keepdim=True))
        y = y / y.sum(dim=dim, keepdim=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        y_rows = y.movedim(ctx.dim, -1).reshape(-1, y.shape[ctx.dim])
        g_rows = grad_output.movedim(ctx.dim, -1).reshape(-1, y.shape[ctx.dim])
        rows = []
        for y_row, g_row in zip(y_rows, g_rows, strict=True):
            rows.append(y_row * (g_row - (g_row * y_row).sum()))
        grad = torch.stack(rows).reshape(y.movedim(ctx.dim, -1).shape)
        return grad.movedim(-1, ctx.dim), None
