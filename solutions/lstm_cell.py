"""Reference solution for the `lstm_cell` exercise.

One step of an LSTM, in torch's gate order (i, f, g, o):
    z = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh          (B, 4H)
    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o);  g = tanh(z_g)
    c' = f * c + i * g;   h' = o * tanh(c')
Backward runs the same graph in reverse. The new cell state reaches the loss
twice, directly (grad_c') and through h' = o * tanh(c'), so its total gradient
is grad_c' + grad_h' * o * (1 - tanh(c')^2). From there each gate gets its
share, each pre-activation its local slope (s * (1 - s) for the sigmoids,
1 - g^2 for the tanh), and the (B, 4H) pre-activation gradient goes back
through the two linear maps exactly as in a linear layer. Both biases are
added to the same z, so they get the same gradient.
"""

import torch


class MyLSTMCell(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h, c, w_ih, w_hh, b_ih, b_hh):
        z = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        zi, zf, zg, zo = z.chunk(4, dim=1)
        i, f, g, o = torch.sigmoid(zi), torch.sigmoid(zf), torch.tanh(zg), torch.sigmoid(zo)
        c_new = f * c + i * g
        tanh_c = torch.tanh(c_new)
        h_new = o * tanh_c
        # The gates and tanh(c') give every local slope; x, h and c are the
        # other factors of the products; the weights carry the gradient back.
        ctx.save_for_backward(x, h, c, w_ih, w_hh, i, f, g, o, tanh_c)
        return h_new, c_new

    @staticmethod
    def backward(ctx, grad_h_new, grad_c_new):
        x, h, c, w_ih, w_hh, i, f, g, o, tanh_c = ctx.saved_tensors
        # c' is used twice: as an output and inside h' = o * tanh(c').
        grad_c_total = grad_c_new + grad_h_new * o * (1 - tanh_c * tanh_c)
        # Through each gate to its pre-activation.
        grad_z = torch.cat(
            [
                grad_c_total * g * i * (1 - i),  # c' = ... + i * g
                grad_c_total * c * f * (1 - f),  # c' = f * c + ...
                grad_c_total * i * (1 - g * g),  # g = tanh(z_g)
                grad_h_new * tanh_c * o * (1 - o),  # h' = o * tanh(c')
            ],
            dim=1,
        )
        needs = ctx.needs_input_grad
        grad_x = grad_z @ w_ih if needs[0] else None
        grad_h = grad_z @ w_hh if needs[1] else None
        # The carry f * c: the previous cell state is scaled by the forget gate.
        grad_c = grad_c_total * f if needs[2] else None
        grad_w_ih = grad_z.T @ x if needs[3] else None
        grad_w_hh = grad_z.T @ h if needs[4] else None
        # Both biases are added to the same pre-activations: one gradient, twice.
        grad_bias = grad_z.sum(dim=0) if needs[5] or needs[6] else None
        grad_b_ih = grad_bias if needs[5] else None
        grad_b_hh = grad_bias if needs[6] else None
        return grad_x, grad_h, grad_c, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh
