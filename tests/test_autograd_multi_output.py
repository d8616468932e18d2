"""A user's autograd.Function that returns a tuple (ampc/autograd/
multi_output.py): every float tensor output differentiable, backward called
once with one argument per element of the tuple (zeros or None where no
gradient came, None for non-tensors), mark_non_differentiable,
set_materialize_grads, hooks and retain_grad per output, autograd.grad with
respect to one output, retain_graph, and second derivatives through saved
outputs; against closed forms, finite differences and torch where
installed."""
import numpy as np
import pytest

import ampc
from helpers import assert_close, gradcheck, to64

Function = ampc.autograd.Function


def _torch():
    return pytest.importorskip("torch")


def _define(base, backward_log=None):
    """SinCos-like pair without transcendental functions: (x * y, x + y),
    saving x and y; backward logs what it gets."""

    class ProdSum(base):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x + y

        @staticmethod
        def backward(ctx, gp, gs):
            if backward_log is not None:
                backward_log.append((gp, gs))
            x, y = ctx.saved_tensors
            return gp * y + gs, gp * x + gs
    return ProdSum


def _values(n=7, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, n).astype(np.float32),
            rng.uniform(-2, 2, n).astype(np.float32))


def test_both_outputs_reach_one_backward_call():
    log = []
    ProdSum = _define(Function, log)
    xv, yv = _values()
    x = ampc.tensor(xv, requires_grad=True)
    y = ampc.tensor(yv, requires_grad=True)
    p, s = ProdSum.apply(x, y)
    assert p.requires_grad and s.requires_grad
    assert p.grad_fn.name() == s.grad_fn.name() == "ProdSumBackward"
    (2 * p.sum() + 3 * s.sum()).backward()
    assert len(log) == 1
    assert_close(x.grad, 2 * yv.astype(np.float64) + 3)
    assert_close(y.grad, 2 * xv.astype(np.float64) + 3)


def test_finite_differences():
    ProdSum = _define(Function)

    def f(x, y):
        p, s = ProdSum.apply(x, y)
        return p * s

    gradcheck(f, lambda x, y: (x * y) * (x + y), [(5,), (5,)])


def test_an_unused_output_gets_zeros_or_none():
    log = []
    ProdSum = _define(Function, log)
    xv, yv = _values()
    x = ampc.tensor(xv, requires_grad=True)
    y = ampc.tensor(yv, requires_grad=True)
    p, _ = ProdSum.apply(x, y)
    p.sum().backward()
    gp, gs = log[0]
    assert to64(gs).tolist() == [0.0] * 7 and gs.dtype == ampc.float32
    assert_close(x.grad, yv.astype(np.float64))

    class NoZeros(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            log.append((ga, gb))
            return ga * 2 if gb is None else ga * 2 + gb * 3

    a, _ = NoZeros.apply(x)
    a.sum().backward()
    assert log[-1][0] is not None and log[-1][1] is None


def _mixed(lib, seen):
    """A Function of lib (ampc or torch) returning a float output, an int64
    tensor, a Python int and a float output marked non-differentiable;
    backward appends what it gets to seen."""

    class Mixed(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            twice = x * 3
            ctx.mark_non_differentiable(twice)
            return x * 2, lib.tensor([1, 2]), 5, twice

        @staticmethod
        def backward(ctx, *grads):
            seen.append(grads)
            return grads[0] * 2
    return Mixed


def test_every_element_gets_an_argument_as_in_torch():
    seen = []
    x = ampc.ones(3, requires_grad=True)
    a, idx, k, twice = _mixed(ampc, seen).apply(x)
    assert a.requires_grad and not idx.requires_grad
    assert not twice.requires_grad and k == 5
    a.sum().backward()
    g, gi, gk, gt = seen[0]
    assert to64(g).tolist() == [1.0] * 3
    assert gi.dtype == ampc.int64 and to64(gi).tolist() == [0, 0]
    assert gk is None
    assert to64(gt).tolist() == [0.0] * 3
    assert to64(x.grad).tolist() == [2.0] * 3

    torch = _torch()
    tseen = []
    tx = torch.ones(3, requires_grad=True)
    ta, tidx, _, ttwice = _mixed(torch, tseen).apply(tx)
    ta.sum().backward()
    assert [t is None for t in tseen[0]] == [t is None for t in seen[0]]
    assert (ta.requires_grad, tidx.requires_grad, ttwice.requires_grad) == \
        (a.requires_grad, idx.requires_grad, twice.requires_grad)


def test_a_single_output_marked_non_differentiable():
    class Const(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.mark_non_differentiable(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g

    x = ampc.ones(2, requires_grad=True)
    assert not Const.apply(x).requires_grad


def test_hooks_and_retain_grad_see_their_own_output():
    ProdSum = _define(Function)
    xv, yv = _values()
    x = ampc.tensor(xv, requires_grad=True)
    y = ampc.tensor(yv, requires_grad=True)
    p, s = ProdSum.apply(x, y)
    p.retain_grad()
    s.retain_grad()
    seen = []
    s.register_hook(lambda g: seen.append(to64(g).copy()) or g * 10)
    (2 * p.sum() + 3 * s.sum()).backward()
    assert to64(p.grad).tolist() == [2.0] * 7
    assert to64(s.grad).tolist() == [30.0] * 7     # after the hook, as torch
    assert seen[0].tolist() == [3.0] * 7
    # the hook's 10x reaches the sum's part of the gradient only
    assert_close(x.grad, 2 * yv.astype(np.float64) + 30)


def test_autograd_grad_with_respect_to_one_output():
    ProdSum = _define(Function)
    xv, yv = _values()
    x = ampc.tensor(xv, requires_grad=True)
    y = ampc.tensor(yv, requires_grad=True)
    p, s = ProdSum.apply(x, y)
    loss = (p * s).sum()
    gp, gx = ampc.autograd.grad(loss, [p, x])
    x64, y64 = xv.astype(np.float64), yv.astype(np.float64)
    assert_close(gp, x64 + y64)
    assert_close(gx, 2 * x64 * y64 + y64 * y64)


def test_retain_graph_and_the_freed_graph():
    ProdSum = _define(Function)
    x = ampc.ones(3, requires_grad=True)
    p, s = ProdSum.apply(x, x * 2)
    loss = (p + s).sum()
    loss.backward(retain_graph=True)
    first = to64(x.grad).copy()
    loss.backward()
    assert_close(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a "
                                           "second time"):
        loss.backward()


def test_an_input_returned_unchanged_keeps_its_history():
    class PassAndDouble(Function):
        @staticmethod
        def forward(ctx, x):
            return x, x * 2

        @staticmethod
        def backward(ctx, ga, gb):
            return ga + 2 * gb

    x = ampc.ones(3, requires_grad=True)
    a, b = PassAndDouble.apply(x)
    assert a is not x and x.grad_fn is None
    (a.sum() + b.sum()).backward()
    assert to64(x.grad).tolist() == [3.0] * 3


class Square2(Function):
    """(x^2, x^3), saving its outputs: a second derivative must flow
    through them."""

    @staticmethod
    def forward(ctx, x):
        sq = x * x
        cube = sq * x
        ctx.save_for_backward(x, sq, cube)
        return sq, cube

    @staticmethod
    def backward(ctx, gs, gc):
        x, sq, cube = ctx.saved_tensors
        # d(x^2) = 2x, d(x^3) = 3 x^2 = 3 sq; cube / x would also do
        return gs * 2 * x + gc * 3 * sq


def test_second_derivatives_through_saved_outputs():
    xv = np.array([0.5, -1.25, 2.0], np.float32)
    x = ampc.tensor(xv, requires_grad=True)
    sq, cube = Square2.apply(x)
    g, = ampc.autograd.grad((sq + cube).sum(), x, create_graph=True)
    x64 = xv.astype(np.float64)
    assert_close(g, 2 * x64 + 3 * x64 ** 2)
    g.sum().backward()
    assert_close(x.grad, 2 + 6 * x64)

    torch = _torch()

    class TSquare2(torch.autograd.Function):
        forward = staticmethod(Square2.forward.__func__
                               if hasattr(Square2.forward, "__func__")
                               else Square2.forward)
        backward = staticmethod(Square2.backward)
    tx = torch.tensor(xv, requires_grad=True)
    tsq, tcube = TSquare2.apply(tx)
    tg, = torch.autograd.grad((tsq + tcube).sum(), tx, create_graph=True)
    tg.sum().backward()
    np.testing.assert_array_equal(to64(g), tg.detach().double().numpy())
    np.testing.assert_array_equal(to64(x.grad), tx.grad.double().numpy())


def test_ampc_own_tuple_ops_keep_one_differentiable_output():
    x = ampc.tensor([[1.0, 3.0], [2.0, 0.5]], requires_grad=True)
    values, indices = x.max(1)
    assert values.requires_grad and not indices.requires_grad
    values.sum().backward()
    assert to64(x.grad).tolist() == [[0.0, 1.0], [1.0, 0.0]]


class Cube2(Function):
    """(x^2, x^3) saving x and both outputs; d/dx uses x^3 / x."""

    @staticmethod
    def forward(ctx, x):
        a = x * x
        b = a * x
        ctx.save_for_backward(x, a, b)
        return a, b

    @staticmethod
    def backward(ctx, ga, gb):
        x, a, b = ctx.saved_tensors
        return ga * 2 * x + gb * 3 * b / x


def _torch_cube2(torch):
    class TCube2(torch.autograd.Function):
        forward = staticmethod(Cube2.forward)
        backward = staticmethod(Cube2.backward)
    return TCube2


@pytest.mark.parametrize("case", ["output_used_twice", "hook", "retain"])
def test_second_derivatives_through_an_output_reached_twice(case):
    """The output's own node serves its saved copy under create_graph (its
    hooks and retain_grad included), and two contributions to one output
    add up, as in PyTorch."""
    torch = _torch()

    def run(lib, fn):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, b = fn.apply(x)
        if case == "hook":
            b.register_hook(lambda g: g * 2)
        if case == "retain":
            b.retain_grad()
        loss = (b * b).sum() if case == "output_used_twice" else b.sum()
        g, = lib.autograd.grad(loss, x, create_graph=True)
        g.sum().backward()
        extra = b.grad.tolist() if case == "retain" else None
        return g.tolist(), x.grad.tolist(), extra

    got = run(ampc, Cube2)
    want = run(torch, _torch_cube2(torch))
    assert got == want


def test_a_backward_that_raised_leaves_nothing_behind():
    ProdSum = _define(Function)
    x = ampc.ones(2, requires_grad=True)
    p, s = ProdSum.apply(x, x * 2)

    def bad(g):
        raise ValueError("no")
    h = p.register_hook(bad)
    with pytest.raises(ValueError):
        (p.sum() + 100 * s.sum()).backward(retain_graph=True)
    h.remove()
    x.grad = None
    p.sum().backward()
    # p = x * (2x): d/dx = 4x, nothing of the failed pass's 100 * s
    assert to64(x.grad).tolist() == [4.0, 4.0]


def test_a_returned_input_marked_non_differentiable_is_a_new_tensor():
    class Passthrough(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_non_differentiable(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = ampc.ones(2, requires_grad=True)
    y = Passthrough.apply(x)
    assert y is not x and not y.requires_grad and x.requires_grad


def test_an_in_place_op_on_an_output_that_views_an_input_is_refused():
    class ViewAndTriple(Function):
        @staticmethod
        def forward(ctx, x):
            return x.view(2), x * 3

        @staticmethod
        def backward(ctx, a, b):
            return a + 3 * b

    x = ampc.ones(2, requires_grad=True) * 1
    a, _ = ViewAndTriple.apply(x)
    with pytest.raises(RuntimeError, match="Output 0 of ViewAndTriple is a "
                                           "view and is being modified "
                                           "inplace"):
        a.mul_(2)
