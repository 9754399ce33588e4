"""Right gradients, but forward keeps both x and tanh(x): tanh′ needs tanh alone. The
save_output_only follow-up fails it."""

import torch


class MyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.tanh(x)
        ctx.save_for_backward(x, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        x, output = ctx.saved_tensors
        return grad_output * (1 - output * output)
