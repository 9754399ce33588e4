import torch


class MyBatchedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = torch.bmm(grad_output, b.transpose(1, 2))
        # Wrong: flattens the batch into one matrix product, summing grad_b over the batch: (k, m).
        k, m = b.shape[1], b.shape[2]
        grad_b = a.reshape(-1, a.shape[2]).T @ grad_output.reshape(-1, m)
        return grad_a, grad_b
