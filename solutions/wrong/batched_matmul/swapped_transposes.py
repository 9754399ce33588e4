import torch


class MyBatchedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        # Wrong: the operands are swapped, so each product is the transpose of the gradient: (B, k, n) and (B, m, k).
        grad_a = torch.bmm(b, grad_output.transpose(1, 2))
        grad_b = torch.bmm(grad_output.transpose(1, 2), a)
        return grad_a, grad_b
