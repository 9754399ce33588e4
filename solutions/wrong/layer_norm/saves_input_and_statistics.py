"""Right gradients, but forward keeps x, x̂, the mean and 1/σ: x̂ and 1/σ are all the
backward needs (x is x̂ / rstd + mu). The save_less follow-up fails it."""

import torch


class MyLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mu = x.mean(dim=-1, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
        rstd = torch.rsqrt(var + eps)
        xhat = (x - mu) * rstd
        ctx.save_for_backward(x, xhat, mu, rstd, weight)
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, xhat, mu, rstd, weight = ctx.saved_tensors
        batch_dims = tuple(range(grad_output.dim() - 1))
        gh = grad_output * weight
        grad_x = rstd * (
            gh - gh.mean(dim=-1, keepdim=True) - xhat * (gh * xhat).mean(dim=-1, keepdim=True)
        )
        grad_weight = (grad_output * xhat).sum(dim=batch_dims)
        grad_bias = grad_output.sum(dim=batch_dims)
        return grad_x, grad_weight, grad_bias, None
