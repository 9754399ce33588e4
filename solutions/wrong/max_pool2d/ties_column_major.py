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
        grad = torch.zeros(ctx.shape, dtype=grad_output.dtype)
        n, c, ho, wo = grad_output.shape
        for i in range(ho):
            for j in range(wo):
                col, row = where[:, :, i, j] // k, where[:, :, i, j] % k
                for b in range(n):
                    for ch in range(c):
                        r = i * s + int(row[b, ch])
                        q = j * s + int(col[b, ch])
                        grad[b, ch, r, q] += grad_output[b, ch, i, j]
        return grad, None, None
