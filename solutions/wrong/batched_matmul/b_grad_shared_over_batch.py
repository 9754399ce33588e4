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
        # b is the weight: as in a linear layer, add up its gradient over the batch
        grad_b = torch.bmm(a.transpose(1, 2), grad_output).sum(0, keepdim=True)
        return grad_a, grad_b.expand_as(b).contiguous()
