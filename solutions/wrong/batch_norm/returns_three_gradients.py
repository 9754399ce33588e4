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
        ctx.save_for_backward(xhat, r, weight)
        return xhat * weight.reshape(shape) + bias.reshape(shape)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, r, weight = ctx.saved_tensors
        dims = [0, *range(2, grad_output.dim())]
        h = grad_output * weight.reshape(r.shape)
        grad_x = r * (h - h.mean(dim=dims, keepdim=True) - xhat * (h * xhat).mean(dim=dims, keepdim=True))
        grad_weight = (grad_output * xhat).sum(dim=dims)
        grad_bias = grad_output.sum(dim=dims)
        # Wrong: forward takes four inputs (x, weight, bias, eps); the None for eps is missing.
        return grad_x, grad_weight, grad_bias
