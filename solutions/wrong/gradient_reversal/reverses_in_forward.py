import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        # Wrong: the layer must not change the values; the reversal belongs to
        # backward only. Here the domain classifier sees negated, scaled features.
        return -lambd * x

    @staticmethod
    def backward(ctx, grad_output):
        return -ctx.lambd * grad_output, None
