import torch


class MyExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return torch.exp(input)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Wrong: exp(-x) is not the derivative of exp(x); that is exp(x) itself.
        return grad_output * torch.exp(-input)
