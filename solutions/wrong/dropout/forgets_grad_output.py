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
        # Wrong: the local slope alone; grad_output is never used.
        return (mask / (1 - p)).to(grad_output.dtype), None, None
