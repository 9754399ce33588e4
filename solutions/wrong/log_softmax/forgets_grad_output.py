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
        # Wrong: computes the gradient for an upstream of ones, ignoring grad_output.
        ones = torch.ones_like(y)
        return ones - torch.exp(y) * ones.sum(dim=ctx.dim, keepdim=True), None
