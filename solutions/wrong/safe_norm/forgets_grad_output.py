import torch


class SafeNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        norm = torch.linalg.vector_norm(x, dim=-1)
        ctx.save_for_backward(x, norm)
        return norm

    @staticmethod
    def backward(ctx, grad_output):
        x, norm = ctx.saved_tensors
        divisor = torch.where(norm > 0, norm, torch.ones_like(norm))
        # Wrong: the local derivative x / ‖x‖ is returned as it is, never
        # multiplied by the upstream gradient of each row.
        return x / divisor.unsqueeze(-1)
