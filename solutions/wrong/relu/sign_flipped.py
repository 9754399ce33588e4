import torch


class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Wrong: the minus sign does not belong; the slope of ReLU is +1 on the positive side.
        return -grad_output * (input > 0)
