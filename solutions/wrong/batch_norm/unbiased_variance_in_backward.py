import torch


class MyBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        mu = x.mean(dim=dims, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=dims, keepdim=True)
        xhat = (x - mu) * torch.rsqrt(var + eps)
        return xhat * weight.reshape(shape) + bias.reshape(shape)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        dims = [0, *range(2, x.dim())]
        mu = x.mean(dim=dims, keepdim=True)
        # Wrong: torch.var divides by M - 1 by default; forward normalised with the biased variance.
        var = x.var(dim=dims, keepdim=True)
        r = torch.rsqrt(var + ctx.eps)
        xhat = (x - mu) * r
        h = grad_output * weight.reshape(r.shape)
        grad_x = r * (h - h.mean(dim=dims, keepdim=True) - xhat * (h * xhat).mean(dim=dims, keepdim=True))
        grad_weight = (grad_output * xhat).sum(dim=dims)
        grad_bias = grad_output.sum(dim=dims)
        return grad_x, grad_weight, grad_bias, None
