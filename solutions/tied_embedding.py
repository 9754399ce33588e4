"""Reference solution for the `tied_embedding` exercise.

One table, two uses: hidden = weight[indices] looks rows up (the input
embedding), and logits = hidden @ weight.T scores every row against each
hidden vector (the output projection, tied to the embedding). By the chain
rule, a tensor used twice gets the sum of the gradients of both uses:

- through the projection: grad_output's rows, transposed, times hidden;
- through the lookup: the gradient for hidden, grad_output @ weight,
  scatter-added into the rows it was copied from.
"""

import torch


class TiedEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, weight):
        hidden = weight[indices]
        # hidden is cheap to look up again, so only the indices and the table
        # are kept.
        ctx.save_for_backward(indices, weight)
        return hidden @ weight.T

    @staticmethod
    def backward(ctx, grad_output):
        indices, weight = ctx.saved_tensors
        grad_weight = None
        if ctx.needs_input_grad[1]:
            vocab = weight.shape[0]
            # One row of V logits per lookup, flattened over every leading
            # dimension of indices (reshape: grad_output may be non-contiguous).
            g = grad_output.reshape(-1, vocab)
            flat = indices.reshape(-1)
            hidden = weight[flat]
            # Use 2, the projection logits = hidden @ weight.T: row v of weight
            # scored every hidden vector, so it collects g[:, v] times them.
            grad_weight = g.mT @ hidden
            # Use 1, the lookup: the gradient for hidden is g @ weight, and each
            # of its rows goes back to the row it was copied from. index_add_
            # adds up a row looked up several times.
            grad_weight.index_add_(0, flat, g @ weight)
        # indices holds integers: no gradient.
        return None, grad_weight
