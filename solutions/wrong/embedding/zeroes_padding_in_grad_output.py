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
        # Wrong: silences the padding positions by writing zeros into grad_output
        # itself (rows is a view of it). The sum is right, because the padding row
        # is zeroed below anyway, but grad_output belongs to autograd.
        rows[flat == ctx.padding_idx % ctx.num_rows] = 0
        grad_weight = grad_output.new_zeros(ctx.num_rows, dim)
        grad_weight.index_add_(0, flat, rows)
        grad_weight[ctx.padding_idx] = 0
        return None, grad_weight, None
