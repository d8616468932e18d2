"""Autograd: every differentiable op against central finite differences of
the float64 reference, then the engine's behaviour (accumulation, graph
freeing, retain_graph, grad modes, in-place checks, casts, broadcasting) and
PyTorch's error messages."""
import threading

import numpy as np
import pytest

import ampc
import reference as ref
from helpers import assert_close, gradcheck, to64, torch_or_skip

# ----------------------------------------------------------------------------
# every op vs finite differences

BINARY_CASES = [
    # name, ampc fn, reference fn, shapes, value range
    ("add", lambda a, b: a + b, lambda a, b: a + b, [(3, 4), (3, 4)]),
    ("add_bcast", lambda a, b: a + b, lambda a, b: a + b, [(3, 1), (1, 4)]),
    ("sub_bcast", lambda a, b: a - b, lambda a, b: a - b, [(2, 3, 4), (4,)]),
    ("mul_bcast", lambda a, b: a * b, lambda a, b: a * b, [(5, 1, 3), (7, 1)]),
    ("div", lambda a, b: a / b, lambda a, b: a / b, [(3, 4), (4,)]),
    ("maximum", lambda a, b: a.maximum(b), np.maximum, [(3, 4), (3, 4)]),
    ("minimum", lambda a, b: a.minimum(b), np.minimum, [(3, 4), (1, 4)]),
    ("add_0d", lambda a, b: a + b, lambda a, b: a + b, [(), (3,)]),
]


@pytest.mark.parametrize("name,fn,rfn,shapes", BINARY_CASES,
                         ids=[c[0] for c in BINARY_CASES])
def test_binary_grad(name, fn, rfn, shapes):
    low = 0.5 if name == "div" else -2.0
    gradcheck(fn, rfn, shapes, low=low)


def test_pow_grads():
    rng = np.random.default_rng(2)

    def pos(shape):
        return ref.round_to(rng.uniform(0.5, 2.0, shape), "float32")

    gradcheck(lambda a: a ** 2, lambda a: a ** 2, [(5,)])
    gradcheck(lambda a: a ** 2.5, lambda a: a ** 2.5, None,
              values=[pos((5,))])
    gradcheck(lambda a: 2 ** a, lambda a: 2 ** a, [(5,)])
    gradcheck(lambda a, b: a ** b, lambda a, b: a ** b, None,
              values=[pos((3, 4)), pos((4,))])
    gradcheck(lambda a: a.pow(3), lambda a: a ** 3, [(4,)])
    gradcheck(lambda a: a ** 0, lambda a: a ** 0, [(4,)])


SCALAR_CASES = [
    ("mul_s", lambda a: a * 2.5, lambda a: a * 2.5),
    ("rmul_s", lambda a: 3 * a, lambda a: 3 * a),
    ("add_s", lambda a: a + 1, lambda a: a + 1),
    ("rsub_s", lambda a: 2 - a, lambda a: 2 - a),
    ("sub_s", lambda a: a - 2, lambda a: a - 2),
    ("div_s", lambda a: a / 4, lambda a: a / 4),
    ("rdiv_s", lambda a: 3 / a, lambda a: 3 / a),
    ("neg", lambda a: -a, lambda a: -a),
    ("pos", lambda a: +a * 1, lambda a: a),
    ("maximum_s", lambda a: a.maximum(ampc.tensor(0.3)),
     lambda a: np.maximum(a, np.float32(0.3))),
]


@pytest.mark.parametrize("name,fn,rfn", SCALAR_CASES,
                         ids=[c[0] for c in SCALAR_CASES])
def test_scalar_grad(name, fn, rfn):
    low = 0.5 if name == "rdiv_s" else -2.0
    gradcheck(fn, rfn, [(3, 5)], low=low)


UNARY_CASES = [
    ("abs", lambda a: a.abs(), np.abs, -2, 2),
    ("sqrt", lambda a: a.sqrt(), np.sqrt, 0.5, 3),
    ("exp", lambda a: a.exp(), np.exp, -2, 2),
    ("log", lambda a: a.log(), np.log, 0.5, 3),
    ("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), -2, 2),
    ("sign", lambda a: a.sign(), np.sign, -2, 2),
    ("clamp", lambda a: a.clamp(-0.5, 0.7), lambda a: np.clip(a, -0.5, 0.7),
     -2, 2),
    ("clamp_min", lambda a: a.clamp(min=0.1), lambda a: np.maximum(a, 0.1),
     -2, 2),
    ("clamp_max", lambda a: a.clamp(max=0.1), lambda a: np.minimum(a, 0.1),
     -2, 2),
    ("functional_exp", lambda a: ampc.exp(a), np.exp, -1, 1),
]


@pytest.mark.parametrize("name,fn,rfn,lo,hi", UNARY_CASES,
                         ids=[c[0] for c in UNARY_CASES])
def test_unary_grad(name, fn, rfn, lo, hi):
    rng = np.random.default_rng(3)
    v = rng.uniform(lo, hi, (4, 5))
    # keep finite differences away from kinks
    v[np.abs(v) < 0.05] = 0.3
    for k in (-0.5, 0.7, 0.1):
        v[np.abs(v - k) < 0.05] = k + 0.2
    gradcheck(fn, rfn, None, values=[ref.round_to(v, "float32")])


REDUCE_CASES = [
    ("sum", lambda a: a.sum(), lambda a: np.sum(a)),
    ("sum_dim", lambda a: a.sum(1), lambda a: np.sum(a, 1)),
    ("sum_neg_keep", lambda a: a.sum(-1, keepdim=True),
     lambda a: np.sum(a, -1, keepdims=True)),
    ("sum_tuple", lambda a: a.sum((0, 2)), lambda a: np.sum(a, (0, 2))),
    ("mean", lambda a: a.mean(), lambda a: np.mean(a)),
    ("mean_dim", lambda a: a.mean(0), lambda a: np.mean(a, 0)),
    ("mean_keep", lambda a: a.mean((1, 2), keepdim=True),
     lambda a: np.mean(a, (1, 2), keepdims=True)),
    ("max", lambda a: a.max(), lambda a: np.max(a)),
    ("min", lambda a: a.min(), lambda a: np.min(a)),
    ("max_dim", lambda a: a.max(1).values, lambda a: np.max(a, 1)),
    ("max_dim_keep", lambda a: a.max(2, keepdim=True)[0],
     lambda a: np.max(a, 2, keepdims=True)),
    ("min_dim", lambda a: a.min(0)[0], lambda a: np.min(a, 0)),
    ("functional_sum", lambda a: ampc.sum(a, 1), lambda a: np.sum(a, 1)),
]


@pytest.mark.parametrize("name,fn,rfn", REDUCE_CASES,
                         ids=[c[0] for c in REDUCE_CASES])
def test_reduce_grad(name, fn, rfn):
    gradcheck(fn, rfn, [(2, 3, 4)])


VIEW_CASES = [
    ("view", lambda a: a.view(6, 4) * 1, lambda a: a.reshape(6, 4)),
    ("view_infer", lambda a: a.view(-1), lambda a: a.reshape(-1)),
    ("reshape_t", lambda a: a.transpose(0, 2).reshape(4, 6),
     lambda a: np.swapaxes(a, 0, 2).reshape(4, 6)),
    ("flatten", lambda a: a.flatten(1), lambda a: a.reshape(2, 12)),
    ("flatten_fn", lambda a: ampc.flatten(a), lambda a: a.reshape(-1)),
    ("transpose", lambda a: a.transpose(1, 2), lambda a: np.swapaxes(a, 1, 2)),
    ("permute", lambda a: a.permute(2, 0, 1),
     lambda a: np.transpose(a, (2, 0, 1))),
    ("T", lambda a: a.T, lambda a: a.T),
    ("unsqueeze", lambda a: a.unsqueeze(1), lambda a: a[:, None]),
    ("squeeze", lambda a: a[:, :1].squeeze(1), lambda a: a[:, 0]),
    ("squeeze_all", lambda a: a[:1, :1].squeeze(), lambda a: a[0, 0]),
    ("expand", lambda a: a[:, :1].expand(2, 5, 4),
     lambda a: np.broadcast_to(a[:, :1], (2, 5, 4))),
    ("getitem_int", lambda a: a[1], lambda a: a[1]),
    ("getitem_slices", lambda a: a[:, 1:3, ::2], lambda a: a[:, 1:3, ::2]),
    ("getitem_mixed", lambda a: a[..., -1, None], lambda a: a[..., -1, None]),
    ("contiguous", lambda a: a.transpose(0, 1).contiguous(),
     lambda a: np.swapaxes(a, 0, 1)),
    ("clone", lambda a: a.clone(), lambda a: a),
]


@pytest.mark.parametrize("name,fn,rfn", VIEW_CASES,
                         ids=[c[0] for c in VIEW_CASES])
def test_view_grad(name, fn, rfn):
    gradcheck(fn, rfn, [(2, 3, 4)])


def test_t_grad():
    gradcheck(lambda a: a.t(), lambda a: a.T, [(3, 5)])


def test_cat_stack_grad():
    gradcheck(lambda a, b: ampc.cat([a, b], 1),
              lambda a, b: np.concatenate([a, b], 1), [(2, 3), (2, 5)])
    gradcheck(lambda a, b: ampc.cat([a, b, a]),
              lambda a, b: np.concatenate([a, b, a]), [(2, 3), (1, 3)])
    gradcheck(lambda a, b: ampc.stack([a, b], -1),
              lambda a, b: np.stack([a, b], -1), [(2, 3), (2, 3)])
    gradcheck(lambda a, b: ampc.stack([b, a]),
              lambda a, b: np.stack([b, a]), [(4,), (4,)])


def test_cat_with_constant():
    a = ampc.ones(2, requires_grad=True)
    out = ampc.cat([ampc.zeros(3), a * 2])
    out.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]


def test_composite_grad():
    def f(a, b):
        return ((a * b).exp() / (1 + a * a)).sum(1).sqrt()

    def rf(a, b):
        return np.sqrt(np.sum(np.exp(a * b) / (1 + a * a), 1))

    gradcheck(f, rf, [(3, 4), (3, 4)], low=-1, high=1)


def test_setitem_grad():
    def f(a, b):
        y = a * 1
        y[1, ::2] = b
        return y

    def rf(a, b):
        y = a.copy()
        y[1, ::2] = b
        return y

    gradcheck(f, rf, [(3, 4), (2,)])


def test_setitem_scalar_grad():
    a = ampc.ones(2, 3, requires_grad=True)
    y = a * 3
    y[np.int64(0)] = 0.0
    y.sum().backward()
    assert a.grad.tolist() == [[0.0] * 3, [3.0] * 3]


INPLACE_CASES = [
    ("add_", lambda y, b: y.add_(b), lambda y, b: y + b),
    ("sub_", lambda y, b: y.sub_(b), lambda y, b: y - b),
    ("mul_", lambda y, b: y.mul_(b), lambda y, b: y * b),
    ("div_", lambda y, b: y.div_(b), lambda y, b: y / b),
    ("iadd", lambda y, b: y.__iadd__(b), lambda y, b: y + b),
    ("imul", lambda y, b: y.__imul__(b), lambda y, b: y * b),
    ("copy_", lambda y, b: y.copy_(b), lambda y, b: np.broadcast_to(b, y.shape)
     + 0 * y),
]


@pytest.mark.parametrize("name,op,rop", INPLACE_CASES,
                         ids=[c[0] for c in INPLACE_CASES])
def test_inplace_grad(name, op, rop):
    def f(a, b):
        y = a * 2          # a non-leaf, so in-place is allowed
        r = op(y, b)
        assert r is y
        return y * a

    def rf(a, b):
        return rop(a * 2, b) * a

    gradcheck(f, rf, [(3, 4), (4,)], low=0.5)


@pytest.mark.parametrize("op", ["neg_", "abs_", "exp_", "relu_", "sqrt_",
                                "log_"])
def test_inplace_unary_grad(op):
    name = op[:-1]
    rfn = {"relu": lambda a: np.maximum(a, 0)}.get(name) or (
        (lambda a: -a) if name == "neg" else getattr(np, name))

    def f(a):
        y = a + 0
        getattr(y, op)()
        return y

    gradcheck(f, rfn, [(3, 4)], low=0.5, high=2.0)


def test_inplace_clamp_and_fill_grad():
    a = ampc.tensor([-2.0, 0.0, 2.0], requires_grad=True)
    y = a * 1
    y.clamp_(-1, 1)
    (y * ampc.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert a.grad.tolist() == [0.0, 2.0, 0.0]
    a.grad = None
    y = a * 1
    y.fill_(3)
    z = (y * a).sum()
    z.backward()
    assert a.grad.tolist() == [3.0, 3.0, 3.0]
    a.grad = None
    y = a * 1
    y.zero_()
    (y + a).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]


def test_inplace_on_view_of_nonleaf_grad():
    def f(a, b):
        h = a * 2
        h[0].mul_(b)               # a view's in-place op reaches its base
        h.t()[1].relu_()
        h[1, 1:] = b[1:] * 3
        h.view(-1)[0:2].add_(1)
        return h * a

    def rf(a, b):
        h = a * 2
        h[0] = h[0] * b
        h.T[1] = np.maximum(h.T[1], 0)
        h[1, 1:] = b[1:] * 3
        h.reshape(-1)[0:2] += 1
        return h * a

    gradcheck(f, rf, [(2, 3), (3,)], low=-1.5, high=1.5)


def test_inplace_on_view_vs_torch():
    torch = torch_or_skip()
    av = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    res = []
    for m in (ampc, torch):
        a = m.tensor(av, requires_grad=True)
        h = a * 1.5 + 0.1
        v = h[1:, ::2]
        v.mul_(a[1:, 1::2])
        h.transpose(0, 1)[0].clamp_(0.5, 1.5)
        w = h.view(12)[3:9]
        w[2:4] = a[0, :2]
        y = (h * h).sum() + v.sum()
        y.backward()
        res.append((y.item(), a.grad.numpy().copy()))
    assert abs(res[0][0] - res[1][0]) < 1e-4
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-6)


SCENARIOS = [
    # each gets (m, a) and returns a scalar loss; run in ampc and torch
    lambda m, a: _scenario_stale_views(m, a),
    lambda m, a: _scenario_view_of_view(m, a),
    lambda m, a: _scenario_base_then_view(m, a),
]


def _scenario_stale_views(m, a):
    h = a * 2
    v0 = h[0]
    v1 = h[:, 1]
    v0.add_(a[1])            # v1 is stale now (shares h[0, 1])
    v1.mul_(3)               # and v0 again
    return (v0 * v0).sum() + (v1 * a[:, 2]).sum() + h.sum()


def _scenario_view_of_view(m, a):
    h = a + 1
    v = h.view(12)[2:10].view(2, 4)
    w = v[:, 1:3]
    w.mul_(a[0, :2])
    v[1] = a[2, :4]
    return (h * a).sum() + w.sum()


def _scenario_base_then_view(m, a):
    h = a * a
    v = h.t()
    h.mul_(2)                # v must see the base's new history
    v[0].sub_(a[:, 3])
    return (v * v).sum()


@pytest.mark.parametrize("k", range(len(SCENARIOS)))
def test_inplace_view_scenarios_vs_torch(k):
    torch = torch_or_skip()
    av = np.linspace(-1, 1.5, 12, dtype=np.float32).reshape(3, 4)
    res = []
    for m in (ampc, torch):
        a = m.tensor(av, requires_grad=True)
        y = SCENARIOS[k](m, a)
        y.backward()
        res.append((y.item(), a.grad.numpy().copy()))
    assert abs(res[0][0] - res[1][0]) < 1e-4 * max(1, abs(res[1][0]))
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-5)


def test_inplace_write_into_view_of_plain_tensor():
    # Needs TensorBase._base from the C engine (see the report): without it
    # Python cannot tell that v is a view of buf.
    x = ampc.ones(2, requires_grad=True)
    buf = ampc.zeros(4)
    v = buf[1:3]
    v.copy_(x * 2)
    assert buf.requires_grad and buf.grad_fn is not None
    (buf * ampc.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [4.0, 6.0]


def test_view_of_copying_reshape_is_not_a_view():
    a = ampc.ones(2, 3, requires_grad=True)
    h = a * 1
    r = h.t().reshape(6)        # a copy: writing to it leaves h alone
    r.mul_(2)
    (h.sum() + r.sum()).backward()
    assert a.grad.tolist() == [[3.0] * 3] * 2


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


def test_create_graph_not_supported():
    x = ampc.ones(1, requires_grad=True)
    with pytest.raises(NotImplementedError, match="create_graph"):
        (x * x).sum().backward(create_graph=True)


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
