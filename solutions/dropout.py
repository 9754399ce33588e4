"""Reference solution for the `dropout` exercise.

y = x * mask / (1 - p), element by element, with the mask and p constants.
dy_i/dx_i = mask_i / (1 - p), so backward applies to grad_output exactly what
forward applied to x. The mask must be the one forward used, so it is saved;
p is a Python float, kept on ctx. Neither gets a gradient.
"""

import torch


class MyDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask, p):
        ctx.save_for_backward(mask)
        ctx.p = p
        return x * mask / (1 - p)

    @staticmethod
    def backward(ctx, grad_output):
        (mask,) = ctx.saved_tensors
        grad_x = None
        if ctx.needs_input_grad[0]:
            # The same scaling as forward, applied to the upstream gradient; with
            # an integer or bool mask the result takes grad_output's dtype (a
            # float mask wider than grad_output would promote it).
            grad_x = grad_output * mask / (1 - ctx.p)
        return grad_x, None, None
