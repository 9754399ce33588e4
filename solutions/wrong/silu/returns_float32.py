import torch


class MySiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        # Wrong: casts the gradient to float32 whatever the input's dtype.
        return (grad_output * s * (1 + x * (1 - s))).float()
