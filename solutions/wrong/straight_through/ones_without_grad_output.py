import torch


class StraightThroughRound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: the identity's slope 1 must still be multiplied by grad_output.
        return torch.ones_like(grad_output)
