import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        grad_x = grad_weight = grad_bias = None
        # Wrong: the flags for x (index 0) and weight (index 1) are swapped.
        if ctx.needs_input_grad[1]:
            grad_x = grad_output @ weight
        if ctx.needs_input_grad[0]:
            grad_weight = grad_output.T @ x
        if ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(dim=0)
        return grad_x, grad_weight, grad_bias
