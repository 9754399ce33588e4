import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: the minus sign flips the gradient for x (the weight and bias ones are right).
        return -(grad_output @ weight), grad_output.T @ x, grad_output.sum(dim=0)
