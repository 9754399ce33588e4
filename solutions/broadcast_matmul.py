"""Reference solution for the `broadcast_matmul` exercise.

y = a @ b with broadcast batch dimensions. For each output batch index the
usual matrix-product gradients apply: G b^T for a and a^T G for b, where ^T
swaps the last two dimensions. Computed with broadcasting, both come out at
the output's batch shape; every input matrix that broadcasting reused gets
the sum of its uses' gradients, which `sum_to_size` computes: it sums over the
leading dimensions the input lacks and over its size-1 dimensions, keeping
them.
"""

import torch


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            # (*batch, n, p) @ (*batch_b, p, k) -> (*batch, n, k), then undo a's broadcast.
            grad_a = torch.matmul(grad_output, b.mT).sum_to_size(a.shape)
        if ctx.needs_input_grad[1]:
            # (*batch_a, k, n) @ (*batch, n, p) -> (*batch, k, p), then undo b's broadcast.
            grad_b = torch.matmul(a.mT, grad_output).sum_to_size(b.shape)
        return grad_a, grad_b
