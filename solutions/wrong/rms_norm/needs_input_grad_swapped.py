import torch


class MyRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
        xhat = x * r
        ctx.save_for_backward(xhat, r, weight)
        return xhat * weight

    @staticmethod
    def backward(ctx, grad_output):
        xhat, r, weight = ctx.saved_tensors
        grad_x = grad_weight = None
        # Wrong: tests weight's flag (1) before the x-gradient and x's flag (0) before weight's.
        if ctx.needs_input_grad[1]:
            h = grad_output * weight
            grad_x = r * (h - xhat * (h * xhat).mean(dim=-1, keepdim=True))
        if ctx.needs_input_grad[0]:
            grad_weight = (grad_output * xhat).sum_to_size(weight.shape)
        return grad_x, grad_weight, None
