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
        # Wrong: the dropped elements never reached the output; their gradient is 0.
        return grad_output / (1 - p), None, None
