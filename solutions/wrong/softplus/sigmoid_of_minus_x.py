import torch


class MySoftplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: sigmoid(-x) = 1 - sigmoid(x) is softplus's slope at -x, not at x (softplus(x) has slope sigmoid(x)).
        return grad_output * torch.sigmoid(-x)
