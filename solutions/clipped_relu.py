"""Reference solution for the `clipped_relu` exercise.

y = clamp(x, 0, clip_val) has slope 1 where 0 < x < clip_val and slope 0 elsewhere
(it is flat on both clipped sides), so the gradient is grad_output masked to the
middle region.
"""

import torch


class ClippedReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_tensor, clip_val):
        # save_for_backward only takes tensors; clip_val is a Python float, so it
        # goes on ctx as a plain attribute.
        ctx.save_for_backward(input_tensor)
        ctx.clip_val = clip_val
        return torch.clamp(input_tensor, 0, clip_val)

    @staticmethod
    def backward(ctx, grad_output):
        (input_tensor,) = ctx.saved_tensors
        # True where the output followed the input (slope 1), False where it was
        # clipped to 0 or to clip_val (slope 0). At exactly 0 or clip_val the
        # function has a kink; any choice there is a valid subgradient.
        passed_through = (input_tensor > 0) & (input_tensor < ctx.clip_val)
        # Multiplying by a bool mask keeps grad_output's dtype. One value per
        # forward input: clip_val is not a tensor, so its gradient is None.
        return grad_output * passed_through, None
