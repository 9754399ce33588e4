import torch


class MyBatchedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        # Wrong: the minus sign does not belong.
        grad_a = -torch.bmm(grad_output, b.transpose(1, 2))
        grad_b = torch.bmm(a.transpose(1, 2), grad_output)
        return grad_a, grad_b
