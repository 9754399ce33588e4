import torch


class MyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        # tanh(x) = 2 * sigmoid(2x) - 1
        return 2 * torch.sigmoid(2 * x) - 1

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(2 * x)
        # Wrong: d/dx sigmoid(2x) is 2 * s * (1 - s); the inner factor 2 is missing, so this is half the gradient.
        return grad_output * 2 * s * (1 - s)
