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
        grad_x = grad_output * mask / (1 - p)
        # Wrong: p is a Python float; its gradient must be None, not a tensor.
        grad_p = (grad_x * mask).sum() / (1 - p)
        return grad_x, None, grad_p
