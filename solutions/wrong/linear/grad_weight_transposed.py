import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: x.T @ grad_output is (in, out), the transpose of the weight gradient.
        return grad_output @ weight, x.T @ grad_output, grad_output.sum(dim=0)
