import torch


class MyBatchedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        # Wrong: .T reverses all three dimensions, (B, k, m) -> (m, k, B), not just the matrix ones.
        grad_a = torch.matmul(grad_output, b.T)
        grad_b = torch.bmm(a.transpose(1, 2), grad_output)
        return grad_a, grad_b
