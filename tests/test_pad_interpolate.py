"""F.pad (ampc/nn/_pad.py) in its four modes and F.interpolate
(ampc/nn/_interpolate.py) with nn.Upsample and friends: values against
NumPy (np.pad, float64 blends) and torch where installed (the same source
indices, negative pads, grad_fn names), gradients by finite differences
and against torch, every float dtype, non-contiguous inputs, second
derivatives, autocast and bad arguments; on CUDA against the CPU."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import assert_close_to_cpu, requires_cuda
from helpers import FLOAT_NAMES, assert_close, from_values, gradcheck, to64

NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
           "circular": "wrap"}
MODES = tuple(NP_MODE)


def pad_ref(x, pad, mode, value=0.0):
    """np.pad for non-negative amounts (constant: negatives crop)."""
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        crop = tuple(slice(max(0, -lo), x.shape[d] - max(0, -hi))
                     for d, (lo, hi) in enumerate(widths))
        x = x[crop]
        widths = [(max(0, lo), max(0, hi)) for lo, hi in widths]
        return np.pad(x, widths, constant_values=value)
    return np.pad(x, widths, mode=NP_MODE[mode])


def _values(rng, *shape):
    return rng.uniform(-2, 2, size=shape).astype(np.float32) \
        .astype(np.float64)


# ----------------------------------------------------------------------------
# pad


PAD_CASES = [((2, 3, 7), (2, 3)), ((3, 7), (1, 0)),
             ((2, 3, 5, 6), (1, 2, 3, 0)), ((3, 5, 6), (0, 2, 2, 1)),
             ((1, 2, 3, 4, 5), (1, 1, 2, 0, 0, 2))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad", PAD_CASES)
def test_pad_values_and_gradients(mode, shape, pad, rng):
    xv = _values(rng, *shape)
    y = F.pad(ampc.tensor(xv.astype(np.float32)), pad, mode=mode)
    np.testing.assert_array_equal(to64(y), pad_ref(xv, pad, mode))
    gradcheck(lambda x: F.pad(x, pad, mode=mode),
              lambda x: pad_ref(x, pad, mode), [shape], rng=rng)


def test_constant_pad_any_dims_negative_crops_and_value(rng):
    xv = _values(rng, 2, 3, 4, 5)
    for pad in [(1, -2), (-1, 1, 0, 2, 1, 1, 2, 0), (0, 0, -1, -2),
                (-2, -3)]:
        y = F.pad(ampc.tensor(xv.astype(np.float32)), pad, value=-1.5)
        np.testing.assert_array_equal(to64(y), pad_ref(xv, pad, "constant",
                                                       -1.5))
    gradcheck(lambda x: F.pad(x, (-1, 2, 1, -1), value=3.0),
              lambda x: pad_ref(x, (-1, 2, 1, -1), "constant", 3.0),
              [(2, 3, 4)], rng=rng)
    ints = ampc.tensor([[1, 2]])
    assert F.pad(ints, (1, 1), value=7).tolist() == [[7, 1, 2, 7]]
    flags = ampc.tensor([True, False])
    assert F.pad(flags, (0, 1)).tolist() == [True, False, False]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("mode", MODES)
def test_pad_every_float_dtype_and_non_contiguous_input(dtype, mode, rng):
    xv = _values(rng, 2, 4, 6)
    base = from_values(np.swapaxes(xv, 1, 2).copy(), dtype)
    x = base.transpose(1, 2).requires_grad_()
    assert not x.is_contiguous()
    y = F.pad(x, (2, 1, 1, 3), mode=mode)
    assert y.dtype.name == dtype
    np.testing.assert_array_equal(to64(y), pad_ref(to64(x), (2, 1, 1, 3),
                                                   mode))
    y.backward(ampc.ones(*y.shape, dtype=y.dtype))
    assert x.grad.dtype.name == dtype
    ones = np.ones_like(xv)
    counts = gradcheck_counts(ones, (2, 1, 1, 3), mode)
    np.testing.assert_array_equal(to64(x.grad), counts)


def gradcheck_counts(x, pad, mode):
    """How many outputs read each input element (the gradient of sum)."""
    idx = np.arange(x.size, dtype=np.float64).reshape(x.shape)
    out = pad_ref(idx, pad, mode, value=-1.0)
    return np.bincount(out[out >= 0].astype(np.int64).ravel(),
                       minlength=x.size).reshape(x.shape).astype(float)


def test_pad_matches_torch_with_negative_amounts(rng):
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    cases = [((2, 3, 7), (-2, 3)), ((2, 3, 7), (3, -2)), ((2, 3, 7), (-6, 1)),
             ((2, 4, 5, 6), (-1, 2, 3, -2)),
             ((2, 2, 4, 5, 6), (1, -2, 0, 2, -1, 1)),
             ((3, 7), (6, 6))]
    for mode in MODES:
        for shape, pad in cases:
            if mode == "reflect" and max(pad) >= min(shape[-3:]):
                continue
            if mode == "circular" and max(pad) > min(shape[-3:]) - 2:
                continue        # (torch's overlapping copies)
            if mode == "constant" and pad == (-6, 1):
                continue
            xv = rng.standard_normal(shape).astype(np.float32)
            x = ampc.tensor(xv, requires_grad=True)
            tx = torch.tensor(xv, requires_grad=True)
            y, ty = F.pad(x, pad, mode=mode), TF.pad(tx, pad, mode=mode)
            if mode != "circular":      # (torch's: CopySlices)
                assert y.grad_fn.name() == ty.grad_fn.name()
            g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
            y.backward(ampc.tensor(g))
            ty.backward(torch.tensor(g))
            np.testing.assert_array_equal(to64(y), ty.detach().double(),
                                          err_msg=f"{mode} {pad}")
            np.testing.assert_allclose(to64(x.grad), tx.grad.double(),
                                       rtol=1e-6, atol=1e-6)


def test_pad_second_derivative():
    x = ampc.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    for mode in MODES:
        y = F.pad(x, (2, 1), mode=mode)
        g, = ampc.autograd.grad((y * y).sum(), x, create_graph=True)
        h, = ampc.autograd.grad(g.sum(), x)
        counts = gradcheck_counts(np.ones((1, 3)), (2, 1), mode)
        np.testing.assert_array_equal(to64(h), 2 * counts)


def test_pad_autocast():
    """CPU autocast runs reflect and replicate in float32, as PyTorch's
    reflection_pad/replication_pad; the other modes keep the dtype."""
    x = ampc.randn(2, 3, 5).bfloat16()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert F.pad(x, (1, 1), mode="reflect").dtype is ampc.float32
        assert F.pad(x, (1, 1), mode="replicate").dtype is ampc.float32
        assert F.pad(x, (1, 1), mode="circular").dtype is ampc.bfloat16
        assert F.pad(x, (1, 1)).dtype is ampc.bfloat16
    assert ampc._C.autocast_policy("reflection_pad", "cuda") is None


def test_pad_bad_arguments():
    x = ampc.randn(2, 3, 5)
    with pytest.raises(RuntimeError, match="divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(RuntimeError, match="padding length 8 and input of "
                       "dimension 3"):
        F.pad(x, (1,) * 8)
    with pytest.raises(NotImplementedError, match="Padding size 6 is not "
                       "supported for 3D input tensor"):
        F.pad(x, (1,) * 6, mode="reflect")
    with pytest.raises(NotImplementedError, match="1D input"):
        F.pad(ampc.randn(5), (1, 1), mode="replicate")
    with pytest.raises(RuntimeError, match="Argument #4: Padding size "
                       "should be less than the corresponding input "
                       "dimension, but got: padding \\(5, 2\\) at dimension "
                       "2 of input \\[2, 3, 5\\]"):
        F.pad(x, (5, 2), mode="reflect")
    with pytest.raises(RuntimeError, match="Argument #6"):
        F.pad(ampc.randn(2, 3, 4, 5), (1, 1, 4, 1), mode="reflect")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        F.pad(x, (6, 2), mode="circular")
    with pytest.raises(RuntimeError, match="negative size"):
        F.pad(x, (-3, -3))
    with pytest.raises(RuntimeError, match="non-zero dimensions"):
        F.pad(ampc.zeros(2, 0, 4), (1, 1), mode="reflect")
    with pytest.raises(NotImplementedError, match="Unrecognised padding "
                       "mode foo"):
        F.pad(x, (1, 1), mode="foo")
    with pytest.raises(RuntimeError, match="doesn't take in value"):
        F.pad(x, (1, 1), mode="reflect", value=1.0)
    with pytest.raises(TypeError, match="found element of type float at "
                       "pos 0"):
        F.pad(x, (1.5, 1))
    with pytest.raises(TypeError, match="must be tuple of ints, not int"):
        F.pad(x, 1)
    assert F.pad(x, [1, 1], mode="reflect", value=0).shape == (2, 3, 7)


# ----------------------------------------------------------------------------
# interpolate: float64 references


def nearest_ref(x, sizes, exact=False):
    """Source index floor(dst * in / out) (or floor((dst + 0.5) * in /
    out)) in float64 per axis, with the size given."""
    for k, n_out in enumerate(sizes):
        dim = 2 + k
        n_in = x.shape[dim]
        j = np.arange(n_out) + (0.5 if exact else 0.0)
        idx = np.minimum(np.floor(j * n_in / n_out).astype(int), n_in - 1)
        x = np.take(x, idx, axis=dim)
    return x


def linear_ref(x, sizes, align_corners):
    for k in reversed(range(len(sizes))):
        dim, n_out = 2 + k, sizes[k]
        n_in = x.shape[dim]
        j = np.arange(n_out, dtype=np.float64)
        if align_corners:
            src = j * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        else:
            src = np.maximum((j + 0.5) * n_in / n_out - 0.5, 0.0)
        i0 = np.minimum(np.floor(src).astype(int), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        lam = (src - i0).reshape((-1,) + (1,) * (x.ndim - 1 - dim))
        x = np.take(x, i0, axis=dim) * (1 - lam) + np.take(x, i1, axis=dim) \
            * lam
    return x


INTERP_SIZES = [((2, 3, 7), (11,)), ((2, 3, 7), (4,)), ((2, 2, 5, 6), (9, 13)),
                ((1, 3, 6, 5), (3, 8)), ((1, 2, 1, 4), (3, 1))]


@pytest.mark.parametrize("shape,sizes", INTERP_SIZES)
def test_interpolate_values_and_gradients(shape, sizes, rng):
    xv = _values(rng, *shape)
    x = ampc.tensor(xv.astype(np.float32))
    linear = "linear" if len(sizes) == 1 else "bilinear"
    for mode, ref in [("nearest", lambda v: nearest_ref(v, sizes)),
                      ("nearest-exact",
                       lambda v: nearest_ref(v, sizes, exact=True)),
                      (linear, lambda v: linear_ref(v, sizes, False))]:
        kw = {} if mode.startswith("nearest") else {"align_corners": False}
        assert_close(F.interpolate(x, size=sizes, mode=mode, **kw), ref(xv),
                     k=4, msg=mode)
        gradcheck(lambda t: F.interpolate(t, size=sizes, mode=mode, **kw),
                  ref, [shape], rng=rng)
    ref_ac = lambda v: linear_ref(v, sizes, True)   # noqa: E731
    got = F.interpolate(x, size=sizes, mode=linear, align_corners=True)
    assert_close(got, ref_ac(xv), k=4)
    gradcheck(lambda t: F.interpolate(t, size=sizes, mode=linear,
                                      align_corners=True), ref_ac, [shape],
              rng=rng)


def test_interpolate_scale_factor_sampling():
    """With scale_factor the sampling uses 1/scale_factor (PyTorch's
    compute_scales_value); recompute_scale_factor uses in/out instead."""
    x = ampc.arange(10.0).view(1, 1, 10)
    y = F.interpolate(x, scale_factor=0.35)     # 3 outputs, step 1/0.35
    assert y.view(-1).tolist() == [0.0, 2.0, 5.0]
    y = F.interpolate(x, scale_factor=0.35, recompute_scale_factor=True)
    assert y.view(-1).tolist() == [0.0, 3.0, 6.0]
    y = F.interpolate(x[..., :4], scale_factor=(1.5,), mode="linear")
    assert y.shape == (1, 1, 6)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_interpolate_every_float_dtype_and_non_contiguous_input(dtype, rng):
    xv = _values(rng, 2, 3, 5, 7)
    base = from_values(np.swapaxes(xv, 2, 3).copy(), dtype)
    x = base.transpose(2, 3).requires_grad_()
    assert not x.is_contiguous()
    x64 = to64(x)
    y = F.interpolate(x, size=(8, 10), mode="bilinear")
    assert y.dtype.name == dtype
    assert_close(y, linear_ref(x64, (8, 10), False), dtype, k=4)
    y.backward(ampc.ones(*y.shape, dtype=y.dtype))
    assert x.grad.dtype.name == dtype
    assert math.isclose(to64(x.grad).sum(), 2 * 3 * 80, rel_tol=1e-2)
    n = F.interpolate(x, scale_factor=2, mode="nearest")
    np.testing.assert_array_equal(to64(n), x64.repeat(2, 2).repeat(2, 3))


def test_interpolate_matches_torch(rng):
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    calls = [dict(size=11), dict(size=3), dict(scale_factor=2),
             dict(scale_factor=1.7), dict(scale_factor=0.45),
             dict(scale_factor=2.3, recompute_scale_factor=True),
             dict(scale_factor=3), dict(scale_factor=1.37)]
    for shape in [(2, 3, 7), (2, 3, 5, 9), (1, 2, 13, 4)]:
        xv = rng.standard_normal(shape).astype(np.float32)
        two_d = len(shape) == 4
        for mode in ["nearest", "nearest-exact",
                     "bilinear" if two_d else "linear"]:
            for kw in calls:
                for ac in ([None] if mode.startswith("nearest")
                           else [False, True]):
                    x = ampc.tensor(xv, requires_grad=True)
                    tx = torch.tensor(xv, requires_grad=True)
                    y = F.interpolate(x, mode=mode, align_corners=ac, **kw)
                    ty = TF.interpolate(tx, mode=mode, align_corners=ac,
                                        **kw)
                    assert y.grad_fn.name() == ty.grad_fn.name()
                    g = rng.standard_normal(tuple(ty.shape)) \
                        .astype(np.float32)
                    y.backward(ampc.tensor(g))
                    ty.backward(torch.tensor(g))
                    msg = f"{shape} {mode} {kw} {ac}"
                    np.testing.assert_allclose(to64(y), ty.detach().double(),
                                               rtol=1e-5, atol=3e-6,
                                               err_msg=msg)
                    np.testing.assert_allclose(to64(x.grad),
                                               tx.grad.double(), rtol=1e-5,
                                               atol=1e-5, err_msg=msg)


def test_area_is_adaptive_average_pooling():
    x = ampc.randn(2, 3, 7, 9)
    assert ampc.equal(F.interpolate(x, size=(3, 4), mode="area"),
                      F.adaptive_avg_pool2d(x, (3, 4)))
    assert F.interpolate(x, scale_factor=0.5, mode="area").shape == \
        (2, 3, 3, 4)


def test_interpolate_second_derivative():
    x = ampc.randn(1, 2, 3, 4, requires_grad=True)
    y = F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True)
    g, = ampc.autograd.grad((y * y).sum(), x, create_graph=True)
    h, = ampc.autograd.grad(g.sum(), x)
    assert h.shape == x.shape and np.all(np.isfinite(to64(h)))


def test_upsample_modules():
    torch = pytest.importorskip("torch")
    for args, kw in [((), dict(scale_factor=2)),
                     ((), dict(size=(3, 4), mode="bilinear",
                               align_corners=True)),
                     ((), dict(scale_factor=(2, 1.5), mode="nearest-exact"))]:
        assert repr(nn.Upsample(*args, **kw)) == \
            repr(torch.nn.Upsample(*args, **kw))
    assert repr(nn.UpsamplingNearest2d(scale_factor=2)) == \
        "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"
    assert repr(nn.UpsamplingBilinear2d(size=5)) == \
        "UpsamplingBilinear2d(size=5, mode='bilinear')"
    x = ampc.randn(2, 3, 4, 5)
    assert ampc.equal(nn.Upsample(scale_factor=2)(x),
                      F.interpolate(x, scale_factor=2.0))
    assert ampc.equal(nn.UpsamplingBilinear2d(size=(6, 7))(x),
                      F.interpolate(x, size=(6, 7), mode="bilinear",
                                    align_corners=True))
    assert ampc.equal(nn.UpsamplingNearest2d(size=9)(x),
                      F.interpolate(x, size=9))


def test_interpolate_autocast():
    """PyTorch's CUDA autocast runs upsampling in float32; its CPU autocast
    keeps the input's dtype."""
    assert ampc._C.autocast_policy("upsample", "cuda") == "fp32"
    assert ampc._C.autocast_policy("upsample", "cpu") is None
    x = ampc.randn(1, 2, 3, 3).bfloat16()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert F.interpolate(x, scale_factor=2).dtype is ampc.bfloat16
        assert F.interpolate(x, scale_factor=2, mode="bilinear").dtype is \
            ampc.bfloat16


def test_interpolate_bad_arguments():
    x = ampc.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be "
                       "set with the interpolating modes"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="same number of spatial"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(ValueError, match="scale_factor must have the same"):
        F.interpolate(x, scale_factor=(2,))
    with pytest.raises(TypeError, match="expected size to be one of int"):
        F.interpolate(x, size=(2.0, 3))
    with pytest.raises(ValueError, match="recompute_scale_factor is not "
                       "meaningful"):
        F.interpolate(x, size=3, recompute_scale_factor=True)
    with pytest.raises(NotImplementedError, match="Got 4D input, but "
                       "linear mode needs 3D input"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(NotImplementedError, match="got 5D.*got bicubic"):
        F.interpolate(ampc.randn(1, 1, 2, 2, 2), scale_factor=2,
                      mode="bicubic")
    with pytest.raises(NotImplementedError, match="Got 3D input, but "
                       "trilinear mode needs 5D input"):
        F.interpolate(ampc.randn(1, 1, 2), scale_factor=2, mode="trilinear")
    with pytest.raises(NotImplementedError, match="got 2D.*got nearest"):
        F.interpolate(ampc.randn(2, 2), scale_factor=2)
    with pytest.raises(NotImplementedError, match="got cubic"):
        F.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(x, scale_factor=2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(ampc.randn(1, 1, 4), scale_factor=2, mode="linear",
                      antialias=True)
    with pytest.raises(NotImplementedError, match="lanczos"):
        F.interpolate(x, scale_factor=2, mode="lanczos", antialias=True)
    with pytest.raises(RuntimeError, match="should be greater than 0"):
        F.interpolate(x, scale_factor=0.1)


# ----------------------------------------------------------------------------
# CUDA against the CPU


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cuda_pad_and_interpolate_match_the_cpu(dtype):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, size=(2, 3, 9, 11))
    for mode in MODES:
        assert_close_to_cpu(lambda t: F.pad(t, (2, 1, -1, 3), mode=mode), x,
                            dtype=dtype, grad=True)
    for mode, kw in [("nearest", {}), ("nearest-exact", {}),
                     ("bilinear", {"align_corners": False}),
                     ("bilinear", {"align_corners": True})]:
        assert_close_to_cpu(lambda t: F.interpolate(t, size=(17, 6),
                                                    mode=mode, **kw),
                            x, dtype=dtype, grad=True, k=4)


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_runs_upsampling_in_float32():
    x = ampc.randn(1, 2, 4, 4, device="cuda").half()
    with ampc.autocast("cuda", dtype=ampc.float16):
        assert F.interpolate(x, scale_factor=2).dtype is ampc.float32
        assert F.interpolate(x, scale_factor=2, mode="bilinear").dtype is \
            ampc.float32
        assert F.pad(x, (1, 1), mode="reflect").dtype is ampc.float16
