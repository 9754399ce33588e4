import torch


class MyBatchedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        B, n, k = a.shape
        m = b.shape[2]
        # swap the last two sizes to get the transposes
        b_t = b.reshape(B, m, k)
        a_t = a.reshape(B, k, n)
        return torch.bmm(grad_output, b_t), torch.bmm(a_t, grad_output)
