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
        grad_x = grad_output.new_zeros(ctx.x_shape)
        grad_x.scatter_add_(ctx.dim, index, grad_output)
        # Wrong: forward takes (x, dim, index), so backward returns three values.
        return grad_x
