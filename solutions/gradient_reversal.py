"""Reference solution for the `gradient_reversal` exercise.

The gradient reversal layer of domain-adversarial training (Ganin and
Lempitsky, 2015): forward is the identity, backward multiplies the upstream
gradient by -lambd. That is deliberately not the derivative of forward (which
is 1): the layer turns the descent of whatever comes after it into an ascent
for whatever comes before it, and leaves the values untouched.
"""

import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        # A Python float: it belongs on ctx, never on the class or a global,
        # since two calls in one graph may use different values.
        ctx.lambd = lambd
        # view_as: the output is a new tensor object sharing x's values, so no
        # copy is made.
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        # -lambd * g makes a new tensor: grad_output itself is never modified.
        # lambd is a Python float, so its gradient is None.
        return -ctx.lambd * grad_output, None
