"""Module backward hooks (ampc/nn/modules/_backward_hooks.py):
register_full_backward_pre_hook and register_full_backward_hook, run side
by side with torch on the same model: what each hook sees, in what order,
replacing gradients, no input that requires grad, removal, prepend, the
fused Sequential, second derivatives, and the errors."""
import warnings

import numpy as np
import pytest

import ampc
from ampc import nn
from helpers import torch_or_skip


def mlp(lib, nnm):
    """The same 4-5-3 MLP in ampc or torch, deterministic weights."""
    m = nnm.Sequential(nnm.Linear(4, 5), nnm.ReLU(), nnm.Linear(5, 3))
    ctx = lib.no_grad()
    with ctx:
        for p in m.parameters():
            vals = np.arange(p.numel(), dtype=np.float32) * 0.1 - 0.3
            p.copy_(lib.tensor(vals.reshape(tuple(p.shape))))
    return m


def arr(t):
    return None if t is None else np.round(t.detach().numpy(), 5).tolist()


def trace(lib, nnm, requires_grad):
    """Run the MLP with hooks that log and rescale; (log, grads)."""
    m = mlp(lib, nnm)
    log = []

    def pre0(mod, go):
        log.append(("pre0", arr(go[0])))

    def pre2(mod, go):
        log.append(("pre2", arr(go[0])))
        return (go[0] * 3,)

    def full2(mod, gi, go):
        log.append(("full2", arr(gi[0]), arr(go[0])))
        return (gi[0] * 2,)

    def full0(mod, gi, go):
        log.append(("full0", arr(gi[0]), arr(go[0])))

    m[0].register_full_backward_pre_hook(pre0)
    m[2].register_full_backward_pre_hook(pre2)
    m[2].register_full_backward_hook(full2)
    m[0].register_full_backward_hook(full0)
    x = lib.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4),
                   requires_grad=requires_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (m(x) * lib.arange(3.0)).sum().backward()
    grads = [arr(p.grad) for p in m.parameters()] + [arr(x.grad)]
    return log, grads


@pytest.mark.parametrize("requires_grad", [True, False])
def test_hooks_see_and_replace_what_torch_hooks_do(requires_grad):
    torch = torch_or_skip()
    got = trace(ampc, nn, requires_grad)
    want = trace(torch, torch.nn, requires_grad)
    assert [e[0] for e in got[0]] == [e[0] for e in want[0]]
    for g, w in zip(got[0], want[0]):
        for a, b in zip(g[1:], w[1:]):
            assert (a is None) == (b is None), g[0]
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(*[got[1], want[1]]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_no_input_that_requires_grad_warns_and_passes_none():
    m = nn.Linear(3, 2)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi))
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        m(ampc.ones(4, 3)).sum().backward()
    assert seen == [(None,)]
    m.register_full_backward_hook(lambda mod, gi, go: (go[0],))
    with pytest.raises(RuntimeError, match="should always return None"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m(ampc.ones(4, 3)).sum().backward()


def test_removal_prepend_and_no_grad():
    m = nn.Linear(3, 2)
    order = []
    h1 = m.register_full_backward_hook(lambda *a: order.append(1))
    m.register_full_backward_hook(lambda *a: order.append(0), prepend=True)
    x = ampc.ones(2, 3, requires_grad=True)
    m(x).sum().backward()
    assert order == [0, 1]
    h1.remove()
    m(x).sum().backward()
    assert order == [0, 1, 0]
    with ampc.no_grad():
        y = m(x)
    assert y.grad_fn is None and order == [0, 1, 0]


def test_hooked_layers_of_a_fused_sequential_run_on_their_own():
    """Conv2d+ReLU+MaxPool2d fold into one kernel; a backward hook on the
    ReLU unfolds it, and the gradients stay those of the plain model."""
    ampc.manual_seed(1)
    plain = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 2))
    hooked = nn.Sequential(*[type(m)(*a) for m, a in zip(
        plain, [(3, 4, 3, 1, 1), (), (2,), (), (64, 2)])])
    hooked.load_state_dict(plain.state_dict())
    seen = []
    hooked[1].register_full_backward_hook(
        lambda mod, gi, go: seen.append((tuple(gi[0].shape),
                                         tuple(go[0].shape))))
    x = ampc.randn(2, 3, 8, 8)
    for model in (plain, hooked):
        model(x).sum().backward()
    assert seen == [((2, 4, 8, 8), (2, 4, 8, 8))]
    for a, b in zip(plain.parameters(), hooked.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_second_derivatives_through_a_hooked_module():
    m = nn.Linear(3, 1)
    calls = []
    m.register_full_backward_hook(lambda *a: calls.append(1))
    x = ampc.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    y = (m(x) ** 2).sum()
    g, = ampc.autograd.grad(y, x, create_graph=True)
    h, = ampc.autograd.grad(g.sum(), x)
    w = m.weight.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(h.numpy(), 2 * w.sum() * w, rtol=1e-5)
    assert len(calls) >= 1


def test_errors_name_the_problem():
    class Listed(nn.Module):
        def forward(self, a):
            return [a * 2]

    listed = Listed()
    calls = []
    listed.register_full_backward_hook(lambda *a: calls.append(a))
    x = ampc.ones(2, requires_grad=True)
    # as PyTorch: a list (or dict, ...) output is not hooked, with a warning
    with pytest.warns(UserWarning, match="module output should be a Tensor "
                                         "or a tuple of Tensors but received "
                                         "<class 'list'>"):
        out = listed(x)
    out[0].sum().backward()
    assert calls == []
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input "
                                           r"\(2 given, expected 1\)"):
        m(x).sum().backward()
    with pytest.warns(FutureWarning, match="register_full_backward_hook"):
        nn.Linear(2, 2).register_backward_hook(lambda *a: None)


def _several(lib, nnm, b_requires_grad):
    """A module of three positional arguments (two tensors and an int)
    returning (tensor, int, tensor), with hooks that log and replace; run
    in ampc or torch: (log, a.grad, b.grad, w.grad)."""

    class Pair(nnm.Module):
        def __init__(self):
            super().__init__()
            self.w = nnm.Parameter(lib.tensor([0.5, -1.0, 2.0]))

        def forward(self, a, b, k):
            return a * self.w * k, 7, a * b + self.w

    log = []

    def pre(mod, go):
        log.append(("pre", [arr(g) for g in go]))
        return (go[0] * 2, None, go[2])

    def full(mod, gi, go):
        log.append(("full", [arr(g) for g in gi], [arr(g) for g in go]))
        return (gi[0] + 1, gi[1], None)

    m = Pair()
    m.register_full_backward_pre_hook(pre)
    m.register_full_backward_hook(full)
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = lib.tensor([0.5, 0.25, -1.0], requires_grad=b_requires_grad)
    x, seven, y = m(a, b, 3)
    assert seven == 7
    (x * lib.tensor([1.0, 2.0, 3.0]) + y).sum().backward()
    return log, arr(a.grad), arr(b.grad), arr(m.w.grad)


@pytest.mark.parametrize("b_requires_grad", [True, False])
def test_several_tensor_arguments_and_outputs_as_torch(b_requires_grad):
    torch = torch_or_skip()
    got = _several(ampc, nn, b_requires_grad)
    want = _several(torch, torch.nn, b_requires_grad)
    assert got == want


def test_an_output_without_gradient_and_second_derivatives():
    class Split(nn.Module):
        def forward(self, a, b):
            return a * a, b * b

    seen = []
    m = Split()
    m.register_full_backward_pre_hook(
        lambda mod, go: seen.append([g is None for g in go]))
    a = ampc.tensor([1.0, 2.0], requires_grad=True)
    b = ampc.tensor([3.0, 4.0], requires_grad=True)
    p, _ = m(a, b)
    g, = ampc.autograd.grad(p.sum(), a, create_graph=True)
    assert seen == [[False, True]]
    assert g.detach().numpy().tolist() == [2.0, 4.0]
    g.sum().backward()
    assert a.grad.numpy().tolist() == [2.0, 2.0]


def test_a_hook_returning_a_tensor_is_told_to_return_a_tuple():
    m = nn.Linear(2, 2)
    m.register_full_backward_pre_hook(lambda mod, go: go[0] * 2)
    x = ampc.ones(1, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="must return None or a tuple of "
                                           "1 grad_output.*got Tensor"):
        m(x).sum().backward()


def test_hooks_skip_a_backward_that_bypasses_the_outputs():
    """As PyTorch: the full hook runs only when a gradient came through the
    module's outputs (not for a cached intermediate); a second backward
    through create_graph that reaches the outputs again runs it again."""

    class Cache(nn.Module):
        def forward(self, a, b):
            self.cache = a * 3
            return a * b, b * 2

    m = Cache()
    calls = []
    m.register_full_backward_hook(lambda mod, gi, go: calls.append(go))
    a = ampc.ones(2, requires_grad=True)
    b = ampc.ones(2, requires_grad=True)
    m(a, b)
    m.cache.sum().backward()
    assert calls == []
    p, _ = m(a, b)
    g, = ampc.autograd.grad((p * p).sum(), a, create_graph=True)
    assert len(calls) == 1
    g.sum().backward()
    assert len(calls) == 2 and calls[1][1] is None     # as torch


def test_an_in_place_op_on_a_hooked_view_is_refused():
    class Scale(nn.Module):
        def forward(self, a, b):
            a.mul_(2)
            return a + b

    m = Scale()
    m.register_full_backward_hook(lambda *a: None)
    h = ampc.ones(2, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="Output 0 of BackwardHookFunction "
                                           "is a view and is being modified "
                                           "inplace"):
        m(h, ampc.ones(2, requires_grad=True))
