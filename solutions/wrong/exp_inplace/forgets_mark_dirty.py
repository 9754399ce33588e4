import torch


class ExpInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.exp_()
        # Wrong: x changed in place but autograd is not told (no ctx.mark_dirty(x)).
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y
