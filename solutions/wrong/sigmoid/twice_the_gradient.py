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
        # Wrong: the factor 2 does not belong; the derivative is output * (1 - output).
        return 2 * grad_output * output * (1 - output)
