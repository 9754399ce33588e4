import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: forward takes (x, lambd), so backward must return two values,
        # None for lambd.
        return -ctx.lambd * grad_output
