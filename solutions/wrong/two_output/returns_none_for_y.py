import torch


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * x + y * y, x * y

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        x, y = ctx.saved_tensors
        # Wrong: y requires grad and reaches both outputs; None is only for inputs that need no gradient.
        return 2 * x * grad_out1 + y * grad_out2, None
