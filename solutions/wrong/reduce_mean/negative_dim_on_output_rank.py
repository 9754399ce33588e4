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
        # Wrong: a negative dim counts from the end of x, which has one more dimension
        # than grad_output when keepdim=False.
        position = dim if dim >= 0 else dim + grad_output.dim()
        g = grad_output if keepdim else grad_output.unsqueeze(position)
        return g.expand(shape) / shape[dim], None, None
