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
        grad_weight = grad_output.new_zeros(ctx.num_rows, dim)
        grad_weight.index_add_(0, indices.reshape(-1), rows)
        # Wrong: padding_idx is ignored; its row gets a gradient like any other.
        return None, grad_weight, None
