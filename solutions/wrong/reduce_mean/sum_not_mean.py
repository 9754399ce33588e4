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
        g = grad_output if keepdim else grad_output.unsqueeze(dim % len(shape))
        # Wrong: the 1/n of the mean is missing.
        return g.expand(shape).clone(), None, None
