import torch


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        full_a = torch.matmul(grad_output, b.mT)
        full_b = torch.matmul(a.mT, grad_output)
        # Wrong: sums the leading dimensions an input lacks, but forgets its size-1 dimensions.
        grad_a = full_a.sum(dim=tuple(range(full_a.dim() - a.dim()))) if full_a.dim() > a.dim() else full_a
        grad_b = full_b.sum(dim=tuple(range(full_b.dim() - b.dim()))) if full_b.dim() > b.dim() else full_b
        return grad_a, grad_b
