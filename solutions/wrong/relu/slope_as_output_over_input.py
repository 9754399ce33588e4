import torch


class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        output = input.clamp(min=0)
        ctx.save_for_backward(input, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, output = ctx.saved_tensors
        # Wrong: output / input is 1 or 0 except at input == 0, where it is 0 / 0 = nan.
        return grad_output * (output / input)
