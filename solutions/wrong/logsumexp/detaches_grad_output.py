import torch


class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=-1, keepdim=True)
        y = (x - m).exp().sum(dim=-1).log() + m.squeeze(-1)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        # Wrong: the result no longer depends differentiably on grad_output.
        g = grad_output.detach().unsqueeze(-1)
        return g * torch.exp(x - y.unsqueeze(-1))
