"""The NN kernels on CUDA: relu_backward, max_pool2d, softmax and
log_softmax, nll_loss, cross_entropy, mse_loss and dropout, forward and
backward, on the GPU against the CPU with the same inputs (the CPU results
are checked against NumPy by tests/test_nn_kernels.py), for every float
dtype, odd shapes, non-contiguous inputs and NaN/inf; against torch on the
GPU where torch with CUDA is importable.  Where the GPU runs the CPU's
arithmetic in the CPU's order (relu's bit rule, the pooling window rule,
max_pool2d's backward sums, the loss gradients' per-element math), the
results must be the same bits.

Without a GPU only the tests of the CPU side of the new arguments run.
"""
import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import assert_close_to_cpu, assert_same, torch_cuda
from cuda_helpers import requires_cuda as _requires_cuda
from helpers import from_values, to64


def requires_cuda(fn):
    """A GPU test: marked ``cuda`` (selected by ``-m cuda``) and skipped
    without a GPU.  Not a module-wide ``cuda`` mark: this file's GPU-less
    tests must stay out of ``-m cuda`` and in ``-m "not cuda"``."""
    return pytest.mark.cuda(_requires_cuda(fn))

C = ampc._C
FLOATS = ("float32", "float16", "bfloat16")
NAN, INF = float("nan"), float("inf")


def pair(values, dtype, layout="contig"):
    """(cpu, cuda) tensors of the same values, rounded to dtype."""
    values = ref.round_to(np.asarray(values, dtype=np.float64), dtype)
    if layout == "t":
        base = from_values(np.swapaxes(values, -1, -2).copy(), dtype)
        return base.transpose(-1, -2), base.to("cuda").transpose(-1, -2)
    if layout == "step":
        shape = list(values.shape)
        shape[-1] *= 2
        big = np.zeros(shape)
        big[..., ::2] = values
        base = from_values(big, dtype)
        return base[..., ::2], base.to("cuda")[..., ::2]
    base = from_values(values, dtype)
    return base, base.to("cuda")


def longs(values):
    t = from_values(np.asarray(values, dtype=np.float64), "int64")
    return t, t.to("cuda")


def exact(cuda_t, cpu_t, msg=""):
    """The same bits (NaN where NaN) and the same dtype and shape."""
    assert_same(cuda_t, cpu_t, rtol=0.0, atol=0.0, msg=msg)
    got, want = to64(cuda_t.detach().cpu()), to64(cpu_t.detach())
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{msg}{(~same).sum()} elements differ"


def special(values, rng):
    """values with zeros, -0, NaN and infinities sprinkled in."""
    v = values.copy()
    flat = v.reshape(-1)
    for val, step in ((0.0, 7), (-0.0, 11), (NAN, 13), (INF, 17),
                      (-INF, 19)):
        flat[rng.integers(0, step):: step * 3] = val
    return v


# ----------------------------------------------------------------------------
# everywhere: the CPU side of max_pool2d_backward's geometry arguments


def test_pool_backward_geometry_is_optional_on_the_cpu():
    rng = np.random.default_rng(0)
    x = from_values(rng.normal(size=(2, 3, 9, 8)), "float32")
    y, idx = C.max_pool2d(x, 3, 2, 1)
    g = from_values(rng.normal(size=tuple(y.shape)), "float32")
    a = C.max_pool2d_backward(g, idx, tuple(x.shape))
    b = C.max_pool2d_backward(g, idx, tuple(x.shape), (3, 3), (2, 2),
                              (1, 1), (1, 1))
    np.testing.assert_array_equal(to64(a), to64(b))


def test_pool_backward_geometry_is_checked():
    x = ampc.ones(1, 1, 4, 4)
    y, idx = C.max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="must be positive"):
        C.max_pool2d_backward(ampc.ones(1, 1, 2, 2), idx, (1, 1, 4, 4),
                              (2, 2), (0, 2))
    with pytest.raises(TypeError, match="kernel_size"):
        C.max_pool2d_backward(ampc.ones(1, 1, 2, 2), idx, (1, 1, 4, 4),
                              "2")


# ----------------------------------------------------------------------------
# relu_backward: a bit rule, so exact


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1,), (7,), (33, 65), (1023,),
                                   (100003,)])
@pytest.mark.parametrize("layout", ["contig", "step"])
def test_relu_backward(dtype, shape, layout):
    rng = np.random.default_rng(1)
    out = special(rng.normal(size=shape), rng)
    oc, og = pair(out, dtype, layout)
    gc, gg = pair(rng.normal(size=shape), dtype, layout)
    exact(C.relu_backward(gg, og), C.relu_backward(gc, oc))


@requires_cuda
def test_relu_backward_unaligned_views():
    """Offsets of 1..3 elements: the 16-byte vector path must step aside."""
    rng = np.random.default_rng(2)
    for dtype in FLOATS:
        oc, og = pair(rng.normal(size=1031), dtype)
        gc, gg = pair(rng.normal(size=1031), dtype)
        for k in (1, 2, 3):
            exact(C.relu_backward(gg[k:], og[k:]),
                  C.relu_backward(gc[k:], oc[k:]))


@requires_cuda
def test_relu_autograd():
    x = np.random.default_rng(3).normal(size=(17, 31))
    for dtype in FLOATS:
        assert_close_to_cpu(F.relu, x, dtype=dtype, grad=True)


# ----------------------------------------------------------------------------
# max_pool2d: the window rule and the backward sums in the CPU's order


POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0),
         dilation=(2, 1)),
    dict(kernel_size=3, stride=1, padding=1),
    dict(kernel_size=2, stride=2, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(3, 1), dilation=(1, 2)),
]


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("geo", POOLS)
@pytest.mark.parametrize("shape", [(2, 3, 9, 11), (5, 8, 7), (1, 1, 1, 4)])
def test_max_pool2d(dtype, geo, shape):
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, size=shape).astype(np.float64)  # many ties
    x.reshape(-1)[::29] = NAN
    x.reshape(-1)[5::31] = -INF
    xc, xg = pair(x, dtype)
    try:
        yc, ic = C.max_pool2d(xc, **geo)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            C.max_pool2d(xg, **geo)
        return
    yg, ig = C.max_pool2d(xg, **geo)
    exact(yg, yc, "output: ")
    exact(ig, ic, "indices: ")
    # backward, both CUDA forms: gather (geometry given) and scan
    gc, gg = pair(rng.normal(size=tuple(yc.shape)), dtype)
    want = C.max_pool2d_backward(gc, ic, tuple(xc.shape))
    exact(C.max_pool2d_backward(gg, ig, tuple(xg.shape)), want, "scan: ")
    k = geo["kernel_size"]
    s = geo.get("stride") or k
    exact(C.max_pool2d_backward(gg, ig, tuple(xg.shape), k, s,
                                geo.get("padding", 0),
                                geo.get("dilation", 1)),
          want, "gather: ")


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
def test_max_pool2d_window_in_the_padding(dtype):
    """ceil_mode with padding and dilation: a last window holding no element
    gives -inf and an index outside it (torch's rule); the backward still
    sends its gradient there, on the GPU as on the CPU."""
    geo = dict(kernel_size=2, stride=3, padding=1, dilation=3,
               ceil_mode=True)
    x = np.arange(2 * 8, dtype=np.float64).reshape(2, 1, 4, 2)
    xc, xg = pair(x, dtype)
    yc, ic = C.max_pool2d(xc, **geo)
    yg, ig = C.max_pool2d(xg, **geo)
    assert np.isinf(to64(yc)).all()
    exact(yg, yc, "output: ")
    exact(ig, ic, "indices: ")
    gc, gg = pair(np.array([1.0, 2.0, 3.0, 4.0]).reshape(yc.shape), dtype)
    want = C.max_pool2d_backward(gc, ic, tuple(xc.shape))
    assert to64(want).sum() == 10.0
    exact(C.max_pool2d_backward(gg, ig, tuple(xg.shape), 2, 3, 1, 3), want,
          "gather geometry: ")


@requires_cuda
@pytest.mark.parametrize("layout", ["step", "t"])
def test_max_pool2d_non_contiguous_autograd(layout):
    x = np.random.default_rng(5).normal(size=(2, 3, 10, 10))
    for dtype in FLOATS:
        assert_close_to_cpu(lambda t: F.max_pool2d(t, 3, 2, 1), x,
                            dtype=dtype, layout=layout, grad=True,
                            rtol=0.0, atol=0.0)


@requires_cuda
def test_max_pool2d_bad_index_is_reported_later():
    x = ampc.ones(1, 1, 4, 4).to("cuda")
    y, idx = C.max_pool2d(x, 2)
    bad = ampc.tensor([[[[0, 99], [2, 3]]]]).to("cuda")
    C.max_pool2d_backward(ampc.ones(1, 1, 2, 2).to("cuda"), bad,
                          (1, 1, 4, 4))
    ampc.cuda.synchronize()
    with pytest.raises(IndexError, match=r"\[0, 16\).*found 99"):
        C.max_pool2d(x, 2)
    C.max_pool2d(x, 2)          # reported once, then cleared


@requires_cuda
def test_max_pool2d_matches_torch():
    torch = torch_cuda()
    x = np.random.default_rng(6).normal(size=(4, 5, 13, 12)).astype(
        np.float32)
    for geo in POOLS:
        y, idx = C.max_pool2d(ampc.tensor(x).to("cuda"), **geo)
        ty, tidx = torch.nn.functional.max_pool2d(
            torch.tensor(x, device="cuda"), return_indices=True, **geo)
        np.testing.assert_array_equal(to64(y.cpu()),
                                      ty.double().cpu().numpy())
        np.testing.assert_array_equal(to64(idx.cpu()), tidx.cpu().numpy())


# ----------------------------------------------------------------------------
# softmax and log_softmax


SOFTMAX_SHAPES = [((1,), 0), ((5, 10), -1), ((3, 1000), 1), ((2, 5003), 1),
                  ((4, 7, 9), 1), ((6, 33), 0), ((2, 3, 4, 5), 2)]


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", SOFTMAX_SHAPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dtype, shape, dim, log):
    x = np.random.default_rng(7).normal(size=shape) * 4.0
    fn = F.log_softmax if log else F.softmax
    k = shape[dim]
    assert_close_to_cpu(lambda t: fn(t, dim), x, dtype=dtype, grad=True,
                        k=k)


@requires_cuda
@pytest.mark.parametrize("log", [False, True])
def test_softmax_special_rows(log):
    """Rows with a NaN, an inf, all -inf, and huge logits: the CPU's NaN and
    inf results exactly where it has them."""
    x = np.random.default_rng(8).normal(size=(6, 37))
    x[0, 3] = NAN
    x[1, 5] = INF
    x[2, :] = -INF
    x[3, :] = 1e30
    x[4, 7] = -INF
    fn = C.log_softmax if log else C.softmax
    for dtype in FLOATS:
        xc, xg = pair(x, dtype)
        assert_same(fn(xg, 1), fn(xc, 1), k=37)


@requires_cuda
@pytest.mark.parametrize("log", [False, True])
def test_softmax_dtype_argument_and_layouts(log):
    x = np.random.default_rng(9).normal(size=(9, 14))
    fn = C.log_softmax if log else C.softmax
    for src in FLOATS:
        for layout in ("t", "step"):
            xc, xg = pair(x, src, layout)
            for dst in FLOATS:
                assert_same(fn(xg, -1, getattr(ampc, dst)),
                            fn(xc, -1, getattr(ampc, dst)), k=14)


@requires_cuda
def test_softmax_matches_torch():
    torch = torch_cuda()
    x = np.random.default_rng(10).normal(size=(64, 1000)).astype(np.float32)
    for name in ("softmax", "log_softmax"):
        got = getattr(C, name)(ampc.tensor(x).to("cuda"), 1)
        want = getattr(torch, name)(torch.tensor(x, device="cuda"), 1)
        np.testing.assert_allclose(to64(got.cpu()),
                                   want.double().cpu().numpy(), rtol=1e-5,
                                   atol=1e-6)


# ----------------------------------------------------------------------------
# nll_loss and cross_entropy


def _targets(rng, n, c, ignore=-100, with_ignored=True):
    t = rng.integers(0, c, size=n)
    if with_ignored and n > 2:
        t[1] = ignore
    return t


CLASS_CASES = [
    dict(reduction="mean"),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(reduction="mean", ignore_index=2),
    dict(reduction="mean", label_smoothing=0.1),
    dict(reduction="sum", label_smoothing=0.3),
    dict(reduction="none", label_smoothing=0.2),
]


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CLASS_CASES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n,c", [(1, 1), (7, 10), (129, 3), (33, 1001)])
def test_cross_entropy(dtype, case, weighted, n, c):
    rng = np.random.default_rng(11)
    ignore = case.get("ignore_index", -100)
    t = _targets(rng, n, c, ignore)
    tc, tg = longs(t)
    wc = wg = None
    if weighted:
        wc, wg = pair(rng.uniform(0.2, 2.0, size=c), dtype)
    kw = dict(case)

    def fn(x):
        w = wg if x.device.type == "cuda" else wc
        tt = tg if x.device.type == "cuda" else tc
        return F.cross_entropy(x, tt, weight=w, **kw)

    x = rng.normal(size=(n, c)) * 3.0
    assert_close_to_cpu(fn, x, dtype=dtype, grad=True, k=n * c)
    # the raw op's second output (log_probs) too
    xc, xg = pair(x, dtype)
    lc, pc = C.cross_entropy(xc, tc, wc, **kw)
    lg, pg = C.cross_entropy(xg, tg, wg, **kw)
    assert_same(pg, pc, k=c)
    assert_same(lg, lc, k=n * c)


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CLASS_CASES[:4])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(dtype, case, weighted):
    rng = np.random.default_rng(12)
    n, c = 37, 11
    tc, tg = longs(_targets(rng, n, c, case.get("ignore_index", -100)))
    wc, wg = pair(rng.uniform(0.2, 2.0, size=c), dtype) if weighted \
        else (None, None)
    kw = dict(case)

    def fn(x):
        on = x.device.type == "cuda"
        return F.nll_loss(x, tg if on else tc, weight=wg if on else wc,
                          **kw)

    logp = np.log(rng.dirichlet(np.ones(c), size=n))
    assert_close_to_cpu(fn, logp, dtype=dtype, grad=True, k=n)
    xc, xg = pair(logp, dtype)
    lc, twc = C.nll_loss(xc, tc, wc, **kw)
    lg, twg = C.nll_loss(xg, tg, wg, **kw)
    assert_same(lg, lc, k=n)
    assert_same(twg, twc, k=n)


@requires_cuda
@pytest.mark.parametrize("total", ["none", "tensor", "cpu_tensor", "number"])
def test_class_loss_backward_total_weight(total):
    """The backward's total_weight: recomputed, a device tensor, a CPU
    tensor or a number; grad_output a non-contiguous view for 'none'."""
    rng = np.random.default_rng(13)
    n, c = 19, 7
    tc, tg = longs(_targets(rng, n, c))
    wc, wg = pair(rng.uniform(0.5, 2.0, size=c), "float32")
    xc, xg = pair(rng.normal(size=(n, c)), "float32")
    _, pc = C.cross_entropy(xc, tc, wc)
    _, pg = C.cross_entropy(xg, tg, wg)
    gc, gg = pair(np.array(1.7), "float32")
    twv = 5.25
    tw = {"none": (None, None),
          "tensor": (ampc.tensor(twv), ampc.tensor(twv).to("cuda")),
          "cpu_tensor": (ampc.tensor(twv), ampc.tensor(twv)),
          "number": (twv, twv)}[total]
    for fn, inc, ing in ((C.cross_entropy_backward, pc, pg),
                         (C.nll_loss_backward, pc, pg)):
        want = fn(gc, inc, tc, wc, "mean", total_weight=tw[0])
        got = fn(gg, ing, tg, wg, "mean", total_weight=tw[1])
        assert_same(got, want, k=c)
    gnc, gng = pair(rng.normal(size=n), "float32", "step")
    for fn in (C.cross_entropy_backward, C.nll_loss_backward):
        assert_same(fn(gng, pg, tg, wg, "none"), fn(gnc, pc, tc, wc, "none"),
                    k=c)


@requires_cuda
def test_class_losses_1d_and_empty():
    rng = np.random.default_rng(14)
    xc, xg = pair(rng.normal(size=9), "float32")
    tc, tg = longs(np.array(4))
    for red in ("mean", "sum", "none"):
        assert_same(C.cross_entropy(xg, tg, reduction=red)[0],
                    C.cross_entropy(xc, tc, reduction=red)[0], k=9)
    xc, xg = pair(np.zeros((0, 5)), "float32")
    tc, tg = longs(np.zeros(0))
    for red in ("mean", "sum", "none"):
        assert_same(C.cross_entropy(xg, tg, reduction=red)[0],
                    C.cross_entropy(xc, tc, reduction=red)[0])
        assert_same(C.nll_loss(xg, tg, reduction=red)[1],
                    C.nll_loss(xc, tc, reduction=red)[1])


@requires_cuda
@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_bad_target_is_reported_at_the_next_call(op):
    """No host sync per step: the GPU flags the bad target, the next CUDA
    loss call raises IndexError, and the one after works again."""
    fn = getattr(C, op)
    x = ampc.zeros(4, 5).to("cuda")
    bad = ampc.tensor([0, 1, 7, 2]).to("cuda")
    good = ampc.tensor([0, 1, 4, 2]).to("cuda")
    loss, _ = fn(x, bad)
    ampc.cuda.synchronize()
    assert np.isnan(float(loss))
    with pytest.raises(IndexError, match=r"Target 7 is out of bounds"):
        fn(x, good)
    loss, _ = fn(x, good)
    assert np.isfinite(float(loss))


@requires_cuda
def test_cross_entropy_matches_torch():
    torch = torch_cuda()
    rng = np.random.default_rng(15)
    x = rng.normal(size=(256, 10)).astype(np.float32)
    t = rng.integers(0, 10, size=256)
    t[3] = -100
    w = rng.uniform(0.5, 2.0, size=10).astype(np.float32)
    for kw in (dict(), dict(label_smoothing=0.1), dict(reduction="sum")):
        ax = ampc.tensor(x).to("cuda").requires_grad_(True)
        al = F.cross_entropy(ax, ampc.tensor(t).to("cuda"),
                             weight=ampc.tensor(w).to("cuda"), **kw)
        al.backward()
        tx = torch.tensor(x, device="cuda", requires_grad=True)
        tl = torch.nn.functional.cross_entropy(
            tx, torch.tensor(t, device="cuda"),
            weight=torch.tensor(w, device="cuda"), **kw)
        tl.backward()
        np.testing.assert_allclose(float(al), float(tl), rtol=1e-5)
        np.testing.assert_allclose(to64(ax.grad.cpu()),
                                   tx.grad.double().cpu().numpy(),
                                   rtol=1e-4, atol=1e-7)


# ----------------------------------------------------------------------------
# mse_loss


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(1,), (7, 3), (1023,), (100003,)])
def test_mse_loss(dtype, reduction, shape):
    rng = np.random.default_rng(16)
    x = rng.normal(size=shape)
    t = rng.normal(size=shape)
    n = int(np.prod(shape))
    assert_close_to_cpu(lambda a, b: F.mse_loss(a, b, reduction=reduction),
                        x, t, dtype=dtype, grad=True,
                        k=n if reduction != "none" else 1)


@requires_cuda
def test_mse_loss_empty_and_non_contiguous():
    for red in ("mean", "sum"):
        xc, xg = pair(np.zeros(0), "float32")
        assert_same(C.mse_loss(xg, xg, red), C.mse_loss(xc, xc, red))
    x = np.random.default_rng(17).normal(size=(9, 12))
    assert_close_to_cpu(lambda a, b: F.mse_loss(a, b), x, x[::-1].copy(),
                        layout="t", grad=True, k=108)


# ----------------------------------------------------------------------------
# dropout: the CPU's mask bits for the same seed


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout(dtype, p):
    rng = np.random.default_rng(18)
    x = special(rng.normal(size=(33, 129)), rng)
    xc, xg = pair(x, dtype)
    ampc.manual_seed(123)
    yc, mc = C.dropout(xc, p)
    ampc.manual_seed(123)
    yg, mg = C.dropout(xg, p)
    exact(mg, mc, "mask: ")
    exact(yg, yc, "output: ")
    gc, gg = pair(rng.normal(size=x.shape), dtype, "step")
    exact(C.dropout_backward(gg, mg, p), C.dropout_backward(gc, mc, p))
    ye, me = C.dropout(xg, p, False)
    assert to64(me.cpu()).all()
    exact(ye, xc.contiguous())


# ----------------------------------------------------------------------------
# errors


@requires_cuda
def test_mixed_devices_are_refused():
    xg = ampc.zeros(3, 4).to("cuda")
    msg = "Expected all tensors to be on the same device"
    with pytest.raises(RuntimeError, match=msg):
        C.relu_backward(ampc.zeros(3, 4), xg)
    with pytest.raises(RuntimeError, match=msg):
        C.cross_entropy(xg, ampc.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match=msg):
        C.cross_entropy(xg, ampc.tensor([0, 1, 2]).to("cuda"),
                        ampc.ones(4))
    with pytest.raises(RuntimeError, match=msg):
        C.mse_loss(xg, ampc.zeros(3, 4))
    with pytest.raises(RuntimeError, match=msg):
        C.softmax_backward(ampc.zeros(3, 4), xg, 1)


@requires_cuda
def test_same_messages_as_the_cpu():
    cases = [
        lambda d: C.max_pool2d(ampc.zeros(2, 3).to(d), 2),
        lambda d: C.softmax(ampc.tensor([1, 2]).to(d), 0),
        lambda d: C.cross_entropy(ampc.zeros(2, 3).to(d),
                                  ampc.zeros(2).to(d)),
        lambda d: C.dropout(ampc.zeros(3).to(d), 1.5),
        lambda d: C.mse_loss(ampc.zeros(3).to(d), ampc.zeros(4).to(d)),
    ]
    for case in cases:
        with pytest.raises(Exception) as cpu_err:
            case("cpu")
        with pytest.raises(type(cpu_err.value)) as cuda_err:
            case("cuda")
        assert str(cuda_err.value) == str(cpu_err.value)
