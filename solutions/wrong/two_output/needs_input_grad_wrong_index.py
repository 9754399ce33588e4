import torch


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * x + y * y, x * y

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        x, y = ctx.saved_tensors
        grad_x = grad_y = None
        if ctx.needs_input_grad[0]:
            grad_x = 2 * x * grad_out1 + y * grad_out2
        # Wrong: index 0 is x; the flag for y is ctx.needs_input_grad[1].
        if ctx.needs_input_grad[0]:
            grad_y = 2 * y * grad_out1 + x * grad_out2
        return grad_x, grad_y
