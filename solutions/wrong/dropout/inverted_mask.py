import torch


class MyDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask, p):
        ctx.save_for_backward(mask)
        ctx.p = p
        return x * mask / (1 - p)

    @staticmethod
    def backward(ctx, grad_output):
        (mask,) = ctx.saved_tensors
        p = ctx.p
        # Wrong: 1 - mask is 1 for the dropped elements and 0 for the kept ones.
        return grad_output * (1 - mask) / (1 - p), None, None
