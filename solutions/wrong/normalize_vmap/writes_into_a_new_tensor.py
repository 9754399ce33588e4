import torch


class Normalize(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        # Wrong under vmap: torch.zeros(x.shape) is one sample, x / n a whole batch.
        out = torch.zeros(x.shape, dtype=x.dtype)
        out.copy_(x / x.norm(dim=-1, keepdim=True))
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        along = (y * grad_output).sum(dim=-1, keepdim=True)
        return (grad_output - y * along) / x.norm(dim=-1, keepdim=True)
