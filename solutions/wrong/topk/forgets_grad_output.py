import torch


class TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        values, indices = torch.topk(x, k, dim=-1)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.x_shape = x.shape
        return values, indices

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        (indices,) = ctx.saved_tensors
        # Wrong: marks the selected positions with 1 instead of sending grad_out1 there.
        ones = torch.ones_like(grad_out1)
        return grad_out1.new_zeros(ctx.x_shape).scatter(-1, indices, ones), None
