import torch


class MySoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        shifted = x - x.amax(dim=dim, keepdim=True)
        exps = torch.exp(shifted)
        y = exps / exps.sum(dim=dim, keepdim=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        dim = ctx.dim
        # Wrong: mul_ writes g * y into grad_output, which autograd may share with other functions.
        gy = grad_output.mul_(y)
        return gy - y * gy.sum(dim=dim, keepdim=True), None
