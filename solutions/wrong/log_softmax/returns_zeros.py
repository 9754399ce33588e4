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
        # Wrong: a placeholder of zeros instead of the gradient.
        return torch.zeros_like(grad_output), None
