"""Autograd: the engine's behaviour (accumulation, graph freeing,
retain_graph, grad modes, in-place checks, casts, broadcasting) and
PyTorch's error messages; every op's gradient against finite differences
is tests/test_autograd_ops.py."""
import threading

import numpy as np
import pytest

import ampc
from helpers import assert_close, to64, torch_or_skip

# ----------------------------------------------------------------------------
# dtypes through autograd


def test_cast_grad_flows_in_source_dtype():
    x = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.half()
    assert y.dtype is ampc.float16 and y.requires_grad
    assert type(y.grad_fn).__name__ == "ToCopyBackward0"
    (y * y).sum().backward()
    assert x.grad.dtype is ampc.float32
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_cast_grad_from_low_precision_leaf():
    for dt in (ampc.float16, ampc.bfloat16):
        x = ampc.tensor([1.0, -2.0], dtype=dt, requires_grad=True)
        (x.float() * 3).sum().backward()
        assert x.grad.dtype is dt
        assert to64(x.grad).tolist() == [3.0, 3.0]


def test_mixed_dtype_binary_grads_in_each_dtype():
    a = ampc.tensor([1.0, 2.0], dtype=ampc.float16, requires_grad=True)
    b = ampc.tensor([3.0, 4.0], requires_grad=True)
    out = a * b
    assert out.dtype is ampc.float32
    out.sum().backward()
    assert a.grad.dtype is ampc.float16 and b.grad.dtype is ampc.float32
    assert to64(a.grad).tolist() == [3.0, 4.0]
    assert b.grad.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("dt", (ampc.float16, ampc.bfloat16))
def test_low_precision_graph(dt):
    x = ampc.tensor([[0.5, 1.0], [1.5, 2.0]], dtype=dt, requires_grad=True)
    y = (x * x).sum(1).mean()
    assert y.dtype is dt
    y.backward()
    assert x.grad.dtype is dt
    assert_close(x.grad, [[0.5, 1.0], [1.5, 2.0]], dt.name)


def test_to_with_grad_keeps_graph():
    x = ampc.ones(2, requires_grad=True)
    assert x.to(ampc.float32) is x
    y = x.to("cpu", ampc.bfloat16)
    y.float().sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


# ----------------------------------------------------------------------------
# the engine


def test_grad_accumulates():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    g = x.grad
    (x * x).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    # accumulation is in place, as in PyTorch
    assert g.tolist() == [5.0, 7.0]
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_backward_with_gradient():
    x = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(ampc.tensor([1.0, 0.5, 0.0]))
    assert x.grad.tolist() == [2.0, 2.0, 0.0]


def test_backward_gradient_is_not_aliased():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    g = ampc.ones(2)
    (x * 1).backward(g)
    x.grad.mul_(5)
    assert g.tolist() == [1.0, 1.0]


def test_nonscalar_backward_needs_gradient():
    x = ampc.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError,
                       match="grad can be implicitly created only for scalar "
                             "outputs"):
        (x * 2).backward()


def test_second_backward_raises():
    x = ampc.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError,
                       match=r"Trying to backward through the graph a second "
                             r"time \(or directly access saved tensors after "
                             r"they have already been freed\)"):
        y.backward()


def test_second_backward_raises_without_saved_tensors():
    x = ampc.ones(3, requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_retain_graph():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [6.0, 12.0]
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_graph_freed_releases_memory():
    x = ampc.ones(1000, requires_grad=True)
    h = x * 2
    y = (h * h).sum()      # saves h twice
    del h
    before = ampc.memory_allocated()
    y.backward()
    assert ampc.memory_allocated() < before + 1000 * 4   # only x.grad grew
    after = ampc.memory_allocated()
    del y
    assert ampc.memory_allocated() <= after


def test_shared_subgraph_and_diamond():
    x = ampc.tensor([2.0], requires_grad=True)
    a = x * 3
    b = a * a + a.exp() * 0 + a     # a used three times
    c = b + x
    c.backward(ampc.ones(1))
    # d/dx (9x^2 + 3x + x) = 18x + 4
    assert x.grad.tolist() == [40.0]


def test_same_input_twice():
    x = ampc.tensor([3.0], requires_grad=True)
    (x * x).backward(ampc.ones(1))
    assert x.grad.tolist() == [6.0]
    node = (x * x).grad_fn
    assert node.next_functions[0][0] is node.next_functions[1][0]


def test_deep_graph_no_recursion_limit():
    x = ampc.ones(1, requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0 + 0.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_backward_on_leaf():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    x.backward(ampc.tensor([3.0, 4.0]))
    assert x.grad.tolist() == [3.0, 4.0]


def test_backward_inputs_argument():
    x = ampc.ones(2, requires_grad=True)
    w = ampc.ones(2, requires_grad=True)
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None and w.grad.tolist() == [1.0, 1.0]


def test_autograd_grad_function():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    w = ampc.tensor([3.0, 4.0], requires_grad=True)
    h = x * w
    gx, gh = ampc.autograd.grad((h * h).sum(), [x, h])
    assert gx.tolist() == [18.0, 64.0]
    assert gh.tolist() == [6.0, 16.0]
    assert x.grad is None and w.grad is None
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="not have been used"):
        ampc.autograd.grad(y, [w])


def _hooked_graph(lib):
    """z = sum(3 * (2x) * w), a tensor hook on x, w and y = 2x."""
    x = lib.ones(2, requires_grad=True)
    w = lib.ones(2, requires_grad=True)
    y = x * 2
    seen = []
    for name, t in (("w", w), ("y", y), ("x", x)):
        t.register_hook(lambda g, name=name: seen.append(name))
    return x, w, y, (y * 3 * w).sum(), seen


def _run_selective(lib):
    """backward(inputs=) and autograd.grad on _hooked_graph: gradients,
    .grad fields and the hooks that ran, per call."""
    got = []
    x, w, y, z, seen = _hooked_graph(lib)
    z.backward(inputs=[y], retain_graph=True)
    got.append((y.grad.tolist(), x.grad, w.grad, list(seen)))
    seen.clear()
    got.append(([g.tolist() for g in lib.autograd.grad(
        z, [y], retain_graph=True)], list(seen)))
    seen.clear()
    got.append(([g.tolist() for g in lib.autograd.grad(
        z, [w], retain_graph=True)], list(seen)))
    seen.clear()
    y.grad = None
    z.backward(inputs=[y, x])
    got.append((y.grad.tolist(), x.grad.tolist(), w.grad, list(seen)))
    return got


def test_selective_backward_runs_only_the_needed_nodes():
    """As PyTorch: autograd.grad and backward(inputs=) run only the nodes
    on a path to an input (no other hook fires, no other backward runs);
    a non-leaf input of backward(inputs=) gets its .grad."""
    assert _run_selective(ampc) == [
        ([3.0, 3.0], None, None, ["y"]),
        ([[3.0, 3.0]], ["y"]),
        ([[6.0, 6.0]], ["w"]),
        ([3.0, 3.0], [6.0, 6.0], None, ["y", "x"])]
    torch = torch_or_skip()
    assert _run_selective(torch) == _run_selective(ampc)


def test_backward_inputs_must_require_grad():
    x = ampc.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"inputs\[1\] does not require "
                       "grad"):
        (x * 2).sum().backward(inputs=[x, ampc.ones(2)])


def test_unneeded_branch_backward_never_runs():
    class Fails(ampc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("this branch is not needed")

    a = ampc.ones(3, requires_grad=True)
    b = ampc.ones(3, requires_grad=True)
    loss = (Fails.apply(a) + b * 2).sum()
    assert ampc.autograd.grad(loss, b, retain_graph=True)[0].tolist() == \
        [2.0] * 3
    loss.backward(inputs=[b])
    assert a.grad is None and b.grad.tolist() == [2.0] * 3
    with pytest.raises(RuntimeError, match="`inputs` argument to "
                       "`backward\\(\\)` cannot be empty"):
        loss.backward(inputs=[])


def test_retain_grad():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    assert h.grad.tolist() == [4.0, 8.0]
    assert x.grad.tolist() == [8.0, 16.0]
    y = x * 3
    y.sum().backward()
    assert y.grad is None      # not retained
    x.retain_grad()            # a leaf: no-op


def test_retain_grad_on_root():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    y.retain_grad()
    y.backward()
    assert y.grad.item() == 1.0


def test_grad_fn_and_leaf_metadata():
    x = ampc.ones(2, requires_grad=True)
    c = ampc.ones(2)
    assert x.is_leaf and c.is_leaf and x.grad_fn is None
    y = x * c + 1
    assert not y.is_leaf and y.requires_grad
    assert type(y.grad_fn).__name__ == "AddBackward0"
    assert y.grad_fn.name() == "AddBackward0"
    mul = y.grad_fn.next_functions[0][0]
    assert type(mul).__name__ == "MulBackward0"
    acc, none = mul.next_functions
    assert type(acc[0]).__name__ == "AccumulateGrad"
    assert acc[0].variable is x
    assert none[0] is None
    assert "grad_fn=<AddBackward0>" in repr(y)
    assert "requires_grad=True" in repr(x)
    z = c * 2
    assert not z.requires_grad and z.grad_fn is None


def test_ops_without_grad_inputs_record_nothing():
    a = ampc.ones(3)
    b = a * 2 + a.exp()
    assert b.grad_fn is None and not b.requires_grad


def test_int_and_bool_results_do_not_require_grad():
    x = ampc.tensor([1.0, -2.0], requires_grad=True)
    assert not (x > 0).requires_grad
    assert not x.argmax().requires_grad
    v, i = x.max(0)
    assert v.requires_grad and not i.requires_grad
    assert not x.isfinite().requires_grad


def test_max_all_ties_share_gradient():
    x = ampc.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5, 0.0]


def test_max_dim_gradient_goes_to_first_index():
    x = ampc.tensor([[1.0, 3.0, 3.0], [5.0, 0.0, 5.0]], requires_grad=True)
    x.max(1).values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


def test_maximum_ties_split():
    a = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = ampc.tensor([1.0, 1.0, 4.0], requires_grad=True)
    a.maximum(b).sum().backward()
    assert a.grad.tolist() == [0.5, 1.0, 0.0]
    assert b.grad.tolist() == [0.5, 0.0, 1.0]


def test_relu_grad_zero_at_zero():
    x = ampc.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    x.relu().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]


def test_detach_and_data():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    assert d.data_ptr() == x.data_ptr()
    d[0] = 5.0
    assert x[0].item() == 5.0
    y = x * 2
    assert not y.detach().requires_grad
    assert not x.data.requires_grad
    assert x.data.data_ptr() == x.data_ptr()
    z = x * 1
    z.detach_()
    assert not z.requires_grad and z.grad_fn is None


def test_requires_grad_():
    x = ampc.ones(2)
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    y = ampc.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)


def test_custom_function():
    class Cube(ampc.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x * x * x * k

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x * x * ctx.k, None

    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert type(y.grad_fn).__name__ == "CubeBackward"
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 24.0]
    with ampc.no_grad():
        assert not Cube.apply(x, 1.0).requires_grad


# ----------------------------------------------------------------------------
# grad mode


def test_no_grad_context():
    x = ampc.ones(2, requires_grad=True)
    with ampc.no_grad():
        assert not ampc.is_grad_enabled()
        y = x * 2
        with ampc.enable_grad():
            assert ampc.is_grad_enabled()
            z = x * 2
        assert not ampc.is_grad_enabled()
    assert ampc.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad


def test_no_grad_restores_on_exception():
    with pytest.raises(ValueError):
        with ampc.no_grad():
            raise ValueError
    assert ampc.is_grad_enabled()


def test_no_grad_decorators():
    x = ampc.ones(2, requires_grad=True)

    @ampc.no_grad()
    def f(t):
        assert not ampc.is_grad_enabled()
        return t * 2

    @ampc.no_grad
    def g(t):
        return t * 2

    @ampc.enable_grad()
    def h(t):
        return t * 2

    assert f.__name__ == "f"
    assert not f(x).requires_grad and not g(x).requires_grad
    assert ampc.is_grad_enabled()
    with ampc.no_grad():
        assert h(x).requires_grad
        assert not ampc.is_grad_enabled()


def test_no_grad_generator_decorator():
    @ampc.no_grad()
    def gen():
        for _ in range(2):
            yield ampc.is_grad_enabled()

    assert list(gen()) == [False, False]
    it = gen()
    assert next(it) is False
    assert ampc.is_grad_enabled()      # restored between steps


def test_set_grad_enabled():
    ampc.set_grad_enabled(False)
    assert not ampc.is_grad_enabled()
    ampc.set_grad_enabled(True)
    with ampc.set_grad_enabled(False):
        assert not ampc.is_grad_enabled()
    assert ampc.is_grad_enabled()
    with ampc.inference_mode():
        assert not ampc.is_grad_enabled()

    @ampc.set_grad_enabled(False)
    def f():
        return ampc.is_grad_enabled()

    assert ampc.is_grad_enabled()
    assert f() is False and ampc.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = {}

    def worker():
        seen["enabled"] = ampc.is_grad_enabled()
        with ampc.no_grad():
            seen["inner"] = ampc.is_grad_enabled()

    with ampc.no_grad():
        th = threading.Thread(target=worker)
        th.start()
        th.join()
        assert not ampc.is_grad_enabled()
    assert seen == {"enabled": True, "inner": False}


def test_inplace_on_leaf_allowed_under_no_grad():
    p = ampc.ones(3, requires_grad=True)
    with ampc.no_grad():
        p.add_(ampc.ones(3), alpha=-0.5)
        p.mul_(2)
        p[0] = 7.0
        p.zero_()
        p.uniform_()
    assert p.requires_grad and p.is_leaf and p.grad_fn is None


# ----------------------------------------------------------------------------
# in-place checks


def test_inplace_on_leaf_requiring_grad_raises():
    p = ampc.ones(3, requires_grad=True)
    msg = ("a leaf Variable that requires grad is being used in an in-place "
           "operation.")
    for op in (lambda: p.add_(1), lambda: p.mul_(2), lambda: p.zero_(),
               lambda: p.fill_(1), lambda: p.copy_(ampc.zeros(3)),
               lambda: p.clamp_(0, 1), lambda: p.__iadd__(1),
               lambda: p.__setitem__(0, 1.0), lambda: p.normal_()):
        with pytest.raises(RuntimeError, match=msg):
            op()


def test_inplace_on_view_of_leaf_raises():
    p = ampc.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        p[1:].add_(1)


def test_modified_saved_tensor_detected():
    a = ampc.ones(3, requires_grad=True)
    b = a * 2
    c = b * b          # saves b
    b.add_(1)
    assert b._version > 0
    with pytest.raises(RuntimeError,
                       match="one of the variables needed for gradient "
                             "computation has been modified by an inplace "
                             "operation"):
        c.sum().backward()


def test_modified_saved_view_detected():
    a = ampc.ones(4, requires_grad=True)
    b = a * 2
    c = b.exp()       # saves its output
    c.detach()[0] = 3.0   # writes through a view: same version counter
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        c.sum().backward()


def test_version_counter_shared_by_views():
    t = ampc.zeros(4)
    v = t[1:]
    v0 = t._version
    v.add_(1)
    assert t._version == v._version > v0
    t.fill_(0)
    assert v._version == t._version


def test_requires_grad_on_int_raises():
    with pytest.raises(RuntimeError,
                       match="only Tensors of floating point dtype can "
                             "require gradients"):
        ampc.ones(2, dtype=ampc.int64).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        ampc.tensor([1, 2], requires_grad=True)


def test_backward_without_grad_raises():
    with pytest.raises(RuntimeError,
                       match="does not require grad and does not have a "
                             "grad_fn"):
        ampc.ones(1).backward()


def test_backward_gradient_shape_mismatch():
    x = ampc.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(ampc.ones(2))


# ----------------------------------------------------------------------------
# against torch


def test_grads_vs_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(5)
    av = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    bv = rng.uniform(0.5, 2, (4,)).astype(np.float32)

    def f(m, a, b):
        h = (a * b - a / b).exp().sqrt() + (a ** 2).log()
        h = m.cat([h, a.maximum(b.expand(3, 4))], 1)
        return h.clamp(0.5, 3.0).relu().sum(0).mean() + h.max() * 0.5

    results = []
    for m, mk in ((ampc, ampc.tensor), (torch, torch.tensor)):
        a = mk(av, requires_grad=True)
        b = mk(bv, requires_grad=True)
        out = f(m, a, b)
        out.backward()
        results.append((out.item(), a.grad.numpy().copy(),
                        b.grad.numpy().copy()))
    (o1, ga1, gb1), (o2, ga2, gb2) = results
    assert abs(o1 - o2) < 1e-5 * max(1, abs(o2))
    np.testing.assert_allclose(ga1, ga2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb1, gb2, rtol=1e-5, atol=1e-6)


def test_low_precision_grads_vs_torch():
    torch = torch_or_skip()
    for name in ("float16", "bfloat16"):
        av = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
        res = []
        for m in (ampc, torch):
            a = m.tensor(av).to(getattr(m, name)).requires_grad_()
            y = (a * a * 0.5 + a).float().sum()
            y.backward()
            g = a.grad
            res.append(to64(g) if m is ampc else g.double().numpy())
        np.testing.assert_array_equal(res[0], res[1])


def test_grad_wrt_a_non_leaf_keeps_the_graph_below_it():
    """autograd.grad(z, y) stops at y's node without running it, so its
    saved tensors are not freed: a later backward through y works (as
    PyTorch; e.g. Grad-CAM's gradient at a feature map, then the loss's
    backward)."""
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    g, = ampc.autograd.grad((y * 2).sum(), y)
    assert g.tolist() == [2.0, 2.0]
    y.sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), np.exp([1.0, 2.0]),
                               rtol=1e-6)
    # backward(inputs=[y]) too
    x.grad = None
    y = x.exp()
    (y * 3).sum().backward(inputs=[y])
    assert y.grad.tolist() == [3.0, 3.0] and x.grad is None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), np.exp([1.0, 2.0]),
                               rtol=1e-6)
