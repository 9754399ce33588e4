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
        # Wrong: "gather only copies, so the gradient passes through unchanged";
        # grad_output has the shape of index, not of x.
        return grad_output, None, None
