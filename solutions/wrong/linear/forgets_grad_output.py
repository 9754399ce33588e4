import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: assumes the upstream gradient is all ones instead of using grad_output.
        ones = torch.ones_like(grad_output)
        return ones @ weight, ones.T @ x, ones.sum(dim=0)
