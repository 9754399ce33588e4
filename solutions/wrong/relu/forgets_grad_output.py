import torch


class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Wrong: returns the local derivative alone; the chain rule needs grad_output * mask.
        return (input > 0).to(grad_output.dtype)
