import torch


class MyDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask, p):
        ctx.p = p
        return x * mask / (1 - p)

    @staticmethod
    def backward(ctx, grad_output):
        p = ctx.p
        # Wrong: a new random mask, not the one forward used.
        mask = (torch.rand_like(grad_output) >= p).to(grad_output.dtype)
        return grad_output * mask / (1 - p), None, None
