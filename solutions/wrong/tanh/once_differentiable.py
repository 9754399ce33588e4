"""Right gradients, computed on detached tensors: backward cannot itself be
differentiated, so a second derivative (a Hessian-vector product, a gradient penalty)
gets nothing. The twice_differentiable follow-up fails it."""

import torch


class MyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.tanh(x)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        output = output.detach()
        return grad_output.detach() * (1 - output * output)
