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
        # Wrong: the values are right, but mul_ and div_ overwrite the upstream gradient.
        return grad_output.mul_(mask).div_(1 - p), None, None
