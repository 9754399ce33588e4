import torch


class MyExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return torch.exp(input)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Wrong: the saved tensor is x, not exp(x); the derivative is exp(input).
        return grad_output * input
