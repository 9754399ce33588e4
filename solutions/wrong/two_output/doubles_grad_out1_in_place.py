import torch


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * x + y * y, x * y

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        x, y = ctx.saved_tensors
        # Wrong: *= writes into grad_out1, a tensor autograd owns.
        grad_out1 *= 2
        grad_x = x * grad_out1 + y * grad_out2
        grad_y = y * grad_out1 + x * grad_out2
        return grad_x, grad_y
