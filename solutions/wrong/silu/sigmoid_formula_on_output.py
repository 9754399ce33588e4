import torch


class MySiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        # Wrong: y(1 - y) is the sigmoid's slope in terms of its output; y here is x * sigmoid(x).
        return grad_output * y * (1 - y)
