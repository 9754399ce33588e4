import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: weight.T is (in, out); grad_x is grad_output @ weight.
        return grad_output @ weight.T, grad_output.T @ x, grad_output.sum(dim=0)
