"""Reference solution for the `mlp` exercise.

A two-layer classifier and its loss in one Function:
    pre = x @ W1 + b1, h = tanh(pre), logits = h @ W2 + b2,
    loss = mean over the batch of -log_softmax(logits)[n, target[n]].
Backward walks the chain in reverse, one local derivative at a time, as in
Karpathy's "Becoming a backprop ninja": the loss, the second linear layer,
tanh, the first linear layer. x requires grad too (it could be the output of
an embedding), so its gradient is returned as well.
"""

import torch


class MyMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, W1, b1, W2, b2, target):
        n = x.shape[0]
        rows = torch.arange(n, device=x.device)
        h = torch.tanh(x @ W1 + b1)
        logits = h @ W2 + b2
        # Stable log-softmax: exponentiate only numbers <= 0.
        shifted = logits - logits.amax(dim=1, keepdim=True)
        log_probs = shifted - torch.log(torch.exp(shifted).sum(dim=1, keepdim=True))
        loss = -log_probs[rows, target].mean()
        # tanh's derivative is 1 - h**2, written with its output: save h, not
        # the pre-activation. The probabilities serve the loss's gradient.
        ctx.save_for_backward(x, W1, W2, h, torch.exp(log_probs), target)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        x, W1, W2, h, probs, target = ctx.saved_tensors
        n = x.shape[0]
        rows = torch.arange(n, device=x.device)
        # Mean cross-entropy: (softmax - onehot) / N, times the scalar upstream.
        grad_logits = probs.clone()
        grad_logits[rows, target] -= 1
        grad_logits = grad_logits * (grad_output / n)  # (N, C)
        # logits = h @ W2 + b2
        grad_W2 = h.T @ grad_logits  # (H, C)
        grad_b2 = grad_logits.sum(dim=0)  # (C,)
        grad_h = grad_logits @ W2.T  # (N, H)
        # h = tanh(pre): d h / d pre = 1 - h**2, element by element.
        grad_pre = grad_h * (1 - h * h)  # (N, H)
        # pre = x @ W1 + b1
        grad_W1 = x.T @ grad_pre  # (D, H)
        grad_b1 = grad_pre.sum(dim=0)  # (H,)
        grad_x = grad_pre @ W1.T  # (N, D)
        # target holds class indices (int64): no gradient.
        return grad_x, grad_W1, grad_b1, grad_W2, grad_b2, None
