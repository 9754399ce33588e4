import torch


class MySoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        shifted = x - x.amax(dim=dim, keepdim=True)
        exps = torch.exp(shifted)
        y = exps / exps.sum(dim=dim, keepdim=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        dim = ctx.dim
        # Wrong: hard-codes the last dimension instead of summing along dim.
        dot = (grad_output * y).sum(dim=-1, keepdim=True)
        return y * (grad_output - dot), None
