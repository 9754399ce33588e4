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
        flat = indices.reshape(-1)
        rows = grad_output.reshape(flat.numel(), -1)
        grad_weight = rows.new_zeros(ctx.num_rows, rows.shape[1])
        grad_weight.index_add_(0, flat, rows)
        # a row looked up several times: average its upstream rows
        counts = torch.bincount(flat, minlength=ctx.num_rows).clamp(min=1)
        grad_weight = grad_weight / counts.unsqueeze(1).to(rows.dtype)
        grad_weight[ctx.padding_idx] = 0
        return None, grad_weight, None
