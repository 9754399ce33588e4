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
        # Wrong: both product-rule terms carry the factor 0.5 from y = 0.5 * x * (1 + t).
        local = (1 + t) + x * (1 - t**2) * du_dx
        return grad_output * local
