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
        # Wrong: - mean(h) is the path through a row mean, which RMSNorm never subtracts.
        grad_x = r * (h - h.mean(dim=-1, keepdim=True) - xhat * (h * xhat).mean(dim=-1, keepdim=True))
        grad_weight = (grad_output * xhat).sum_to_size(weight.shape)
        return grad_x, grad_weight, None
