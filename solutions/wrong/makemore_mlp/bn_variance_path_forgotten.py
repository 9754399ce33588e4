"""Wrong: batch norm backpropagated through the mean but not through the variance,
written atom by atom: bndiff feeds bnraw and, squared, bnvar; its gradient takes
the first use only. The gradient at hprebn still sums to zero over the batch.
"""

import torch
import torch.nn.functional as F

EPS = 1e-5


class MakemoreMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Xb, C, W1, b1, bngain, bnbias, W2, b2, Yb):
        # Forward cut into its atoms, as in "Becoming a backprop ninja".
        n = Xb.shape[0]
        emb = C[Xb]
        embcat = emb.reshape(n, -1)
        hprebn = embcat @ W1 + b1
        bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
        bndiff = hprebn - bnmeani
        bndiff2 = bndiff**2
        bnvar = 1 / (n - 1) * bndiff2.sum(0, keepdim=True)  # Bessel's correction
        bnvar_inv = (bnvar + EPS) ** -0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        logit_maxes = logits.max(1, keepdim=True).values
        norm_logits = logits - logit_maxes
        counts = norm_logits.exp()
        counts_sum = counts.sum(1, keepdim=True)
        logprobs = norm_logits - counts_sum.log()
        loss = -logprobs[range(n), Yb].mean()
        ctx.save_for_backward(
            Xb, C, emb, embcat, W1, bngain, bndiff, bnvar, bnvar_inv, bnraw, h, W2,
            logits, counts, counts_sum, Yb,
        )  # fmt: skip
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        (
            Xb, C, emb, embcat, W1, bngain, bndiff, bnvar, bnvar_inv, bnraw, h, W2,
            logits, counts, counts_sum, Yb,
        ) = ctx.saved_tensors  # fmt: skip
        n = Xb.shape[0]
        # loss = -mean of logprobs[range(n), Yb]
        dlogprobs = torch.zeros_like(counts)
        dlogprobs[range(n), Yb] = -1.0 / n
        dlogprobs = dlogprobs * grad_output
        # logprobs = norm_logits - log(counts_sum)
        dnorm_logits = dlogprobs.clone()
        dcounts_sum = -(1.0 / counts_sum) * dlogprobs.sum(1, keepdim=True)
        # counts_sum = counts.sum(1), counts = exp(norm_logits)
        dcounts = torch.ones_like(counts) * dcounts_sum
        dnorm_logits = dnorm_logits + counts * dcounts
        # norm_logits = logits - logit_maxes: the maxes' own gradient sums to zero
        dlogits = dnorm_logits.clone()
        dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
        dlogits = dlogits + F.one_hot(logits.max(1).indices, logits.shape[1]) * dlogit_maxes
        # logits = h @ W2 + b2
        dh = dlogits @ W2.T
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        # h = tanh(hpreact)
        dhpreact = (1.0 - h**2) * dh
        # hpreact = bngain * bnraw + bnbias
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnraw = bngain * dhpreact
        dbnbias = dhpreact.sum(0, keepdim=True)
        # bnraw = bndiff * bnvar_inv
        dbndiff = bnvar_inv * dbnraw
        # bndiff = hprebn - bnmeani, bnmeani = mean of hprebn
        dhprebn = dbndiff.clone()
        dbnmeani = (-dbndiff).sum(0, keepdim=True)
        dhprebn = dhprebn + 1.0 / n * torch.ones_like(dbndiff) * dbnmeani
        # hprebn = embcat @ W1 + b1
        dembcat = dhprebn @ W1.T
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        # embcat = emb.reshape(n, -1), emb = C[Xb]
        demb = dembcat.view(emb.shape)
        dC = torch.zeros_like(C)
        for k in range(Xb.shape[0]):
            for j in range(Xb.shape[1]):
                dC[Xb[k, j]] += demb[k, j]
        return None, dC, dW1, db1, dbngain, dbnbias, dW2, db2, None
