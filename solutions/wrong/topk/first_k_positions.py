import torch


class TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        values, indices = torch.topk(x, k, dim=-1)
        ctx.mark_non_differentiable(indices)
        ctx.x_shape = x.shape
        return values, indices

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        # Wrong: as if the k largest values sat in the first k positions of x.
        grad_x = grad_out1.new_zeros(ctx.x_shape)
        grad_x[..., : grad_out1.shape[-1]] = grad_out1
        return grad_x, None
