import torch


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * x + y * y, x * y

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        x, y = ctx.saved_tensors
        # Wrong: the local derivatives alone, as if both upstream gradients were ones.
        grad_x = 2 * x + y
        grad_y = 2 * y + x
        return grad_x, grad_y
