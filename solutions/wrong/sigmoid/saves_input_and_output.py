"""Right gradients, but forward keeps both x and σ(x): σ′ needs σ alone, so backward
can keep half as much. The save_output_only follow-up fails it."""

import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.sigmoid(x)
        ctx.save_for_backward(x, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        x, output = ctx.saved_tensors
        return grad_output * output * (1 - output)
