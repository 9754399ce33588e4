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
        # Wrong: dim is a Python int; its slot must be None, not a zero tensor.
        return grad_x, torch.zeros(()), None
