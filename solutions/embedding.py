"""Reference solution for the `embedding` exercise.

out[..., :] = weight[indices[...], :]: a lookup, one row of weight per index.
Row r of weight receives the sum of the upstream rows of every position that
looked it up (none if nobody did), except the padding row, which receives
nothing by definition even though it is looked up and returned.
"""

import torch


class MyEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, weight, padding_idx):
        # backward needs the indices (a tensor) and the number of rows and the
        # padding index (plain ints); not the values of weight.
        ctx.save_for_backward(indices)
        ctx.num_rows = weight.shape[0]
        ctx.padding_idx = padding_idx
        return weight[indices]

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        grad_weight = None
        if ctx.needs_input_grad[1]:
            dim = grad_output.shape[-1]
            # One upstream row per looked-up index, flattened over every
            # leading dimension. reshape, not view: grad_output may be
            # non-contiguous or expanded.
            rows = grad_output.reshape(-1, dim)
            grad_weight = grad_output.new_zeros(ctx.num_rows, dim)
            # index_add_ adds every row at its index: an index that occurs k
            # times collects k upstream rows. (Plain assignment would keep one.)
            grad_weight.index_add_(0, indices.reshape(-1), rows)
            # The padding row gets no gradient. Python indexing makes a negative
            # padding_idx count from the end, as F.embedding does.
            grad_weight[ctx.padding_idx] = 0
        # indices is an int64 tensor and padding_idx a Python int: no gradients.
        return None, grad_weight, None
