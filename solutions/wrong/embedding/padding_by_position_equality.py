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
        # Wrong: drops the positions whose index equals padding_idx. For a negative
        # padding_idx no index is ever equal to it (indices are >= 0), so the
        # padding row keeps its gradient.
        keep = (flat != ctx.padding_idx).unsqueeze(1)
        grad_weight = grad_output.new_zeros(ctx.num_rows, dim)
        grad_weight.index_add_(0, flat, rows * keep)
        return None, grad_weight, None
