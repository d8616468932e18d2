"""The ReLU folded into max_pool2d's indices (``relu_masked``) and the
``Conv2d``, ``ReLU``, ``MaxPool2d`` fusion of ``Sequential`` built on it.

The C ops, on every CPU level and dtype: with ``relu_masked=True`` the
forward gives the same output and marks as -1 - idx exactly the windows
whose max is <= 0, and the backward equals ``relu_backward`` of the plain
backward, bit for bit (zeros, negative zeros, NaN, -inf, overlapping and
padded windows).  The module fusion: outputs and every gradient equal the
layers run one at a time, in float32 and under autocast; the
convolution's output is not kept for backward (lower peak memory); the
configurations it cannot fold (ceil_mode, dilation, return_indices) run
unfused.  On a GPU, the masked indices and gradients equal the CPU's.
"""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
from cuda_helpers import requires_cuda as _requires_cuda
from helpers import FLOAT_NAMES, from_values, rand_values, to64

C = ampc._C
NAN, INF = float("nan"), float("inf")

# (input shape, kernel, stride, padding): the lab's 2x2, padded and
# overlapping windows, odd sizes
GEOMETRIES = [
    ((2, 5, 8, 10), (2, 2), (2, 2), (0, 0)),
    ((3, 4, 9, 11), (3, 3), (2, 2), (1, 1)),
    ((1, 3, 7, 5), (3, 2), (1, 1), (1, 0)),
    ((2, 17, 33), (2, 2), (1, 2), (0, 1)),
]


def requires_cuda(fn):
    return pytest.mark.cuda(_requires_cuda(fn))


def relu_input(shape, dtype, rng):
    """A ReLU's output: zeros (a third, some negative zeros), positives,
    and a NaN and an inf."""
    x = np.maximum(rand_values(shape, dtype, rng), 0.0)
    flat = x.reshape(-1)
    flat[rng.random(flat.size) < 0.1] = -0.0
    flat[::37] = NAN
    flat[5::41] = INF
    x.reshape((-1,) + x.shape[-2:])[0, :3, :3] = 0.0   # masked windows
    return x


def bits(t):
    a = to64(t.cpu())
    return np.where(np.isnan(a), np.nan, a), np.signbit(a)


def exact(a, b, what):
    (x, sx), (y, sy) = bits(a), bits(b)
    assert np.array_equal(x, y, equal_nan=True) and np.array_equal(sx, sy), \
        f"{what} differs"


# ----------------------------------------------------------------------------
# the C ops


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("geo", GEOMETRIES)
def test_masked_pool_equals_relu_backward_of_plain_pool(cpu_level, dtype,
                                                        geo):
    rng = np.random.default_rng(0)
    shape, k, s, p = geo
    r = from_values(relu_input(shape, dtype, rng), dtype)
    y, idx = C.max_pool2d(r, k, s, p)
    ym, idxm = C.max_pool2d(r, k, s, p, relu_masked=True)
    exact(ym, y, "output")
    i, im = to64(idx), to64(idxm)
    masked = to64(y) <= 0
    assert masked.any() and (~masked).any()
    assert np.array_equal(im, np.where(masked, -1 - i, i))
    g = from_values(rand_values(tuple(y.shape), dtype, rng), dtype)
    want = C.relu_backward(C.max_pool2d_backward(g, idx, shape, k, s, p), r)
    for geometry in ((k, s, p), ()):        # with and without the geometry
        got = C.max_pool2d_backward(g, idxm, shape, *geometry,
                                    relu_masked=True)
        exact(got, want, "gradient")


def test_masked_indices_need_the_flag_and_stay_checked():
    r = from_values(np.array([[[[0.0, -1.0], [0.0, 0.0]]]]), "float32")
    g = from_values(np.ones((1, 1, 1, 1)), "float32")
    _, idxm = C.max_pool2d(r, (2, 2), relu_masked=True)
    assert int(idxm.reshape(-1)[0]) == -1
    with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\)"):
        C.max_pool2d_backward(g, idxm, (1, 1, 2, 2))
    out_of_range = from_values(np.full((1, 1, 1, 1), -5.0), "int64")
    with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\)"):
        C.max_pool2d_backward(g, out_of_range, (1, 1, 2, 2),
                              relu_masked=True)
    got = C.max_pool2d_backward(g, idxm, (1, 1, 2, 2), relu_masked=True)
    assert np.array_equal(to64(got), np.zeros((1, 1, 2, 2)))


# ----------------------------------------------------------------------------
# Sequential's Conv2d + ReLU + MaxPool2d


def _net(pool=None):
    ampc.manual_seed(3)
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                         pool or nn.MaxPool2d(2, 2),
                         nn.Conv2d(6, 5, 3, stride=2), nn.ReLU(),
                         nn.MaxPool2d(3, stride=1, padding=1), nn.Flatten(),
                         nn.Linear(5 * 2 * 3, 4))


def _run(net, x, fused, dtype=None):
    layers = list(net)
    with ampc.autocast("cpu", dtype=dtype or ampc.bfloat16,
                       enabled=dtype is not None):
        if fused:
            out = net(x)
        else:
            out = x
            for layer in layers:
                out = layer(out)
        loss = out.float().pow(2).sum()
    loss.backward()
    return out, [p.grad for p in net.parameters()] + [x.grad]


@pytest.mark.parametrize("dtype", [None, ampc.float16, ampc.bfloat16])
def test_sequential_fusion_equals_the_layers(dtype):
    rng = np.random.default_rng(4)
    xv = rng.normal(size=(4, 3, 13, 14))
    outs = []
    for fused in (True, False):
        x = from_values(xv, "float32").requires_grad_()
        outs.append(_run(_net(), x, fused, dtype))
    (a, ga), (b, gb) = outs
    exact(a.detach(), b.detach(), "output")
    for u, v in zip(ga, gb):
        exact(u, v, "gradient")
    head = _net()[:3](ampc.randn(1, 3, 8, 8, requires_grad=True))
    assert head.grad_fn.name() == "MaxPool2DWithIndicesBackward0"
    # the fused node (the unfused pool's node has the same name)
    assert type(head.grad_fn)._function.__name__ == "_Conv2dReluMaxPool"


def test_sequential_fusion_frees_the_convolution_output():
    """the fused step's peak memory is lower by at least the first
    convolution's float32 output"""
    x = ampc.randn(64, 3, 13, 14)
    peaks = []
    for fused in (True, False):
        net = _net()
        _run(net, x, fused)                 # warm the allocator
        base = ampc.memory_allocated()
        ampc.reset_peak_memory_stats()
        _run(net, x, fused)
        peaks.append(ampc.max_memory_allocated() - base)
    conv_out = 64 * 6 * 13 * 14 * 4
    assert peaks[0] + conv_out <= peaks[1], peaks


def test_sequential_fusion_takes_an_empty_stride_as_the_kernel():
    x = ampc.randn(2, 3, 10, 10)
    for stride in ((), [], None):
        net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(),
                            nn.MaxPool2d(2, stride=stride))
        exact(net(x), F_layers(net, x), "output")


def F_layers(net, x):
    for layer in net:
        x = layer(x)
    return x


@pytest.mark.parametrize("pool", [
    nn.MaxPool2d(2, ceil_mode=True), nn.MaxPool2d(2, dilation=2),
    nn.MaxPool2d(2, return_indices=True)])
def test_sequential_unfoldable_pools_run_unfused(pool):
    x = ampc.randn(2, 3, 11, 11)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), pool)
    out = net(x)
    want = pool(ampc.relu(net[0](x)))
    if pool.return_indices:
        assert out[0].grad_fn.name() == "MaxPool2DWithIndicesBackward0"
        out, want = out[0], want[0]
    exact(out.detach(), want.detach(), "output")


@pytest.mark.parametrize("grad", [False, True])
def test_sequential_fusion_unbatched(grad):
    head = _net()[:6]
    x = ampc.randn(3, 13, 14, requires_grad=grad)
    a = head(x)
    b = x
    for layer in head:
        b = layer(b)
    assert tuple(a.shape) == (5, 2, 3)
    exact(a.detach(), b.detach(), "output")


def test_inplace_op_after_the_fused_pool_is_allowed():
    """the fused node keeps no tensor the user can modify: an in-place op
    on its output does not break backward (as with the layers unfused)"""
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(2),
                        nn.ReLU(inplace=True))
    x = ampc.randn(2, 3, 9, 9).requires_grad_()
    net(x).sum().backward()
    assert x.grad is not None


# ----------------------------------------------------------------------------
# on a GPU


@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("geo", GEOMETRIES)
def test_cuda_masked_pool_equals_cpu(dtype, geo):
    rng = np.random.default_rng(5)
    shape, k, s, p = geo
    rc = from_values(relu_input(shape, dtype, rng), dtype)
    yc, ic = C.max_pool2d(rc, k, s, p, relu_masked=True)
    yg, ig = C.max_pool2d(rc.to("cuda"), k, s, p, relu_masked=True)
    exact(yg, yc, "output")
    assert np.array_equal(to64(ig.cpu()), to64(ic))
    gc = from_values(rand_values(tuple(yc.shape), dtype, rng), dtype)
    want = C.max_pool2d_backward(gc, ic, shape, k, s, p, relu_masked=True)
    for geometry in ((k, s, p), ()):        # gather and scan
        got = C.max_pool2d_backward(gc.to("cuda"), ig, shape, *geometry,
                                    relu_masked=True)
        exact(got, want, "gradient")


@requires_cuda
@pytest.mark.parametrize("dtype", [None, ampc.float16, ampc.bfloat16])
def test_cuda_sequential_fusion_equals_the_layers(dtype):
    """on the GPU, fused and layer by layer give the same bits (the same
    cuDNN algorithms, deterministic ones, run on the same inputs)"""
    rng = np.random.default_rng(6)
    xv = rng.normal(size=(4, 3, 13, 14))
    outs = []
    with ampc.backends.cudnn.flags(deterministic=True):
        for fused in (True, False):
            net = _net().to("cuda")
            x = from_values(xv, "float32").to("cuda").requires_grad_()
            with ampc.autocast("cuda", dtype=dtype or ampc.float16,
                               enabled=dtype is not None):
                out = net(x) if fused else F_layers(net, x)
            out.float().pow(2).sum().backward()
            outs.append((out, [p.grad for p in net.parameters()] + [x.grad]))
    (a, ga), (b, gb) = outs
    exact(a.detach(), b.detach(), "output")
    for u, v in zip(ga, gb):
        exact(u, v, "gradient")
