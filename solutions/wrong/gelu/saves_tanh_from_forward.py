"""Wrong for the follow-up `twice_differentiable`: right gradients, but backward
reads t = tanh(u), which forward computed and saved.

Inside forward autograd records nothing, so to a second differentiation the saved
t is a constant: the second derivative misses every term through t's own slope.
Computing t again in backward from the saved x keeps it a function of x.
"""

import math

import torch

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
COEFF = 0.044715


class MyGELU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        u = SQRT_2_OVER_PI * (x + COEFF * x**3)
        t = torch.tanh(u)
        # Wrong for the follow-up: t was computed where autograd does not record.
        ctx.save_for_backward(x, t)
        return 0.5 * x * (1 + t)

    @staticmethod
    def backward(ctx, grad_output):
        x, t = ctx.saved_tensors
        # Derivative of the polynomial inside tanh (the cubic gives the x**2 term).
        du_dx = SQRT_2_OVER_PI * (1 + 3 * COEFF * x**2)
        # Product rule: (0.5 x)' (1 + t) + 0.5 x (1 + t)', with (1 + t)' = (1 - t**2) du/dx.
        local = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * du_dx
        return grad_output * local
