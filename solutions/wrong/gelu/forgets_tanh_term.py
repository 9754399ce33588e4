import math

import torch

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
COEFF = 0.044715


class MyGELU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        u = SQRT_2_OVER_PI * (x + COEFF * x**3)
        t = torch.tanh(u)
        ctx.save_for_backward(x, t)
        return 0.5 * x * (1 + t)

    @staticmethod
    def backward(ctx, grad_output):
        _x, t = ctx.saved_tensors
        # Wrong: tanh(u) depends on x too; the 0.5 * x * (1 - t**2) * du/dx term is missing.
        local = 0.5 * (1 + t)
        return grad_output * local
