import torch


class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=-1, keepdim=True)
        e = (x - m).exp()
        y = e.sum(dim=-1).log() + m.squeeze(-1)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        # the softmax, shifted by the max so that exp cannot overflow
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return grad_output.unsqueeze(-1) * e
