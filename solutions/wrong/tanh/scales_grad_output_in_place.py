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
        # Wrong: *= writes into grad_output, a tensor autograd owns.
        grad_output *= 1 - output * output
        return grad_output
