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
        from_projection = g.mT @ weight[flat]
        from_lookup = torch.zeros_like(weight).index_add_(0, flat, g @ weight)
        # Wrong: a shared weight gets the sum of its uses' gradients, not their
        # mean: each use is a separate path from weight to the loss.
        return None, (from_projection + from_lookup) / 2
