"""Reference solution for the `label_smoothing_ce` exercise.

Each row that counts is scored against a soft target q: 1 - eps on its label
plus eps spread evenly over all C classes. For such a row,
d(-sum_j q_j log softmax(z)_j)/dz = softmax(z) - q (the q's sum to 1). Rows whose
target is ignore_index contribute nothing, and the mean divides by K, the
number of rows that count. With K = 0 torch's loss is 0/0 = NaN and its
gradient 0, and so are these.
"""

import torch


class LabelSmoothingCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, label_smoothing, ignore_index):
        log_probs = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        keep = target != ignore_index
        # An ignored row's target may be any number: any valid class stands in
        # for it, since the row is masked out anyway.
        safe_target = torch.where(keep, target, 0)
        nll = -log_probs.gather(1, safe_target.unsqueeze(1)).squeeze(1)
        smooth = -log_probs.mean(dim=1)
        per_row = (1 - label_smoothing) * nll + label_smoothing * smooth
        ctx.save_for_backward(torch.exp(log_probs), keep, safe_target)
        ctx.label_smoothing = label_smoothing
        # 0 / 0 = NaN when every row is ignored, as in torch.
        return (per_row * keep).sum() / keep.sum()

    @staticmethod
    def backward(ctx, grad_output):
        probs, keep, safe_target = ctx.saved_tensors
        eps = ctx.label_smoothing
        n, classes = probs.shape
        rows = torch.arange(n, device=probs.device)
        # softmax - q, on a fresh tensor (probs is saved and stays untouched).
        grad = probs - eps / classes
        grad[rows, safe_target] -= 1 - eps
        # Only the rows that count, each weighted by 1/K. clamp: with K = 0 every
        # row is masked, and the gradient is 0 rather than 0 * inf = NaN.
        count = keep.sum().clamp(min=1)
        grad = grad * keep.unsqueeze(1).to(grad.dtype) * (grad_output / count)
        # target holds integers, label_smoothing and ignore_index are Python
        # numbers: none of them has a gradient.
        return grad, None, None, None
