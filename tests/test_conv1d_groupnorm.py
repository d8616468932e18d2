"""conv1d / Conv1d (ampc/nn/_conv1d.py, on the conv2d kernels) and
group_norm / GroupNorm (ampc/nn/_group_norm.py, on the group_norm kernels):
values and gradients (input, weight, bias) against float64 NumPy
references on odd-sized random data, every float dtype, non-contiguous
inputs, finite differences, torch where installed, autocast, modules and
bad arguments; on CUDA against the CPU."""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import assert_close_to_cpu, requires_cuda
from helpers import FLOAT_NAMES, assert_close, from_values, gradcheck, to64


def _rand(rng, *shape):
    return ref.round_to(rng.uniform(-2, 2, size=shape), "bfloat16")


# ----------------------------------------------------------------------------
# float64 references


def conv1d_ref(x, w, b=None, stride=1, sides=(0, 0), dilation=1, groups=1):
    x = np.pad(x, [(0, 0), (0, 0), sides])
    n, c, length = x.shape
    oc, cpg, k = w.shape
    out_len = (length - dilation * (k - 1) - 1) // stride + 1
    ocpg = oc // groups
    y = np.zeros((n, oc, out_len))
    for g in range(groups):
        xs = x[:, g * cpg:(g + 1) * cpg]
        ws = w[g * ocpg:(g + 1) * ocpg]
        for j in range(k):
            cols = xs[:, :, j * dilation:j * dilation + stride * (out_len - 1)
                      + 1:stride]
            y[:, g * ocpg:(g + 1) * ocpg] += np.einsum("ncl,oc->nol", cols,
                                                       ws[:, :, j])
    return y if b is None else y + b[None, :, None]


def group_norm_ref(x, groups, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    r = x.reshape(n, groups, -1)
    y = ((r - r.mean(-1, keepdims=True))
         / np.sqrt(r.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


CONV_CASES = [
    dict(),
    dict(stride=2, padding=3, dilation=2),
    dict(groups=3, padding=1),
    dict(groups=3, padding="same", dilation=2),
    dict(padding="valid", stride=3),
]


def _sides(kw, k):
    p = kw.get("padding", 0)
    if p == "same":
        total = kw.get("dilation", 1) * (k - 1)
        return total // 2, total - total // 2
    return (0, 0) if p == "valid" else (p, p)


def _ref_kwargs(kw, k):
    return dict(stride=kw.get("stride", 1), sides=_sides(kw, k),
                dilation=kw.get("dilation", 1), groups=kw.get("groups", 1))


# ----------------------------------------------------------------------------
# conv1d


@pytest.mark.parametrize("kw", CONV_CASES)
def test_conv1d_values_and_gradients_float32(kw, rng):
    xv, wv, bv = _rand(rng, 2, 6, 13), _rand(rng, 9, 6 // kw.get(
        "groups", 1), 3), _rand(rng, 9)
    x, w, b = (ampc.tensor(v.astype(np.float32), requires_grad=True)
               for v in (xv, wv, bv))
    y = F.conv1d(x, w, b, **kw)
    assert y.grad_fn.name() == "ConvolutionBackward0"
    assert_close(y, conv1d_ref(xv, wv, bv, **_ref_kwargs(kw, 3)), k=18)
    gradcheck(lambda x, w, b: F.conv1d(x, w, b, **kw),
              lambda x, w, b: conv1d_ref(x, w, b, **_ref_kwargs(kw, 3)),
              [(2, 6, 13), tuple(w.shape), (9,)], rng=rng)


def test_conv1d_same_with_an_even_kernel_pads_the_extra_on_the_right(rng):
    xv, wv = _rand(rng, 1, 2, 7), _rand(rng, 3, 2, 4)
    y = F.conv1d(from_values(xv, "float32"), from_values(wv, "float32"),
                 padding="same")
    assert y.shape == (1, 3, 7)
    assert_close(y, conv1d_ref(xv, wv, sides=(1, 2)), k=8)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_conv1d_every_float_dtype_and_unbatched_strided_input(dtype, rng):
    xv, wv, bv = _rand(rng, 5, 23), _rand(rng, 4, 5, 3), _rand(rng, 4)
    base = from_values(np.concatenate([xv, xv], axis=1), dtype)
    x = base[:, ::2].requires_grad_()          # stride 2, non-contiguous
    assert not x.is_contiguous()
    w, b = (from_values(v, dtype).requires_grad_() for v in (wv, bv))
    y = F.conv1d(x, w, b, padding=1)
    assert y.dtype.name == dtype and y.shape == (4, 23)
    want = conv1d_ref(to64(x)[None], wv, bv, sides=(1, 1))[0]
    assert_close(y, want, dtype, k=15)
    y.backward(ampc.ones(*y.shape, dtype=y.dtype))
    assert x.grad.dtype.name == dtype and w.grad.dtype.name == dtype
    assert_close(b.grad, np.full(4, 23.0), dtype)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv1d_matches_torch(rng):
    torch = pytest.importorskip("torch")
    for kw in CONV_CASES + [dict(padding="same", groups=3)]:
        k = 4 if kw.get("padding") == "same" and "dilation" not in kw else 3
        xv = rng.standard_normal((3, 6, 17)).astype(np.float32)
        wv = rng.standard_normal((9, 6 // kw.get("groups", 1), k)) \
            .astype(np.float32)
        bv = rng.standard_normal(9).astype(np.float32)
        a = [ampc.tensor(v, requires_grad=True) for v in (xv, wv, bv)]
        t = [torch.tensor(v, requires_grad=True) for v in (xv, wv, bv)]
        y, ty = F.conv1d(*a, **kw), torch.nn.functional.conv1d(*t, **kw)
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        y.backward(ampc.tensor(g))
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(to64(y), ty.detach().double(), rtol=1e-5,
                                   atol=1e-5)
        for p, tp in zip(a, t):
            np.testing.assert_allclose(to64(p.grad), tp.grad.double(),
                                       rtol=1e-5, atol=1e-4)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate",
                                  "circular"])
def test_conv1d_module_matches_torch(mode, rng):
    torch = pytest.importorskip("torch")
    for kw in (dict(padding=2, stride=2), dict(padding="same", groups=2)):
        m = nn.Conv1d(4, 6, 4, padding_mode=mode, **kw)
        tm = torch.nn.Conv1d(4, 6, 4, padding_mode=mode, **kw)
        assert repr(m) == repr(tm)
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(m.weight.detach().numpy()))
            tm.bias.copy_(torch.tensor(m.bias.detach().numpy()))
        xv = rng.standard_normal((2, 4, 11)).astype(np.float32)
        x, tx = ampc.tensor(xv, requires_grad=True), torch.tensor(
            xv, requires_grad=True)
        y, ty = m(x), tm(tx)
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        np.testing.assert_allclose(to64(y), ty.detach().double(), rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(to64(x.grad), tx.grad.double(),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(to64(m.weight.grad),
                                   tm.weight.grad.double(), rtol=1e-4,
                                   atol=1e-4)
        assert m(x[0]).shape == tm(tx[0]).shape


def test_conv1d_module_parameters_and_repr():
    m = nn.Conv1d(4, 8, 5, groups=2, bias=False)
    assert m.weight.shape == (8, 2, 5) and m.bias is None
    assert np.abs(to64(m.weight)).max() <= 1 / np.sqrt(10)
    assert repr(m) == ("Conv1d(4, 8, kernel_size=(5,), stride=(1,), "
                       "groups=2, bias=False)")
    assert repr(nn.Conv1d(3, 3, 3, padding="same", padding_mode="reflect")) \
        == ("Conv1d(3, 3, kernel_size=(3,), stride=(1,), padding=same, "
            "padding_mode=reflect)")
    assert nn.Conv1d(2, 3, 3, dtype=ampc.bfloat16).weight.dtype is \
        ampc.bfloat16


def test_conv1d_autocast_runs_in_the_lower_precision():
    x, w = ampc.randn(2, 3, 9), ampc.randn(4, 3, 3, requires_grad=True)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        y = F.conv1d(x, w)
        assert y.dtype is ampc.bfloat16
        assert nn.Conv1d(3, 4, 3)(x).dtype is ampc.bfloat16
    y.float().sum().backward()
    assert w.grad.dtype is ampc.float32
    assert ampc._C.autocast_policy("conv1d", "cpu") == "lower"


def test_conv1d_bad_arguments():
    x, w = ampc.randn(2, 4, 9), ampc.randn(6, 4, 3)
    with pytest.raises(RuntimeError, match="2D \\(unbatched\\) or 3D"):
        F.conv1d(ampc.randn(9), w)
    with pytest.raises(RuntimeError, match="weight to be 3-D"):
        F.conv1d(x, ampc.randn(6, 4, 3, 3))
    with pytest.raises(RuntimeError, match="strided"):
        F.conv1d(x, w, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Invalid padding string"):
        F.conv1d(x, w, padding="full")
    with pytest.raises(RuntimeError, match="negative padding"):
        F.conv1d(x, w, padding=-1)
    with pytest.raises(RuntimeError, match="list of 1 values"):
        F.conv1d(x, w, stride=(1, 2))
    with pytest.raises(TypeError, match="weight"):
        F.conv1d(x, [1.0])
    with pytest.raises(RuntimeError, match="groups"):
        F.conv1d(x, w, groups=0)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(4, 6, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="out_channels must be divisible"):
        nn.Conv1d(4, 6, 3, groups=4)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv1d(4, 6, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="positive integer"):
        nn.Conv1d(4, 6, 3, groups=0)


# ----------------------------------------------------------------------------
# group_norm


@pytest.mark.parametrize("shape,groups", [((3, 6, 7), 3), ((2, 4, 5, 3), 2),
                                          ((5, 6), 6), ((2, 5, 9), 1)])
def test_group_norm_values_and_gradients_float32(shape, groups, rng):
    c = shape[1]
    xv, wv, bv = _rand(rng, *shape), _rand(rng, c), _rand(rng, c)
    x, w, b = (ampc.tensor(v.astype(np.float32), requires_grad=True)
               for v in (xv, wv, bv))
    y = F.group_norm(x, groups, w, b)
    assert y.grad_fn.name() == "NativeGroupNormBackward0"
    assert_close(y, group_norm_ref(xv, groups, wv, bv), k=64)
    gradcheck(lambda x, w, b: F.group_norm(x, groups, w, b),
              lambda x, w, b: group_norm_ref(x, groups, w, b),
              [shape, (c,), (c,)], rng=rng, rtol=2e-3, atol=2e-4)


def test_group_norm_without_affine_and_weight_only(rng):
    xv, wv = _rand(rng, 2, 6, 5), _rand(rng, 6)
    gradcheck(lambda x: F.group_norm(x, 2), lambda x: group_norm_ref(x, 2),
              [(2, 6, 5)], rng=rng, rtol=2e-3, atol=2e-4)
    gradcheck(lambda x, w: F.group_norm(x, 3, w, eps=1e-3),
              lambda x, w: group_norm_ref(x, 3, w, eps=1e-3),
              [(2, 6, 5), (6,)], rng=rng, rtol=2e-3, atol=2e-4)
    x = ampc.tensor(xv.astype(np.float32))
    assert_close(F.group_norm(x, 2, ampc.tensor(wv.astype(np.float32))),
                 group_norm_ref(xv, 2, wv), k=32)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("params", ["same", "float32"])
def test_group_norm_every_float_dtype(dtype, params, rng):
    """float16/bfloat16 input with its own dtype's or float32 parameters
    (as PyTorch allows); the statistics are float32 either way."""
    if params == "float32" and dtype == "float32":
        pytest.skip("the same case")
    shape = (3, 6, 5, 4)
    xv = _rand(rng, *shape) * 50 + 300       # a large mean, a small spread
    wv, bv = _rand(rng, 6), _rand(rng, 6)
    pdt = dtype if params == "same" else "float32"
    base = from_values(np.swapaxes(xv, 2, 3).copy(), dtype)
    x = base.transpose(2, 3).requires_grad_()    # non-contiguous
    w, b = (from_values(v, pdt).requires_grad_() for v in (wv, bv))
    y = F.group_norm(x, 3, w, b)
    assert y.dtype.name == dtype
    want = group_norm_ref(to64(x), 3, wv, bv)
    assert_close(y, want, dtype, k=4, atol=0.04 if dtype != "float32"
                 else None)
    gv = _rand(rng, *shape)
    y.backward(from_values(gv, dtype))
    assert x.grad.dtype.name == dtype and w.grad.dtype.name == pdt
    xhat = group_norm_ref(to64(x), 3)
    tol = dict(rtol=0.05, atol=0.05 * np.sqrt(60)) if dtype != "float32" \
        else dict(k=60)
    assert_close(b.grad, gv.sum((0, 2, 3)), pdt, **tol)
    assert_close(w.grad, (gv * xhat).sum((0, 2, 3)), pdt, **tol)


def test_group_norm_matches_torch(rng):
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    for shape, groups, dtype in [((4, 6, 9), 3, "float32"),
                                 ((2, 8, 5, 7), 4, "float32"),
                                 ((2, 8, 5, 7), 2, "bfloat16"),
                                 ((3, 4, 11), 2, "float16")]:
        xv = rng.standard_normal(shape).astype(np.float32)
        wv = rng.standard_normal(shape[1]).astype(np.float32)
        bv = rng.standard_normal(shape[1]).astype(np.float32)
        tdt = getattr(torch, dtype)
        x = from_values(xv, dtype).requires_grad_()
        tx = torch.tensor(xv).to(tdt).requires_grad_()
        w, b = (ampc.tensor(v, requires_grad=True) for v in (wv, bv))
        tw, tb = (torch.tensor(v, requires_grad=True) for v in (wv, bv))
        y, ty = F.group_norm(x, groups, w, b), TF.group_norm(tx, groups, tw,
                                                              tb)
        assert y.dtype.name == str(ty.dtype).split(".")[1]
        g = rng.standard_normal(shape).astype(np.float32)
        y.backward(from_values(g, dtype))
        ty.backward(torch.tensor(g).to(tdt))
        tol = 1e-5 if dtype == "float32" else 3e-2
        np.testing.assert_allclose(to64(y), ty.detach().double(), rtol=tol,
                                   atol=tol)
        np.testing.assert_allclose(to64(x.grad), tx.grad.double(),
                                   rtol=tol, atol=tol * 4)
        np.testing.assert_allclose(to64(w.grad), tw.grad.double(),
                                   rtol=tol, atol=tol * 8)
        np.testing.assert_allclose(to64(b.grad), tb.grad.double(),
                                   rtol=tol, atol=tol * 8)


def test_group_norm_empty_and_constant_groups():
    assert F.group_norm(ampc.zeros(0, 4, 3), 2).shape == (0, 4, 3)
    assert F.group_norm(ampc.zeros(2, 4, 0), 2).shape == (2, 4, 0)
    # a constant group normalises to 0, not NaN
    y = F.group_norm(ampc.full((2, 4, 3), 5.0), 2)
    assert np.all(to64(y) == 0.0)


def test_group_norm_module():
    m = nn.GroupNorm(3, 6)
    assert repr(m) == "GroupNorm(3, 6, eps=1e-05, affine=True, bias=True)"
    assert np.all(to64(m.weight) == 1) and np.all(to64(m.bias) == 0)
    x = ampc.randn(2, 6, 4)
    assert ampc.equal(m(x), F.group_norm(x, 3, m.weight, m.bias))
    off = nn.GroupNorm(2, 6, eps=1e-3, affine=False)
    assert off.weight is None and off.bias is None
    assert repr(off) == "GroupNorm(2, 6, eps=0.001, affine=False, bias=False)"
    assert nn.GroupNorm(2, 4, bias=False).bias is None
    assert nn.GroupNorm(2, 4, dtype=ampc.float16).weight.dtype is \
        ampc.float16
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="num_groups"):
        nn.GroupNorm(0, 6)


def test_group_norm_autocast():
    """PyTorch's CUDA autocast runs group_norm in float32; its CPU autocast
    does not list it (the input's dtype)."""
    assert ampc._C.autocast_policy("group_norm", "cuda") == "fp32"
    assert ampc._C.autocast_policy("group_norm", "cpu") is None
    x = ampc.randn(2, 4, 3).bfloat16()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert F.group_norm(x, 2).dtype is ampc.bfloat16
        assert F.group_norm(x.float(), 2).dtype is ampc.float32


def test_group_norm_bad_arguments():
    x = ampc.randn(2, 4, 3)
    with pytest.raises(RuntimeError, match="divisible by num_groups, but "
                       "got input of shape \\[2, 4, 3\\] and num_groups=3"):
        F.group_norm(x, 3)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.group_norm(ampc.randn(5), 1)
    with pytest.raises(RuntimeError, match="weight to be a vector of size "
                       "equal to the number of channels"):
        F.group_norm(x, 2, ampc.ones(3))
    with pytest.raises(RuntimeError, match="bias to be a vector"):
        F.group_norm(x, 2, None, ampc.ones(2, 2))
    with pytest.raises(RuntimeError, match="float32"):
        F.group_norm(x, 2, ampc.ones(4).half())
    with pytest.raises(TypeError, match="num_groups.*must be int"):
        F.group_norm(x, 2.0)
    with pytest.raises(RuntimeError, match="positive"):
        F.group_norm(x, 0)
    with pytest.raises(TypeError, match="eps"):
        F.group_norm(x, 2, eps="small")


# ----------------------------------------------------------------------------
# CUDA against the CPU


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cuda_conv1d_and_group_norm_match_the_cpu(dtype):
    rng = np.random.default_rng(5)
    x, w, b = (rng.uniform(-1, 1, size=s) for s in ((3, 6, 37), (8, 3, 5),
                                                    (8,)))
    assert_close_to_cpu(lambda x, w, b: F.conv1d(x, w, b, padding=2,
                                                 groups=2),
                        x, w, b, dtype=dtype, grad=True, k=15, grad_k=120)
    gw, gb = rng.uniform(0.5, 1.5, size=6), rng.uniform(-1, 1, size=6)
    assert_close_to_cpu(lambda x, w, b: F.group_norm(x, 3, w, b),
                        x, gw, gb, dtype=dtype, grad=True, k=80)


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_runs_group_norm_in_float32():
    x = ampc.randn(2, 4, 8, device="cuda").half()
    with ampc.autocast("cuda", dtype=ampc.float16):
        assert F.group_norm(x, 2).dtype is ampc.float32
        assert F.conv1d(x.float(), ampc.randn(3, 4, 3, device="cuda")) \
            .dtype is ampc.float16


def test_second_derivatives_match_torch(rng):
    """create_graph=True through conv1d and group_norm: a gradient penalty's
    gradients against torch's."""
    torch = pytest.importorskip("torch")
    xv = rng.standard_normal((2, 4, 9)).astype(np.float32)
    wv = rng.standard_normal((6, 2, 3)).astype(np.float32)
    gv = rng.standard_normal(6).astype(np.float32)
    bv = rng.standard_normal(6).astype(np.float32)

    def run(lib, fn):
        x, w, g, b = (lib.tensor(v, requires_grad=True)
                      for v in (xv, wv, gv, bv))
        y = fn.group_norm(fn.conv1d(x, w, padding=1, groups=2), 3, g, b)
        loss = (y * y * y).sum()
        grads = lib.autograd.grad(loss, (x, w, g, b), create_graph=True)
        sum(gr.pow(2).sum() for gr in grads).backward()
        return [t.grad for t in (x, w, g, b)]

    for a, t in zip(run(ampc, F), run(torch, torch.nn.functional)):
        np.testing.assert_allclose(to64(a), t.double(), rtol=2e-4,
                                   atol=2e-4)
