import torch


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * x + y * y, x * y

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        x, y = ctx.saved_tensors
        # Wrong: grad_out2 is never used; out2 = x * y also sends gradient to x and y.
        grad_x = 2 * x * grad_out1
        grad_y = 2 * y * grad_out1
        return grad_x, grad_y
