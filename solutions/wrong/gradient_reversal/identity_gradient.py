import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: this is the true derivative of the identity, what autograd would
        # give without the layer; the reversal (and lambd) never happens.
        return grad_output, None
