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
        # Wrong: du/dx is sqrt(2/pi) * (1 + 3 * COEFF * x**2); the cubic's derivative is missing.
        du_dx = SQRT_2_OVER_PI
        local = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * du_dx
        return grad_output * local
