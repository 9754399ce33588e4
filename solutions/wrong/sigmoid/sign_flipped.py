import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.sigmoid(x)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        # Wrong: (output - 1) flips the sign.
        return grad_output * output * (output - 1)
