"""Reference solution for the `info_nce` exercise.

With S = a @ b.T / temperature (N x N) and the matched pairs on its diagonal,
the loss is the mean of two cross-entropies over S: each row i classifies a_i
among all the b's (target i), each column j classifies b_j among all the a's
(target j). Each cross-entropy's gradient for its scores is softmax minus the
one-hot target, so, with P the row softmax and Q the column softmax of S,
    grad_S = grad_output * (P + Q - 2 I) / (2 N)
and through the matrix product and the temperature, as for a linear layer,
    grad_a = grad_S @ b / temperature,  grad_b = grad_S.T @ a / temperature.
"""

import torch


class MyInfoNCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, temperature):
        logits = a @ b.T / temperature
        positive = logits.diagonal()
        loss_ab = (torch.logsumexp(logits, dim=1) - positive).mean()
        loss_ba = (torch.logsumexp(logits, dim=0) - positive).mean()
        # The logits give both softmaxes again in backward; a and b are the
        # other factor of the product for each other.
        ctx.save_for_backward(a, b, logits)
        ctx.temperature = temperature
        return (loss_ab + loss_ba) / 2

    @staticmethod
    def backward(ctx, grad_output):
        a, b, logits = ctx.saved_tensors
        n = logits.shape[0]
        eye = torch.eye(n, dtype=logits.dtype, device=logits.device)
        # a -> b: each row is a softmax over the b's; b -> a: each column is a
        # softmax over the a's. Both have their target on the diagonal.
        rows = torch.softmax(logits, dim=1)
        columns = torch.softmax(logits, dim=0)
        grad_logits = (rows + columns - 2 * eye) * (grad_output / (2 * n))
        # logits[i, j] = a_i . b_j / temperature.
        scaled = grad_logits / ctx.temperature
        grad_a = scaled @ b if ctx.needs_input_grad[0] else None
        grad_b = scaled.T @ a if ctx.needs_input_grad[1] else None
        # temperature is a Python float: None.
        return grad_a, grad_b, None
