"""Reference solution for the `batch_norm` exercise.

Per channel, over the M values of the batch and spatial positions: mu, the
biased variance var, r = 1 / sqrt(var + eps), xhat = (x - mu) * r,
y = xhat * weight + bias. With h = grad_output * weight and every mean over all
dimensions but the channel one, the chain rule through mu and var gives
    grad_x = r * (h - mean(h) - xhat * mean(h * xhat))
weight and bias are used at every position of their channel, so their
gradients sum over all dimensions but the channel one.
"""

import torch


class MyBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        mu = x.mean(dim=dims, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=dims, keepdim=True)
        r = torch.rsqrt(var + eps)
        xhat = (x - mu) * r
        # xhat, r (one per channel, eps inside) and weight are all backward needs.
        ctx.save_for_backward(xhat, r, weight)
        return xhat * weight.reshape(shape) + bias.reshape(shape)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, r, weight = ctx.saved_tensors
        dims = [0, *range(2, grad_output.dim())]
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            # The weight as (1, C, 1, 1): a bare (C,) would line up with the last dimension.
            h = grad_output * weight.reshape(r.shape)
            grad_x = r * (
                h
                - h.mean(dim=dims, keepdim=True)
                - xhat * (h * xhat).mean(dim=dims, keepdim=True)
            )
        if ctx.needs_input_grad[1]:
            grad_weight = (grad_output * xhat).sum(dim=dims)
        if ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(dim=dims)
        return grad_x, grad_weight, grad_bias, None
