import torch


class ExpInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        # Wrong: a dirty input must be returned itself; torch refuses a copy.
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y
