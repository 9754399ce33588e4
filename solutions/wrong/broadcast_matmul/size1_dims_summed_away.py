import torch


def _reduce(full, shape):
    extra = full.dim() - len(shape)
    full = full.sum(dim=tuple(range(extra))) if extra else full
    stretched = tuple(i for i, size in enumerate(shape) if size == 1 and full.shape[i] != 1)
    # Wrong: no keepdim, so the size-1 dimensions disappear instead of staying as size 1.
    return full.sum(dim=stretched) if stretched else full


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = _reduce(torch.matmul(grad_output, b.mT), a.shape)
        grad_b = _reduce(torch.matmul(a.mT, grad_output), b.shape)
        return grad_a, grad_b
