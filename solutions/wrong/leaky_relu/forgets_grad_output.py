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
        # Wrong: the slope alone; the chain rule needs grad_output times it.
        slope = torch.where(x > 0, 1.0, ctx.negative_slope).to(grad_output.dtype)
        return slope, None
