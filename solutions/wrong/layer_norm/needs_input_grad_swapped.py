import torch


class MyLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mu = x.mean(dim=-1, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
        rstd = torch.rsqrt(var + eps)
        xhat = (x - mu) * rstd
        ctx.save_for_backward(xhat, rstd, weight)
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, grad_output):
        xhat, rstd, weight = ctx.saved_tensors
        batch_dims = tuple(range(grad_output.dim() - 1))
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            gh = grad_output * weight
            grad_x = rstd * (gh - gh.mean(dim=-1, keepdim=True) - xhat * (gh * xhat).mean(dim=-1, keepdim=True))
        # Wrong: tests the flag of bias (2) before the weight gradient and of weight (1) before the bias one.
        if ctx.needs_input_grad[2]:
            grad_weight = (grad_output * xhat).sum(dim=batch_dims)
        if ctx.needs_input_grad[1]:
            grad_bias = grad_output.sum(dim=batch_dims)
        return grad_x, grad_weight, grad_bias, None
