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
        g = grad_output
        # Wrong: g is grad_output itself, so /= divides the upstream gradient in place.
        g /= shape[dim]
        if not keepdim:
            g = g.unsqueeze(dim % len(shape))
        return g.expand(shape).clone(), None, None
