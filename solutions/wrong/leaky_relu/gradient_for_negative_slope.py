import torch


class MyLeakyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, negative_slope):
        ctx.save_for_backward(x)
        ctx.negative_slope = negative_slope
        return torch.where(x > 0, x, x * negative_slope)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_x = torch.where(x > 0, grad_output, grad_output * ctx.negative_slope)
        grad_slope = (grad_output * x * (x < 0)).sum()
        # Wrong: negative_slope is a Python float, so its gradient must be None, not a tensor.
        return grad_x, grad_slope
