import torch


class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=-1, keepdim=True)
        e = (x - m).exp()
        s = e.sum(dim=-1, keepdim=True)
        # Wrong for double backward: p is computed here, outside autograd's sight;
        # in backward it is a constant, so the second derivative loses its term.
        ctx.save_for_backward(e / s)
        return s.log().squeeze(-1) + m.squeeze(-1)

    @staticmethod
    def backward(ctx, grad_output):
        (p,) = ctx.saved_tensors
        return grad_output.unsqueeze(-1) * p
