import torch


class MyLogSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp(x, max=0) - torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: exp(-x) overflows for very negative x, giving inf / inf = nan (use torch.sigmoid(-x)).
        return grad_output * torch.exp(-x) / (1 + torch.exp(-x))
