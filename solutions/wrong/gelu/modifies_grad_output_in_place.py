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
        local = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * du_dx
        # Wrong: mul_ writes into grad_output, which autograd may share with other functions.
        return grad_output.mul_(local)
