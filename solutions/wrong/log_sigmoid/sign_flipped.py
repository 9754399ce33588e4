import torch


class MyLogSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp(x, max=0) - torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: log(sigmoid(x)) is increasing, so its slope sigmoid(-x) is positive, not negative.
        return -grad_output * torch.sigmoid(-x)
