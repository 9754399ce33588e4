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
        # Wrong: a mean over the rows instead of a sum.
        per_row = (grad_output * xhat).reshape(-1, weight.shape[0])
        grad_weight = per_row.mean(dim=0)
        return grad_x, grad_weight, None
