import torch


class TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        values, indices = torch.topk(x, k, dim=-1)
        # Wrong: the indices are never marked non-differentiable.
        ctx.save_for_backward(indices)
        ctx.x_shape = x.shape
        return values, indices

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        (indices,) = ctx.saved_tensors
        return grad_out1.new_zeros(ctx.x_shape).scatter(-1, indices, grad_out1), None
