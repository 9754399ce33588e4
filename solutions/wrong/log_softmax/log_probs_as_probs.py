import torch


class MyLogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = x - torch.logsumexp(x, dim=dim, keepdim=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        # y_i = x_i - LSE, and dLSE/dx_j is the softmax, which I saved as y
        total = grad_output.sum(dim=ctx.dim, keepdim=True)
        return grad_output - y * total, None
