import torch


class ScaledDot(torch.autograd.Function):
    @staticmethod
    def forward(x, y, scale):
        return scale * (x * y).sum(dim=-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, scale = inputs
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        g = ctx.scale * grad_output.unsqueeze(-1)
        grad_x = g * y
        grad_y = g * y
        return grad_x, grad_y, None

    @staticmethod
    def jvp(ctx, x_t, y_t, _):
        x, y = ctx.saved_tensors
        return ctx.scale * (x_t * y + x * y_t).sum(dim=-1)
