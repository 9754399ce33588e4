import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: squeeze(0) only drops the batch dimension when B == 1; the bias gradient is a sum over it.
        return grad_output @ weight, grad_output.T @ x, grad_output.squeeze(0)
