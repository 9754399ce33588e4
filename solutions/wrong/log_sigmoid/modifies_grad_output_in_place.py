import torch


class MyLogSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp(x, max=0) - torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: mul_ writes into grad_output, which autograd may share with other functions.
        return grad_output.mul_(torch.sigmoid(-x))
