"""create_graph=True through writes and masks (autograd/higher_order_writes.py
and the label-smoothing term of cross_entropy in higher_order.py): in-place
ops on views and on their bases, basic-index assignment, copy_, fill_,
dropout, and cross_entropy with label_smoothing; first and second
derivatives against torch, dropout's against its closed form."""
import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
from helpers import torch_or_skip


def view_mul(lib, x):
    y = x * 1
    y[1:3].mul_(x[1:3])
    return y


def setitem(lib, x):
    y = x * 1
    y[0] = x[1] ** 2
    return y * x


def copy_into_zeros(lib, x):
    y = lib.zeros(4)
    y.copy_(x ** 2)
    return y * x


def clamp_after_pow(lib, x):
    y = x ** 2                      # (saves no output: clamp_ may follow)
    y.clamp_(max=4.0)
    return y * x


def view_after_base_write(lib, x):
    y = x * 1
    v = y[1:]
    y.mul_(x)
    return v ** 2


def fill_a_view(lib, x):
    y = x ** 2
    y[1:3].fill_(1.0)
    return y * x


def smoothed(reduction, weight, target):
    def run(lib, x):
        fn = lib.nn.functional.cross_entropy
        w = None if weight is None else lib.tensor(weight)
        out = fn((x ** 3).reshape(2, 2), lib.tensor(target), weight=w,
                 reduction=reduction, label_smoothing=0.3)
        return out * lib.tensor([1.0, 2.0]) if reduction == "none" else out
    run.__name__ = f"cross_entropy_{reduction}"
    return run


CASES = [view_mul, setitem, copy_into_zeros, clamp_after_pow,
         view_after_base_write, fill_a_view,
         smoothed("mean", None, [1, 0]), smoothed("mean", [0.3, 2.0],
                                                  [1, -100]),
         smoothed("sum", [0.3, 2.0], [1, 0]), smoothed("none", None, [1, 0])]


def derivatives(lib, fn):
    x = lib.tensor([0.5, -1.0, 2.0, 3.0], requires_grad=True)
    g, = lib.autograd.grad(fn(lib, x).sum(), x, create_graph=True)
    h, = lib.autograd.grad((g * g).sum(), x)
    return g.detach().numpy(), h.numpy()


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_second_derivatives_match_torch(fn):
    torch = torch_or_skip()
    for got, want in zip(derivatives(ampc, fn), derivatives(torch, fn)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dropout_second_derivative_is_its_mask():
    ampc.manual_seed(0)
    x = ampc.tensor([0.5, -1.0, 2.0, 3.0, 1.5, -2.5], requires_grad=True)
    y = F.dropout(x ** 2, 0.25)
    kept = (y.detach().numpy() != 0) / 0.75
    g, = ampc.autograd.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(),
                               2 * x.detach().numpy() * kept, rtol=1e-6)
    h, = ampc.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 2 * kept, rtol=1e-6)


def test_first_order_of_clamp_after_pow_matches_torch():
    """x ** 2 keeps no output for backward (PyTorch's PowBackward0), so
    clamp_ on it is allowed; a tensor exponent's gradient still works."""
    torch = torch_or_skip()
    grads = []
    for lib in (ampc, torch):
        x = lib.tensor([0.5, -1.0, 2.0, 3.0], requires_grad=True)
        e = lib.tensor([2.0, 3.0, 0.5, 1.0], requires_grad=True)
        y = x ** 2
        y.clamp_(max=4.0)
        (y + x.abs() ** e).sum().backward()
        grads.append((x.grad.numpy(), e.grad.numpy()))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_all_targets_ignored_and_a_broadcast_view_match_torch():
    """Label smoothing with every target ignored gives zero gradients (not
    0/0); a broadcast (expanded) view of a base written in place sums its
    gradient over the broadcast dims, to every order."""
    torch = torch_or_skip()

    def ignored(lib, x):
        logits = (x ** 2).reshape(2, 2)
        return lib.nn.functional.cross_entropy(
            logits, lib.tensor([1, 1]), label_smoothing=0.2, ignore_index=1)

    def broadcast(lib, x):
        b = x * 1
        v = b.expand(3, 4)
        b.mul_(lib.tensor([2.0, 3.0, 4.0, 5.0]))
        return v * v

    for fn in (ignored, broadcast):
        for got, want in zip(derivatives(ampc, fn), derivatives(torch, fn)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
