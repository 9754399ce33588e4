import torch


class MyMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim):
        ctx.shape = x.shape
        ctx.dim = dim
        ctx.keepdim = keepdim
        return x.mean(dim, keepdim=keepdim)

    @staticmethod
    def backward(ctx, grad_output):
        shape, dim, keepdim = ctx.shape, ctx.dim, ctx.keepdim
        # Wrong: with keepdim=False the reduced dimension is missing, and expand lines
        # grad_output up with x from the right, along the wrong dimensions.
        return grad_output.expand(shape) / shape[dim], None, None
