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
        # Wrong: only the diagonal of the Jacobian (sigmoid-style); the cross terms -y_i * y_j are missing.
        return grad_output * y * (1 - y), None
