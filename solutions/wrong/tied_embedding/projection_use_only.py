import torch


class TiedEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, weight):
        hidden = weight[indices]
        ctx.save_for_backward(hidden)
        return hidden @ weight.T

    @staticmethod
    def backward(ctx, grad_output):
        (hidden,) = ctx.saved_tensors
        vocab, dim = grad_output.shape[-1], hidden.shape[-1]
        g = grad_output.reshape(-1, vocab)
        # Wrong: the gradient of the output projection alone, as if weight.T
        # were a separate matrix: the lookup that made hidden is forgotten.
        return None, g.mT @ hidden.reshape(-1, dim)
