"""Reference solution for the `batched_matmul` exercise.

y[b] = a[b] @ b_[b] for every batch index b, with a (B, n, k), b (B, k, m) and
y (B, n, m). Each batch element is an ordinary matrix product with its own
operands, so the gradients are the matrix-product rules applied per batch,
with no sum over the batch:
    grad_a[b] = g[b] @ b[b].T      (n, m) @ (m, k) -> (n, k)
    grad_b[b] = a[b].T @ g[b]      (k, n) @ (n, m) -> (k, m)
"""

import torch


class MyBatchedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        # Each gradient needs the other operand.
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            # transpose(1, 2) swaps the two matrix dimensions and leaves the
            # batch dimension alone (.T would reverse all three, and is deprecated
            # for tensors that are not 2-D).
            grad_a = torch.bmm(grad_output, b.transpose(1, 2))
        if ctx.needs_input_grad[1]:
            grad_b = torch.bmm(a.transpose(1, 2), grad_output)
        return grad_a, grad_b
