"""Wrong: each gradient is summed over one leading batch dimension, with an `if`
where a `while` belongs.

Right while the ranks differ by at most one; a 4-D `a` against a 2-D `b` leaves
b's gradient with a batch dimension too many (autograd would sum it silently).
"""

import torch


def reduce_to(grad, shape):
    if grad.dim() > len(shape):  # one missing dimension at most, assumed
        grad = grad.sum(0)
    for axis, size in enumerate(shape[:-2]):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis, keepdim=True)
    return grad


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = grad_output @ b.transpose(-2, -1)
        grad_b = a.transpose(-2, -1) @ grad_output
        return reduce_to(grad_a, a.shape), reduce_to(grad_b, b.shape)
