import torch


class MySiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: keeps only the sigmoid term of the product rule, as if x were a constant factor.
        return grad_output * torch.sigmoid(x)
