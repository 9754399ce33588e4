import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        grad_x = grad_output @ weight
        grad_weight = grad_output.T @ x
        grad_bias = grad_output[0]
        for row in grad_output[1:]:
            # Wrong: grad_bias is a view of grad_output's first row, so += writes into grad_output.
            grad_bias += row
        return grad_x, grad_weight, grad_bias
