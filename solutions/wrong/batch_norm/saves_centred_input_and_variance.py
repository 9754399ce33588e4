"""Wrong for the follow-up `save_less`: right gradients, but forward keeps x, the
centred x − μ and the variance, and backward makes x̂ and 1/σ from them.

x and x − μ are each as large as the batch of activations: twice what backward
needs, when x̂ (or x) and one 1/σ per channel are enough.
"""

import torch


class MyBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        centred = x - x.mean(dim=dims, keepdim=True)
        var = (centred**2).mean(dim=dims, keepdim=True)
        # Wrong for the follow-up: two tensors the size of x.
        ctx.save_for_backward(x, centred, var, weight)
        ctx.eps = eps
        return centred * torch.rsqrt(var + eps) * weight.reshape(shape) + bias.reshape(shape)

    @staticmethod
    def backward(ctx, grad_output):
        x, centred, var, weight = ctx.saved_tensors
        dims = [0, *range(2, grad_output.dim())]
        r = torch.rsqrt(var + ctx.eps)
        xhat = centred * r
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
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
