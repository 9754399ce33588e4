import torch


class TiedEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices, weight)
        return weight[indices] @ weight.T

    @staticmethod
    def backward(ctx, grad_output):
        indices, weight = ctx.saved_tensors
        g = grad_output.reshape(-1, weight.shape[0])
        flat = indices.reshape(-1)
        grad_weight = g.mT @ weight[flat]
        grad_weight.index_add_(0, flat, g @ weight)
        # Wrong: forward takes (indices, weight), so backward must return two
        # values, None for the integer indices.
        return grad_weight
