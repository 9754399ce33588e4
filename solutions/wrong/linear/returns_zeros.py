import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: placeholder zeros instead of the three gradients.
        return torch.zeros_like(x), torch.zeros_like(weight), torch.zeros(weight.shape[0], dtype=x.dtype)
