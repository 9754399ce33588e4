import torch


class MyRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ctx.save_for_backward(x, weight)
        r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
        return x * r * weight

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        # Wrong: forward's r had eps inside; this one does not.
        r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True))
        xhat = x * r
        h = grad_output * weight
        grad_x = r * (h - xhat * (h * xhat).mean(dim=-1, keepdim=True))
        grad_weight = (grad_output * xhat).sum_to_size(weight.shape)
        return grad_x, grad_weight, None
