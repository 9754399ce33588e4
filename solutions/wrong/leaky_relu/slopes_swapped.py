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
        # Wrong: the branches are swapped; the slope is 1 where x > 0 and negative_slope elsewhere.
        return torch.where(x > 0, grad_output * ctx.negative_slope, grad_output), None
