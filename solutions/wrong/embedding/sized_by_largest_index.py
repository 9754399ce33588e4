import torch


class MyEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, weight, padding_idx):
        ctx.save_for_backward(indices)
        ctx.num_rows = weight.shape[0]
        ctx.padding_idx = padding_idx
        return weight[indices]

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        dim = grad_output.shape[-1]
        rows = grad_output.reshape(-1, dim)
        flat = indices.reshape(-1)
        # Wrong: the gradient gets one row per row that was looked up, up to the
        # largest index, instead of one row per row of weight.
        grad_weight = grad_output.new_zeros(int(flat.max()) + 1, dim)
        grad_weight.index_add_(0, flat, rows)
        grad_weight[ctx.padding_idx] = 0
        return None, grad_weight, None
