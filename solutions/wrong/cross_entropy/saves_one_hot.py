"""Wrong for the follow-up `save_less`: right gradients, but forward keeps the
probabilities and a one-hot matrix of the targets, N × C floats each.

The one-hot matrix holds N ones among N·C numbers: the N target indices say the
same. With a vocabulary of 50,000 classes it doubles what the loss keeps.
"""

import torch


class MyCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        n = logits.shape[0]
        rows = torch.arange(n, device=logits.device)
        shifted = logits - logits.amax(dim=1, keepdim=True)
        log_probs = shifted - torch.log(torch.exp(shifted).sum(dim=1, keepdim=True))
        loss = -log_probs[rows, target].mean()
        one_hot = torch.zeros_like(logits)
        one_hot[rows, target] = 1.0
        # Wrong for the follow-up: a second N × C matrix, for N indices.
        ctx.save_for_backward(torch.exp(log_probs), one_hot)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        probs, one_hot = ctx.saved_tensors
        n = probs.shape[0]
        return (probs - one_hot) * (grad_output / n), None
