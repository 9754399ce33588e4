import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        # Wrong: lambd is kept on the class, shared by every call. A second call
        # with another lambd before backward (two heads in one graph, or the next
        # step of a schedule) overwrites it for the first one.
        GradientReversalFunction.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return -GradientReversalFunction.lambd * grad_output, None
