import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: exp(-x) overflows for very negative x, giving inf / inf = nan (use sigma(x) * (1 - sigma(x))).
        return grad_output * torch.exp(-x) / (1 + torch.exp(-x)) ** 2
