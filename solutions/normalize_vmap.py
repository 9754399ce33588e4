"""Reference solution for the `normalize_vmap` exercise.

y = x / ‖x‖ along the last dim. Its Jacobian is (I − y yᵀ) / ‖x‖, symmetric,
so backward projects grad_output onto the plane orthogonal to y and divides
by the norm: (g − y (y · g)) / ‖x‖.

For torch.func: forward takes no ctx and setup_context saves what backward
needs; generate_vmap_rule = True lets torch.func.vmap run forward,
setup_context and backward on batched tensors. That works because every op
here is batchable: no .item(), no writes into fresh tensors, no branches on
values.
"""

import torch


class Normalize(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x / x.norm(dim=-1, keepdim=True)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        along = (y * grad_output).sum(dim=-1, keepdim=True)
        return (grad_output - y * along) / x.norm(dim=-1, keepdim=True)
