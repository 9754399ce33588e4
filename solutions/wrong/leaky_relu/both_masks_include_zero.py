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
        # Wrong: at x == 0 both masks hold, so the slope is 1 + negative_slope, outside [negative_slope, 1].
        slope = (x >= 0) + ctx.negative_slope * (x <= 0)
        return grad_output * slope, None
