import torch


class MyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.tanh(x)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        # Wrong: (output^2 - 1) flips the sign; tanh is increasing.
        return grad_output * (output * output - 1)
