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
        # Wrong: in place "like forward", into the saved output: a second backward
        # over the same graph reads the product instead of exp(x).
        return y.mul_(grad_output)
