import torch


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = torch.matmul(grad_output, b.mT).sum_to_size(a.shape)
        # Wrong: G^T a is (..., p, k), the transpose of a^T G.
        grad_b = torch.matmul(grad_output.mT, a).sum_to_size(b.shape)
        return grad_a, grad_b
