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
        # Wrong: scatter_ writes, it does not add; where index repeats a value, only
        # one of the upstream values survives instead of their sum.
        grad_x.scatter_(ctx.dim, index, grad_output)
        return grad_x, None, None
