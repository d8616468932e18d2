"""The loss kernels of ampc._C (nll_loss, cross_entropy, mse_loss), forward
and backward, for every float dtype on every CPU level: against the float64
NumPy oracle (reference.py) on random data of odd sizes, gradients also
against central differences of the oracle, and against torch where it is
installed.  Their error cases are with the other NN kernels' in
test_nn_kernels.py.
"""
import numpy as np
import pytest

import ampc
import reference as ref
from helpers import (
    FLOAT_NAMES, assert_close, numeric_grad, rand_values, to64, torch_or_skip,
)
from test_nn_kernels import (
    check_variant, from_torch, longs, tensor, tol, torch_tensor,
)

C = ampc._C


# nll_loss and cross_entropy


def class_data(n, c, dtype, rng, weighted, ignore=-100):
    """logits (n, c) or (c,) for n None, targets with some ignored rows,
    weights or None."""
    x = rand_values((c,) if n is None else (n, c), dtype, rng, -5.0, 5.0)
    t = rng.integers(0, c, size=() if n is None else (n,))
    if n is not None and n > 2:
        t[1::4] = ignore
    w = rand_values((c,), dtype, rng, 0.25, 2.0) if weighted else None
    return x, t, w


def weight_arg(w, dtype):
    return None if w is None else tensor(w, dtype)


REDUCTIONS = ("mean", "sum", "none")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("c", [1, 3, 10, 1000])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("ls", [0.0, 0.1], ids=["", "smooth"])
def test_cross_entropy(cpu_level, dtype, c, weighted, ls, rng):
    for n in (1, 17, None):
        x, t, w = class_data(n, c, dtype, rng, weighted)
        for red in REDUCTIONS:
            loss, logp = C.cross_entropy(tensor(x, dtype), longs(t),
                                         weight_arg(w, dtype), red, -100, ls)
            check_variant("cross_entropy_fwd", cpu_level)
            assert logp.dtype.name == dtype and loss.dtype.name == dtype
            assert_close(logp, ref.log_softmax(x, -1), dtype, **tol(dtype, c))
            want = ref.cross_entropy(x, t, w, red, -100, ls)
            assert_close(loss, want, dtype, **tol(dtype, 4 * c))
            g = rand_values(np.shape(want), dtype, rng, 0.5, 1.5)
            got = C.cross_entropy_backward(tensor(g, dtype), logp, longs(t),
                                           weight_arg(w, dtype), red, -100,
                                           ls)
            check_variant("cross_entropy_bwd", cpu_level)
            want_g = ref.cross_entropy_backward(g, to64(logp), t, w, red,
                                                -100, ls)
            assert_close(got, want_g, dtype, **tol(dtype, 4 * c))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("c", [1, 3, 10, 1000])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
def test_nll_loss(cpu_level, dtype, c, weighted, rng):
    for n in (1, 17, None):
        x, t, w = class_data(n, c, dtype, rng, weighted, ignore=c // 2)
        for red in REDUCTIONS:
            loss, total = C.nll_loss(tensor(x, dtype), longs(t),
                                     weight_arg(w, dtype), red, c // 2)
            check_variant("nll_loss_fwd", cpu_level)
            want, want_total = ref.nll_loss(x, t, w, red, c // 2)
            assert total.dtype is ampc.float32 and total.ndim == 0
            assert_close(total, want_total, "float32")
            assert_close(loss, want, dtype, **tol(dtype, n or 1))
            g = rand_values(np.shape(want), dtype, rng, 0.5, 1.5)
            got = C.nll_loss_backward(tensor(g, dtype), tensor(x, dtype),
                                      longs(t), weight_arg(w, dtype), red,
                                      c // 2, total)
            want_g = ref.nll_loss_backward(g, x, t, w, red, c // 2)
            assert_close(got, want_g, dtype, **tol(dtype))


@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("ls", [0.0, 0.2], ids=["", "smooth"])
@pytest.mark.parametrize("red", REDUCTIONS)
def test_cross_entropy_gradient_by_differences(weighted, ls, red, rng):
    x, t, w = class_data(5, 4, "float32", rng, weighted)
    want_loss = ref.cross_entropy(x, t, w, red, -100, ls)
    g = ref.round_to(rng.uniform(0.5, 1.5, np.shape(want_loss)), "float32")
    _, logp = C.cross_entropy(tensor(x, "float32"), longs(t),
                              weight_arg(w, "float32"), red, -100, ls)
    got = C.cross_entropy_backward(tensor(g, "float32"), logp, longs(t),
                                   weight_arg(w, "float32"), red, -100, ls)
    (want,) = numeric_grad(
        lambda v: np.asarray(ref.cross_entropy(v, t, w, red, -100, ls)), [x],
        g)
    assert_close(got, want, "float32", rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("red", REDUCTIONS)
def test_nll_loss_gradient_by_differences(red, rng):
    x, t, w = class_data(6, 5, "float32", rng, True)
    want_loss = ref.nll_loss(x, t, w, red)[0]
    g = ref.round_to(rng.uniform(0.5, 1.5, np.shape(want_loss)), "float32")
    got = C.nll_loss_backward(tensor(g, "float32"), tensor(x, "float32"),
                              longs(t), weight_arg(w, "float32"), red)
    (want,) = numeric_grad(lambda v: np.asarray(ref.nll_loss(v, t, w,
                                                             red)[0]),
                           [x], g)
    assert_close(got, want, "float32", rtol=1e-4, atol=1e-6)


def test_cross_entropy_total_weight_argument(rng):
    x, t, w = class_data(9, 6, "float32", rng, True)
    loss, logp = C.cross_entropy(tensor(x, "float32"), longs(t),
                                 tensor(w, "float32"))
    _, total = C.nll_loss(logp, longs(t), tensor(w, "float32"))
    one = tensor(1.0, "float32")
    a = C.cross_entropy_backward(one, logp, longs(t), tensor(w, "float32"))
    b = C.cross_entropy_backward(one, logp, longs(t), tensor(w, "float32"),
                                 "mean", -100, 0.0, total)
    c = C.cross_entropy_backward(one, logp, longs(t), tensor(w, "float32"),
                                 total_weight=float(to64(total)))
    assert np.array_equal(to64(a), to64(b))
    assert np.array_equal(to64(a), to64(c))


def test_cross_entropy_all_ignored(cpu_level):
    x = np.zeros((3, 4))
    t = np.full(3, -100)
    loss, _ = C.cross_entropy(tensor(x, "float32"), longs(t))
    assert np.isnan(to64(loss))
    loss, _ = C.cross_entropy(tensor(x, "float32"), longs(t), None, "sum")
    assert to64(loss) == 0.0
    g = C.cross_entropy_backward(tensor(1.0, "float32"),
                                 C.log_softmax(tensor(x, "float32"), 1),
                                 longs(t))
    assert np.array_equal(to64(g), np.zeros((3, 4)))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cross_entropy_huge_logits(cpu_level, dtype):
    big = 65504.0 if dtype == "float16" else 1e4
    x = ref.round_to(np.array([[big, -big, 0.0], [-big, big, 1.0],
                               [0.0, -big, big]]), dtype)
    t = np.array([0, 0, 2])
    loss, logp = C.cross_entropy(tensor(x, dtype), longs(t), None, "none")
    want = ref.cross_entropy(x, t, None, "none")
    assert_close(loss, want, dtype, **tol(dtype, 3))
    g = C.cross_entropy_backward(tensor(np.ones(3), dtype), logp, longs(t),
                                 None, "none")
    assert np.isfinite(to64(g)).all()
    # the gradient is softmax - one_hot: rows 0 and 2 are exact hits
    assert_close(g, ref.softmax(x, 1) - np.eye(3)[t], dtype)


def test_cross_entropy_torch(rng):
    """Every option against torch (in float32, on the dtype's values), each
    combination with one reduction in turn: the oracle tests cover every
    reduction of every combination."""
    torch = torch_or_skip()
    F = torch.nn.functional
    combos = [(dtype, c, weighted, ls) for dtype in FLOAT_NAMES
              for c in (1, 3, 10, 1000) for weighted in (False, True)
              for ls in (0.0, 0.1)]
    for k, (dtype, c, weighted, ls) in enumerate(combos):
        red = REDUCTIONS[k % 3]
        x, t, w = class_data(17, c, dtype, rng, weighted)
        xt = torch_tensor(torch, x, "float32").requires_grad_()
        wt = None if w is None else torch_tensor(torch, w, "float32")
        lt = F.cross_entropy(xt, torch.from_numpy(t), wt, reduction=red,
                             label_smoothing=ls)
        g = rand_values(tuple(lt.shape), dtype, rng, 0.5, 2)
        lt.backward(torch_tensor(torch, g, "float32"))
        loss, logp = C.cross_entropy(tensor(x, dtype), longs(t),
                                     weight_arg(w, dtype), red, -100, ls)
        assert_close(loss, from_torch(lt), dtype, **tol(dtype, 4 * c))
        gx = C.cross_entropy_backward(tensor(g, dtype), logp, longs(t),
                                      weight_arg(w, dtype), red, -100, ls)
        assert_close(gx, from_torch(xt.grad), dtype, **tol(dtype, 64 * c))


def test_nll_loss_torch(rng):
    torch = torch_or_skip()
    F = torch.nn.functional
    for dtype in FLOAT_NAMES:
        for weighted in (False, True):
            for red in REDUCTIONS:
                x, t, w = class_data(17, 10, dtype, rng, weighted, ignore=3)
                xt = torch_tensor(torch, x, dtype).requires_grad_()
                wt = None if w is None else torch_tensor(torch, w, dtype)
                lt = F.nll_loss(xt, torch.from_numpy(t), wt, reduction=red,
                                ignore_index=3)
                g = rand_values(tuple(lt.shape), dtype, rng, 0.5, 2)
                lt.backward(torch_tensor(torch, g, dtype))
                loss, total = C.nll_loss(tensor(x, dtype), longs(t),
                                         weight_arg(w, dtype), red, 3)
                assert_close(loss, from_torch(lt), dtype, **tol(dtype, 17))
                gx = C.nll_loss_backward(tensor(g, dtype), tensor(x, dtype),
                                         longs(t), weight_arg(w, dtype), red,
                                         3, total)
                assert_close(gx, from_torch(xt.grad), dtype, **tol(dtype, 4))


# ----------------------------------------------------------------------------
# mse_loss


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape", [(1,), (3,), (7, 1), (33, 3), (40003,)])
def test_mse_loss(cpu_level, dtype, shape, rng):
    x = rand_values(shape, dtype, rng)
    t = rand_values(shape, dtype, rng)
    n = int(np.prod(shape))
    for red in REDUCTIONS:
        loss = C.mse_loss(tensor(x, dtype), tensor(t, dtype), red)
        check_variant("mse_loss_fwd", cpu_level)
        assert loss.dtype.name == dtype
        assert_close(loss, ref.mse_loss(x, t, red), dtype, **tol(dtype, n))
        g = rand_values(np.shape(ref.mse_loss(x, t, red)), dtype, rng, 0.5,
                        1.5)
        got = C.mse_loss_backward(tensor(g, dtype), tensor(x, dtype),
                                  tensor(t, dtype), red)
        check_variant("mse_loss_bwd", cpu_level)
        want = ref.mse_loss_backward(g, x, t, red)
        assert_close(got, want, dtype, **tol(dtype, 4))


@pytest.mark.parametrize("red", REDUCTIONS)
def test_mse_loss_gradient_by_differences(red, rng):
    x, t = (ref.round_to(rng.uniform(-2, 2, (3, 5)), "float32")
            for _ in range(2))
    g = ref.round_to(rng.uniform(0.5, 1.5, np.shape(ref.mse_loss(x, t, red))),
                     "float32")
    got = C.mse_loss_backward(tensor(g, "float32"), tensor(x, "float32"),
                              tensor(t, "float32"), red)
    (want,) = numeric_grad(lambda v: np.asarray(ref.mse_loss(v, t, red)),
                           [x], g)
    assert_close(got, want, "float32", rtol=1e-4, atol=1e-6)


def test_mse_loss_empty():
    e = tensor(np.zeros((0, 3)), "float32")
    assert np.isnan(to64(C.mse_loss(e, e)))
    assert to64(C.mse_loss(e, e, "sum")) == 0.0
    assert tuple(C.mse_loss(e, e, "none").shape) == (0, 3)


def test_mse_loss_torch(rng):
    torch = torch_or_skip()
    F = torch.nn.functional
    for dtype in FLOAT_NAMES:
        for red in REDUCTIONS:
            x = rand_values((33, 7), dtype, rng)
            t = rand_values((33, 7), dtype, rng)
            xt = torch_tensor(torch, x, dtype).requires_grad_()
            lt = F.mse_loss(xt, torch_tensor(torch, t, dtype), reduction=red)
            g = rand_values(tuple(lt.shape), dtype, rng, 0.5, 2)
            lt.backward(torch_tensor(torch, g, dtype))
            loss = C.mse_loss(tensor(x, dtype), tensor(t, dtype), red)
            assert_close(loss, from_torch(lt), dtype, **tol(dtype, 231))
            gx = C.mse_loss_backward(tensor(g, dtype), tensor(x, dtype),
                                     tensor(t, dtype), red)
            assert_close(gx, from_torch(xt.grad), dtype, **tol(dtype, 16))
