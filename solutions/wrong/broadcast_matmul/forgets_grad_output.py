import torch


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        # Wrong: ones in place of grad_output, which is only right for y.sum().
        ones = torch.ones_like(grad_output)
        grad_a = torch.matmul(ones, b.mT).sum_to_size(a.shape)
        grad_b = torch.matmul(a.mT, ones).sum_to_size(b.shape)
        return grad_a, grad_b
