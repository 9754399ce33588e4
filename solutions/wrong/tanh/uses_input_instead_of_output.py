import torch


class MyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: the derivative is 1 - tanh(x)^2, written with the output, not 1 - x^2.
        return grad_output * (1 - x * x)
