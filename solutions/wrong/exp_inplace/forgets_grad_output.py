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
        # Wrong: the local derivative alone, not multiplied by grad_output.
        return y.clone()
