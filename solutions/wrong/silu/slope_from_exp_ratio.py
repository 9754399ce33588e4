import torch


class MySiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        # Wrong: sigmoid's slope as a ratio of exponentials; exp(-x) overflows for very negative x.
        e = torch.exp(-x)
        return grad_output * (s + x * e / (1 + e) ** 2)
