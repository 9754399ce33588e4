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
        # Wrong: with keepdim=True the reduced dimension is already there.
        g = grad_output.unsqueeze(dim % len(shape))
        return g.expand(shape) / shape[dim], None, None
