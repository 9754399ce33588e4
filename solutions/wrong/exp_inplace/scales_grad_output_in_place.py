import torch


class ExpInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        # Wrong: in place "like forward", but grad_output belongs to autograd.
        return grad_output.mul_(y)
