import torch


class ExpInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # meant as "the input"...
        x.exp_()  # ...but this overwrites it
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: the saved tensor holds exp(x) now, so this is exp(exp(x)).
        return grad_output * torch.exp(x)
