"""Reference solution for the `linear` exercise.

y = x @ weight.T + bias, with x of shape (B, in), weight (out, in), bias (out,).
Written per element, y[i, j] = sum_k x[i, k] * weight[j, k] + bias[j], which gives
the three gradients below by the chain rule.
"""

import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        # Everything, to be safe.
        output = x @ weight.T + bias
        ctx.save_for_backward(x, weight, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, _ = ctx.saved_tensors
        grad_x = grad_weight = grad_bias = None
        # needs_input_grad has one flag per forward input: skip work nobody asked for.
        if ctx.needs_input_grad[0]:
            # (B, out) @ (out, in) -> (B, in), the shape of x.
            grad_x = grad_output @ weight
        if ctx.needs_input_grad[1]:
            # (out, B) @ (B, in) -> (out, in), the shape of weight. The sum over the
            # batch happens inside the matrix product: every row of x used weight.
            grad_weight = grad_output.T @ x
        if ctx.needs_input_grad[2]:
            # bias was added to every row of the batch, so its gradient is the sum
            # of the upstream gradient over the batch: (B, out) -> (out,).
            grad_bias = grad_output.sum(dim=0)
        return grad_x, grad_weight, grad_bias
