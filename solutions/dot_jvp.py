"""Reference solution for the `dot_jvp` exercise.

out = scale * sum_k x_k * y_k along the last dim. The two derivatives go in
opposite directions:
- backward (reverse mode) takes dL/dout, shaped like out, and returns one
  gradient per input, shaped like that input: dL/dx = scale * g[..., None] * y.
- jvp (forward mode) takes one tangent per input, shaped like that input, and
  returns the tangent of the output, shaped like out: the product rule, summed
  like the forward: scale * sum_k (tx_k * y_k + x_k * ty_k).
Both need x and y: saved for backward with save_for_backward and for jvp with
save_for_forward (jvp's ctx.saved_tensors holds only the latter).
"""

import torch


class ScaledDot(torch.autograd.Function):
    @staticmethod
    def forward(x, y, scale):
        return scale * (x * y).sum(dim=-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, scale = inputs
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        # grad_output is shaped like out: give it back the summed dimension.
        g = ctx.scale * grad_output.unsqueeze(-1)
        return g * y, g * x, None

    @staticmethod
    def jvp(ctx, x_t, y_t, _):
        # One tangent per forward input (None for scale), one tangent back per output.
        x, y = ctx.saved_tensors
        return ctx.scale * (x_t * y + x * y_t).sum(dim=-1)
