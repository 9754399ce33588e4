import torch


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * x + y * y, x * y

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        x, y = ctx.saved_tensors
        grad_x = 2 * x * grad_out1 + y * grad_out2
        grad_y = 2 * y * grad_out1 + x * grad_out2
        # Wrong: gradients must come in the order of forward's inputs, x first.
        return grad_y, grad_x
