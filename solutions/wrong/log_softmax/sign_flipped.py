import torch


class MyLogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        m = x.amax(dim=dim, keepdim=True)
        shifted = x - m
        y = shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        total = grad_output.sum(dim=ctx.dim, keepdim=True)
        # Wrong: the terms are subtracted the wrong way round.
        return torch.exp(y) * total - grad_output, None
