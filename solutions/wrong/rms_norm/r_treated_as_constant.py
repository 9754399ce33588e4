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
        # Wrong: r depends on the whole row; this keeps only the direct path x -> xhat.
        grad_x = grad_output * weight * r
        grad_weight = (grad_output * xhat).sum_to_size(weight.shape)
        return grad_x, grad_weight, None
