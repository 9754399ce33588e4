import torch


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        # Wrong: tests b's flag (1) before a's gradient and a's flag (0) before b's.
        if ctx.needs_input_grad[1]:
            grad_a = torch.matmul(grad_output, b.mT).sum_to_size(a.shape)
        if ctx.needs_input_grad[0]:
            grad_b = torch.matmul(a.mT, grad_output).sum_to_size(b.shape)
        return grad_a, grad_b
