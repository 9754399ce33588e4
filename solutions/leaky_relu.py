"""Reference solution for the `leaky_relu` exercise.

y = x where x > 0 and y = negative_slope * x where x < 0: the slope is 1 on the
positive side and negative_slope on the negative side, so the gradient is
grad_output scaled by one or the other, element by element.
"""

import torch


class MyLeakyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, negative_slope):
        # save_for_backward takes tensors only; the float slope goes on ctx as a
        # plain attribute.
        ctx.save_for_backward(x)
        ctx.negative_slope = negative_slope
        return torch.where(x > 0, x, x * negative_slope)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Both branches come from grad_output, so the result keeps its dtype and
        # grad_output itself is never written. At exactly 0 this picks
        # negative_slope, like torch; any slope in [negative_slope, 1] is valid.
        grad_x = torch.where(x > 0, grad_output, grad_output * ctx.negative_slope)
        # One value per forward input: negative_slope is a float, so None.
        return grad_x, None
