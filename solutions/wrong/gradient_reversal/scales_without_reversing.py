import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: lambd weighs the gradient but the minus sign is missing: the
        # features then help the domain classifier instead of fooling it.
        return ctx.lambd * grad_output, None
