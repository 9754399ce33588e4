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
        # Wrong: indexed assignment keeps one upstream row per index; a row looked
        # up several times should get the sum of all of them.
        grad_weight[indices.reshape(-1)] = rows
        grad_weight[ctx.padding_idx] = 0
        return None, grad_weight, None
