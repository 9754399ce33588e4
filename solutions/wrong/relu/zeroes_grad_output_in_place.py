import torch


class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Wrong: no clone, so this zeroes elements of grad_output itself, a tensor autograd owns.
        grad_output[input < 0] = 0
        return grad_output
