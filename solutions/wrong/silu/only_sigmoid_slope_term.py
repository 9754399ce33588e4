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
        # Wrong: differentiates sigmoid(x) but forgets that the factor x varies too (the s term).
        return grad_output * x * s * (1 - s)
