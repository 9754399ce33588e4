import torch


class MyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # Wrong: exp(x) overflows to inf for large |x| (x = 100 in float32), and inf / inf is nan.
        output = (torch.exp(x) - torch.exp(-x)) / (torch.exp(x) + torch.exp(-x))
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        return grad_output * (1 - output * output)
