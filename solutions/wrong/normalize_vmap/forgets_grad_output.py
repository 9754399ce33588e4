import torch


class Normalize(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x / x.norm(dim=-1, keepdim=True)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        # Wrong: grad_output never appears; this is the projection of ones.
        ones = torch.ones_like(y)
        along = (y * ones).sum(dim=-1, keepdim=True)
        return (ones - y * along) / x.norm(dim=-1, keepdim=True)
