import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: the values are right, but mul_ reverses grad_output itself, a
        # tensor autograd may still hand to other nodes of the graph.
        return grad_output.mul_(-ctx.lambd), None
