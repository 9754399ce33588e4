"""Wrong: a tied window's gradient goes to its first maximum in column-major order.

The windows are read column by column (the transpose of the row-major order the
statement fixes), so of two tied maxima the one in the leftmost column wins,
even when the other sits in an earlier row. Both orders agree whenever one of
the tied elements is the window's top-left corner, or both share a row or a
column.
"""

import torch


class MyMaxPool2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel_size, stride):
        k, s = kernel_size, stride
        windows = x.unfold(2, k, s).unfold(3, k, s)  # (N, C, Ho, Wo, k rows, k cols)
        by_column = windows.transpose(-2, -1).reshape(*windows.shape[:4], k * k)
        values, where = by_column.max(dim=-1)
        ctx.save_for_backward(where)
        ctx.shape, ctx.k, ctx.s = x.shape, k, s
        return values

    @staticmethod
    def backward(ctx, grad_output):
        (where,) = ctx.saved_tensors
        k, s = ctx.k, ctx.s
        n, c, h, w = ctx.shape
        _, _, ho, wo = grad_output.shape
        col, row = where // k, where % k  # column-major: the column first
        rows = torch.arange(ho).view(1, 1, ho, 1) * s + row
        cols = torch.arange(wo).view(1, 1, 1, wo) * s + col
        flat = (rows * w + cols).reshape(n, c, -1)
        grad = torch.zeros(n, c, h * w, dtype=grad_output.dtype)
        grad.scatter_add_(2, flat, grad_output.reshape(n, c, -1))
        return grad.view(n, c, h, w), None, None
