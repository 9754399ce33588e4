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
        x, _t = ctx.saved_tensors
        cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * x**2) / math.sqrt(2.0 * math.pi)
        # Wrong: this is the derivative of the exact GELU x * Phi(x), not of the tanh approximation in forward.
        return grad_output * (cdf + x * pdf)
