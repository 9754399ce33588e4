import torch


class TiedEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices, weight)
        return weight[indices] @ weight.T

    @staticmethod
    def backward(ctx, grad_output):
        indices, weight = ctx.saved_tensors
        hidden = weight[indices]
        # Wrong: right for a 1-D batch of indices only. index_add_ wants one
        # index per row, a vector: a (B, T) batch must be flattened first.
        grad_weight = torch.einsum("...v,...d->vd", grad_output, hidden)
        grad_weight.index_add_(0, indices, grad_output @ weight)
        return None, grad_weight
