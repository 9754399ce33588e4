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
        h = grad_output * weight
        grad_x = r * (h - xhat * (h * xhat).mean(dim=-1, keepdim=True))
        grad_weight = (grad_output * xhat).sum_to_size(weight.shape)
        # Wrong: forward takes three inputs (x, weight, eps); the None for eps is missing.
        return grad_x, grad_weight
