import torch


class Normalize(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        n = x.norm(dim=-1, keepdim=True)
        # Wrong under vmap: .item() needs one number, and a batch has many.
        if n.min().item() == 0.0:
            raise ValueError("cannot normalize a zero vector")
        return x / n

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        along = (y * grad_output).sum(dim=-1, keepdim=True)
        return (grad_output - y * along) / x.norm(dim=-1, keepdim=True)
