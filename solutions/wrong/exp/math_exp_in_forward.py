import math

import torch


class MyExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        # Wrong: math.exp takes one number; it cannot exponentiate a tensor of several elements.
        output = math.exp(input)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        return grad_output * output
