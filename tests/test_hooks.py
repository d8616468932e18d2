"""Hooks: ``Tensor.register_hook`` (leaf and non-leaf, chained, removed,
under ``autograd.grad``, checked results) and a module's forward pre- and
post-hooks (arguments and outputs replaced, ``prepend``, ``with_kwargs``,
``always_call``, the Sequential fold turned off for hooked layers), against
torch where it is installed."""
import copy
import warnings

import numpy as np
import pytest

import ampc
from ampc import nn
from helpers import assert_close, to64, torch_or_skip


# ----------------------------------------------------------------------------
# Tensor.register_hook


def test_leaf_hook_replaces_the_gradient_before_accumulation():
    x = ampc.tensor([1.0, -2.0, 3.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(to64(g).tolist()))
    x.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: seen.append(to64(g).tolist()))
    (x * x).sum().backward()
    assert seen == [[2.0, -4.0, 6.0], [20.0, -40.0, 60.0]]
    assert to64(x.grad).tolist() == [20.0, -40.0, 60.0]
    (x * 1).sum().backward()            # accumulates the hooked gradient
    assert to64(x.grad).tolist() == [30.0, -30.0, 70.0]


def test_non_leaf_hook_sees_the_summed_gradient_once():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    calls = []

    def hook(g):
        calls.append(to64(g).tolist())
        return g * 0.5
    y.register_hook(hook)
    y.retain_grad()
    (y * y + y).sum().backward()        # dL/dy = 2y + 1 = [7, 13]
    assert calls == [[7.0, 13.0]]
    # retain_grad sees the hooked gradient, as in PyTorch 2
    assert to64(y.grad).tolist() == [3.5, 6.5]
    assert to64(x.grad).tolist() == [10.5, 19.5]


def test_remove_and_context_manager():
    x = ampc.ones(2, requires_grad=True)
    h = x.register_hook(lambda g: g * 2)
    with x.register_hook(lambda g: g * 3):
        (x * 1).sum().backward()
    assert to64(x.grad).tolist() == [6.0, 6.0]
    h.remove()
    h.remove()                          # a second remove is harmless
    x.grad = None
    (x * 1).sum().backward()
    assert to64(x.grad).tolist() == [1.0, 1.0]
    y = x * 2
    handle = y.register_hook(lambda g: g)
    del y
    handle.remove()                     # the node may be gone: no error


def test_hook_runs_on_every_backward_through_a_retained_graph():
    x = ampc.ones(3, requires_grad=True)
    y = x.exp()
    n = []
    y.register_hook(lambda g: n.append(1))
    loss = y.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert len(n) == 2


def test_autograd_grad_returns_the_hooked_gradient():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g + 1)
    x.register_hook(lambda g: g * 10)
    gx, = ampc.autograd.grad(y.sum(), [x])
    # dL/dy = 1 -> 2 after y's hook; dL/dx = 2 * 2x -> *10
    assert to64(gx).tolist() == [40.0, 80.0]
    assert x.grad is None


def test_hook_on_a_view_of_a_leaf():
    x = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = x[1:]
    v.register_hook(lambda g: g * 100)
    (v * v).sum().backward()
    assert to64(x.grad).tolist() == [0.0, 400.0, 600.0]


@pytest.mark.parametrize("dtype", [ampc.float16, ampc.bfloat16])
def test_hooks_on_16_bit_tensors(dtype):
    x = ampc.ones(3, dtype=dtype, requires_grad=True)
    got = []
    x.register_hook(lambda g: got.append(g.dtype))
    (x.float() * 2).sum().backward()
    assert got == [dtype] and x.grad.dtype is dtype


def test_register_hook_needs_requires_grad():
    with pytest.raises(RuntimeError, match="cannot register a hook on a "
                       "tensor that doesn't require gradient"):
        ampc.ones(2).register_hook(lambda g: g)


@pytest.mark.parametrize("bad,exc,msg", [
    (lambda g: 3, TypeError,
     r"expected Tensor or None \(got int\) from hook '<lambda>'"),
    (lambda g: g.half(), RuntimeError,
     r"hook '<lambda>' has changed the type of value \(was ampc.float32 "
     r"on cpu, got ampc.float16 on cpu\)"),
    (lambda g: g[:1], RuntimeError,
     r"hook '<lambda>' has changed the size of value \(was \[2\], got "
     r"\[1\]\)"),
])
def test_a_hooks_result_is_checked(bad, exc, msg):
    x = ampc.ones(2, requires_grad=True)
    x.register_hook(bad)
    with pytest.raises(exc, match=msg):
        (x * 2).sum().backward()


def test_tensor_hooks_match_torch(rng):
    torch = torch_or_skip()
    v = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    grads = {}
    for lib, mk in ((ampc, ampc.tensor), (torch, torch.tensor)):
        x = mk(v, requires_grad=True)
        wt = mk(w, requires_grad=True)
        h = x @ wt
        h.register_hook(lambda g: g.clamp(-0.25, 0.25))
        r = h.relu()
        r.register_hook(lambda g: g * 3)
        x.register_hook(lambda g: g - 1)
        (r * r).sum().backward()
        grads[lib] = [x.grad, wt.grad]
    for a, t in zip(grads[ampc], grads[torch]):
        assert_close(a, t.numpy().astype(np.float64), "float32", k=5)


# ----------------------------------------------------------------------------
# Module forward hooks


class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ampc.tensor([2.0]))

    def forward(self, x, shift=0.0):
        return x * self.w + shift


def test_pre_hook_replaces_arguments_and_post_hook_the_output():
    m = Affine()
    log = []
    m.register_forward_pre_hook(lambda mod, args: log.append("pre") or
                                args[0] + 1)        # one value: wrapped
    m.register_forward_hook(
        lambda mod, args, out: log.append(("post", to64(args[0]).item()))
        or out * 10)
    out = m(ampc.tensor([1.0]))
    assert log == ["pre", ("post", 2.0)]
    assert to64(out).tolist() == [40.0]


def test_prepend_orders_and_remove():
    m = Affine()
    order = []
    h1 = m.register_forward_hook(lambda *a: order.append(1))
    m.register_forward_hook(lambda *a: order.append(2))
    m.register_forward_hook(lambda *a: order.append(0), prepend=True)
    m.register_forward_pre_hook(lambda *a: order.append("b"))
    m.register_forward_pre_hook(lambda *a: order.append("a"), prepend=True)
    m(ampc.ones(1))
    assert order == ["a", "b", 0, 1, 2]
    h1.remove()
    order.clear()
    m(ampc.ones(1))
    assert order == ["a", "b", 0, 2]


def test_with_kwargs_hooks():
    m = Affine()
    m.register_forward_pre_hook(
        lambda mod, args, kwargs: (args, {"shift": kwargs["shift"] * 2}),
        with_kwargs=True)
    seen = {}
    m.register_forward_hook(
        lambda mod, args, kwargs, out: seen.update(kwargs), with_kwargs=True)
    out = m(ampc.tensor([1.0]), shift=5.0)
    assert to64(out).tolist() == [12.0] and seen == {"shift": 10.0}
    m2 = Affine()
    m2.register_forward_pre_hook(lambda mod, a, k: 3, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"forward pre-hook must return "
                       r"None or a tuple of \(new_args, new_kwargs\), but "
                       "got 3."):
        m2(ampc.ones(1))


def test_always_call_runs_after_a_failed_forward():
    m = Affine()
    ran = []
    m.register_forward_hook(lambda *a: ran.append("plain"))
    m.register_forward_hook(lambda mod, args, out: ran.append(out),
                            always_call=True)

    def boom(*a):
        raise ValueError("hook failed")
    m.register_forward_hook(boom, always_call=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            m("not a tensor", object())     # forward raises
    assert ran == [None]
    assert any("hook failed" in str(x.message) for x in w)


def test_always_call_after_a_failed_pre_hook_or_forward_hook():
    """As PyTorch: a pre-hook or a forward hook that raises also sets off
    the always_call hooks, those not yet run, with the output so far."""
    def boom(*a):
        raise ValueError("hook failed")

    m = Affine()
    ran = []
    m.register_forward_pre_hook(boom)
    m.register_forward_hook(lambda mod, args, out: ran.append(out),
                            always_call=True)
    with pytest.raises(ValueError, match="hook failed"):
        m(ampc.ones(1))
    assert ran == [None]

    m = Affine()
    ran.clear()
    m.register_forward_hook(lambda mod, args, out: ran.append(("a", out)),
                            always_call=True)
    m.register_forward_hook(lambda mod, args, out: out * 2)
    m.register_forward_hook(boom)
    m.register_forward_hook(
        lambda mod, args, out: ran.append(("b", to64(out).tolist())),
        always_call=True)
    with pytest.raises(ValueError, match="hook failed"):
        m(ampc.ones(1))
    # "a" ran once, before the failure; "b" got the doubled output
    assert [r[0] for r in ran] == ["a", "b"]
    assert ran[1][1] == [4.0]            # forward gives 2, doubled


def test_always_call_after_a_failed_pre_hook_sees_the_replaced_args():
    """As PyTorch: a pre-hook that replaced the arguments before a later
    one raised hands the replaced arguments to the always_call hooks."""
    def boom(*a):
        raise ValueError("hook failed")

    m = Affine()
    seen = []
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    m.register_forward_pre_hook(boom)
    m.register_forward_hook(
        lambda mod, args, out: seen.append(to64(args[0]).tolist()),
        always_call=True)
    with pytest.raises(ValueError, match="hook failed"):
        m(ampc.ones(1))
    assert seen == [[0.0]]


def test_hooks_turn_the_sequential_fold_off_and_results_stay_the_same(rng):
    """A hooked Conv2d/ReLU/MaxPool2d is called one by one (its hooks
    run); the outputs and gradients are the folded run's bits."""
    def net():
        ampc.manual_seed(3)
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(4 * 4 * 4, 5), nn.ReLU())
    x = ampc.tensor(rng.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32))
    plain, hooked = net(), net()
    seen = []
    for i, m in enumerate(hooked):
        m.register_forward_hook(
            lambda mod, args, out, i=i: seen.append((i, tuple(out.shape))))
    outs = []
    for model in (plain, hooked):
        out = model(x)
        out.sum().backward()
        outs.append([out] + [p.grad for p in model.parameters()])
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4, 5]
    assert seen[2] == (2, (2, 4, 4, 4))
    for a, b in zip(*outs):
        assert np.array_equal(to64(a), to64(b))


def test_deepcopy_keeps_hooks_and_a_module_without_hooks_has_none():
    m = Affine()
    assert m._hooks is None
    calls = []
    m.register_forward_hook(lambda *a: calls.append(1))
    c = copy.deepcopy(m)
    c(ampc.ones(1))
    assert calls == [1]


def test_module_hook_order_matches_torch():
    torch = torch_or_skip()
    logs = {}
    for lib in (ampc, torch):
        log = []
        seq = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(),
                                lib.nn.Linear(3, 1))
        for name, mod in seq.named_modules():
            mod.register_forward_pre_hook(
                lambda m, a, name=name: log.append(("pre", name)))
            mod.register_forward_hook(
                lambda m, a, o, name=name: log.append(
                    ("post", name, tuple(o.shape))))
        seq(lib.ones(4, 2))
        logs[lib] = log
    assert logs[ampc] == logs[torch]


def test_forward_hook_output_replacement_matches_torch(rng):
    torch = torch_or_skip()
    v = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    res = {}
    for lib in (ampc, torch):
        lib.manual_seed(0)
        lin = lib.nn.Linear(4, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(np.arange(8, dtype=np.float32)
                                        .reshape(2, 4) / 8))
            lin.bias.fill_(0.5)
        lin.register_forward_hook(lambda m, a, o: o * o)
        x = lib.tensor(v, requires_grad=True)
        lin(x).sum().backward()
        res[lib] = x.grad
    assert_close(res[ampc], res[torch].numpy().astype(np.float64),
                 "float32", k=4)


def test_post_accumulate_grad_hook_steps_a_parameter_in_backward():
    """The optimizer-in-backward pattern: each parameter updated as soon as
    its gradient is accumulated, then its .grad dropped."""
    w = ampc.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def sgd_now(p):
        seen.append(to64(p.grad).tolist())
        with ampc.no_grad():
            p.sub_(p.grad * 0.5)
        p.grad = None
    h = w.register_post_accumulate_grad_hook(sgd_now)
    (w * w).sum().backward()
    assert seen == [[2.0, 4.0]] and w.grad is None
    assert to64(w).tolist() == [0.0, 0.0]
    ampc.autograd.grad((w * 3).sum(), [w])      # accumulates nothing
    assert len(seen) == 1
    h.remove()
    (w * 3).sum().backward()
    assert len(seen) == 1 and to64(w.grad).tolist() == [3.0, 3.0]


def test_post_accumulate_grad_hook_errors():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ampc.ones(2).register_post_accumulate_grad_hook(lambda p: None)
    y = ampc.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="post accumulate grad hooks "
                       "cannot be registered on non-leaf tensors"):
        y.register_post_accumulate_grad_hook(lambda p: None)
