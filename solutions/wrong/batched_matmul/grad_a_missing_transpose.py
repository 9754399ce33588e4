import torch


class MyBatchedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        # Wrong: b is not transposed; (n, m) @ (k, m) only fits when k == m, and is then wrong.
        grad_a = torch.bmm(grad_output, b)
        grad_b = torch.bmm(a.transpose(1, 2), grad_output)
        return grad_a, grad_b
