import torch


class StraightThroughRound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: .float() makes the gradient float32 even when x is float64.
        return grad_output.float()
