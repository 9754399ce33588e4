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
        p = x - y.unsqueeze(-1)
        p.exp_()
        # Wrong for double backward: exp_ saved its result, and mul_ overwrites it.
        p.mul_(grad_output.unsqueeze(-1))
        return p
