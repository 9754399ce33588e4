import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: forward has three inputs, so backward must return three values (bias is missing).
        return grad_output @ weight, grad_output.T @ x
