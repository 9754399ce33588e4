import torch


class MyLogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        m = x.amax(dim=dim, keepdim=True)
        shifted = x - m
        y = shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))
        ctx.save_for_backward(x)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: recomputes softmax from x without subtracting the max: exp(1000) = inf, inf / inf = nan.
        exps = torch.exp(x)
        softmax = exps / exps.sum(dim=ctx.dim, keepdim=True)
        return grad_output - softmax * grad_output.sum(dim=ctx.dim, keepdim=True), None
