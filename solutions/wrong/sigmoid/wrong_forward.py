import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # Wrong: exp(x) instead of exp(-x) computes sigma(-x).
        output = 1.0 / (1.0 + torch.exp(x))
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        return grad_output * output * (1 - output)
