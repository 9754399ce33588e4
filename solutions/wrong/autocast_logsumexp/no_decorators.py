import torch


class ScoreLogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        # x: (N, D), w: (D, K). The scores, then a stable log-sum-exp per row.
        scores = x @ w
        y = torch.logsumexp(scores, dim=-1)
        ctx.save_for_backward(x, w, scores, y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, w, scores, y = ctx.saved_tensors
        # d logsumexp / d scores is the softmax of the scores, row by row.
        g = torch.exp(scores - y.unsqueeze(-1)) * grad_output.unsqueeze(-1)
        return g @ w.mT, x.mT @ g
