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
        # Wrong: `+=` with an index that repeats reads all the old rows, adds,
        # then writes each row back once: a token looked up k times keeps one
        # of its k contributions.
        grad_weight[flat] += g @ weight
        return None, grad_weight
