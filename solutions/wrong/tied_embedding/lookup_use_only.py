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
        # Wrong: the embedding's gradient alone, as if weight.T in the projection
        # were a constant: the second use of the table is forgotten.
        grad_weight = torch.zeros_like(weight)
        grad_weight.index_add_(0, indices.reshape(-1), g @ weight)
        return None, grad_weight
