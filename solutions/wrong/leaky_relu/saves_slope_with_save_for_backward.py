import torch


class MyLeakyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, negative_slope):
        # Wrong: save_for_backward takes tensors only; a float belongs on ctx as an attribute.
        ctx.save_for_backward(x, negative_slope)
        return torch.where(x > 0, x, x * negative_slope)

    @staticmethod
    def backward(ctx, grad_output):
        x, negative_slope = ctx.saved_tensors
        return torch.where(x > 0, grad_output, grad_output * negative_slope), None
