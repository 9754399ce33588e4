"""Reference solution for the `relu` exercise.

relu(x) = max(x, 0) has slope 1 where x > 0 and slope 0 where x < 0, so the
gradient is grad_output kept where the input was positive and zeroed elsewhere.
"""

import torch


class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        # Only the sign of the input matters to backward; saving the output would
        # do just as well, since output > 0 exactly where input > 0.
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Multiplying by the bool mask builds a new tensor (grad_output is never
        # written to) and keeps grad_output's dtype. At exactly 0, `>` gives slope
        # 0, like torch.relu; `>=` would be an equally valid subgradient.
        return grad_output * (input > 0)
