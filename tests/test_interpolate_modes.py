"""F.interpolate's kernel modes (ampc/nn/_resample.py on csrc/nn_interp.c,
cpu/interp_loops.h, cuda/interp.cu): 'linear', 'bilinear', 'trilinear',
'bicubic', and bilinear/bicubic with antialias=True; and the 5-D nearest
and 3-D/5-D area modes.  Values against float64 NumPy references written
from PyTorch's definitions (one weight matrix per axis) on odd sizes, every
CPU level and float dtype; gradients by finite differences and through
create_graph; torch's values, gradients and node names over many sizes,
scale factors and align_corners; autocast; on a GPU against the CPU bit
for bit in float32 (the same order of sums)."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import assert_close_to_cpu, requires_cuda
from helpers import (FLOAT_NAMES, assert_close, from_values, gradcheck,
                     to64)

C = ampc._C


# ----------------------------------------------------------------------------
# float64 references: one (out, in) weight matrix per axis


def _ratio(n, on, align_corners, scale):
    """torch's area_pixel_compute_scale"""
    if align_corners:
        return (n - 1) / (on - 1) if on > 1 else 0.0
    return 1.0 / scale if scale else n / on


def _source(j, r, align_corners):
    return r * j if align_corners else r * (j + 0.5) - 0.5


def linear_matrix(n, on, align_corners, scale=None):
    m = np.zeros((on, n))
    if n == on:                 # torch's same-size shortcut
        return np.eye(n)
    r = _ratio(n, on, align_corners, scale)
    for j in range(on):
        src = max(_source(j, r, align_corners), 0.0)
        i0 = min(math.floor(src), n - 1)
        lam = min(max(src - i0, 0.0), 1.0)
        m[j, i0] += 1 - lam
        m[j, min(i0 + 1, n - 1)] += lam
    return m


def cubic(x, a):
    x = abs(x)
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def cubic_matrix(n, on, align_corners, scale=None):
    m = np.zeros((on, n))
    r = _ratio(n, on, align_corners, scale)
    for j in range(on):
        src = _source(j, r, align_corners)
        i0 = min(math.floor(src), n - 1)
        t = min(max(src - i0, 0.0), 1.0)
        for k in range(4):      # the taps clamped at the borders
            m[j, min(max(i0 - 1 + k, 0), n - 1)] += cubic(t + 1 - k, -0.75)
    return m


def aa_matrix(filt, half):
    """torch's antialias weights: filt over [center - support, center +
    support], normalised (a dim of unchanged size is skipped)."""
    def matrix(n, on, align_corners, scale=None):
        if n == on:
            return np.eye(n)
        r = _ratio(n, on, align_corners, scale)
        support = half * r if r >= 1 else half
        inv = 1 / r if r >= 1 else 1.0
        m = np.zeros((on, n))
        for j in range(on):
            center = r * (j + 0.5)
            lo = max(int(center - support + 0.5), 0)
            hi = min(int(center + support + 0.5), n)
            w = np.array([filt((i - center + 0.5) * inv)
                          for i in range(lo, hi)])
            m[j, lo:hi] = w / w.sum() if w.sum() else w
        return m
    return matrix


MATRICES = {
    ("linear", False): linear_matrix, ("bilinear", False): linear_matrix,
    ("trilinear", False): linear_matrix, ("bicubic", False): cubic_matrix,
    ("bilinear", True): aa_matrix(lambda x: max(0.0, 1 - abs(x)), 1.0),
    ("bicubic", True): aa_matrix(lambda x: cubic(x, -0.5), 2.0),
}


def matrices(mode, antialias, shape, sizes, align_corners, scales=None):
    scales = scales or [None] * len(sizes)
    fn = MATRICES[mode, antialias]
    return [fn(n, on, align_corners, s)
            for n, on, s in zip(shape[2:], sizes, scales)]


def apply(x, mats):
    for k, m in enumerate(mats):
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, 2 + k, 0), (1, 0)),
                        0, 2 + k)
    return x


def taps(mats):
    return int(np.prod([np.count_nonzero(m, 1).max() for m in mats]))


# (mode, antialias, input shape, output size); odd sizes, both directions,
# a same-size axis (linear's copy, antialias's skip, bicubic computes it)
CASES = [
    ("linear", False, (2, 3, 7), (13,)), ("linear", False, (2, 3, 33), (5,)),
    ("bilinear", False, (2, 3, 5, 7), (9, 13)),
    ("bilinear", False, (1, 2, 9, 8), (4, 3)),
    ("bicubic", False, (2, 3, 5, 7), (9, 13)),
    ("bicubic", False, (1, 2, 9, 8), (4, 3)),
    ("bicubic", False, (1, 2, 6, 5), (6, 11)),
    ("bicubic", False, (1, 1, 1, 4), (3, 1)),
    ("trilinear", False, (1, 2, 3, 5, 4), (5, 3, 7)),
    ("trilinear", False, (2, 1, 4, 4, 6), (4, 2, 9)),
    ("bilinear", True, (1, 2, 11, 9), (4, 3)),
    ("bilinear", True, (1, 2, 5, 9), (12, 4)),
    ("bicubic", True, (1, 2, 13, 9), (4, 3)),
    ("bicubic", True, (2, 1, 6, 17), (6, 5)),
]
IDS = [f"{m}{'_aa' if aa else ''}_{'x'.join(map(str, s[2:]))}_"
       f"{'x'.join(map(str, o))}" for m, aa, s, o in CASES]


def _values(rng, shape):
    return ref.round_to(rng.uniform(-2, 2, size=shape), "bfloat16")


# ----------------------------------------------------------------------------
# the kernels against the references


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("mode,aa,shape,size", CASES, ids=IDS)
def test_values_match_the_float64_reference(cpu_level, dtype, mode, aa,
                                            shape, size, rng):
    assert C.kernel_variant("interp_fwd") == cpu_level
    xv = _values(rng, shape)
    for ac in ([False] if aa else [False, True]):
        mats = matrices(mode, aa, shape, size, ac)
        y = F.interpolate(from_values(xv, dtype), size=size, mode=mode,
                          align_corners=ac, antialias=aa)
        assert y.dtype.name == dtype and tuple(y.shape) == \
            tuple(shape[:2]) + tuple(size)
        assert_close(y, apply(xv, mats), dtype, k=taps(mats),
                     atol=ref.tolerance(dtype, taps(mats))[0] * 4)
        # the adjoint: grad_in = M^T grad_out, per axis
        gv = _values(rng, y.shape)
        gx = C.interpolate_backward(
            from_values(gv, dtype), shape, "cubic" if mode == "bicubic"
            else "linear", ac, None, aa)
        want = apply(gv, [m.T for m in mats])
        k = taps([m.T for m in mats])
        assert_close(gx, want, dtype, k=k,
                     atol=ref.tolerance(dtype, k)[0] * 8)


@pytest.mark.parametrize("mode,aa,shape,size", CASES, ids=IDS)
def test_cpu_levels_agree_bit_for_bit(mode, aa, shape, size, rng):
    x = from_values(_values(rng, shape), "float32")
    g = from_values(_values(rng, shape[:2] + size), "float32")
    kind = "cubic" if mode == "bicubic" else "linear"
    prev = C.cpu_capability()
    outs = []
    try:
        for level in ampc.backends.cpu.levels():
            C._set_cpu_level(level)
            outs.append((C.interpolate(x, size, kind, True, None, aa),
                         C.interpolate_backward(g, shape, kind, True, None,
                                                aa)))
    finally:
        C._set_cpu_level(prev)
    for y, gx in outs[1:]:
        assert ampc.equal(y, outs[0][0]) and ampc.equal(gx, outs[0][1])


@pytest.mark.parametrize("mode,aa,shape,size",
                         [c for c in CASES if np.prod(c[2]) <= 128],
                         ids=[i for i, c in zip(IDS, CASES)
                              if np.prod(c[2]) <= 128])
def test_gradients_by_finite_differences(mode, aa, shape, size, rng):
    for ac in ([False] if aa else [False, True]):
        mats = matrices(mode, aa, shape, size, ac)
        gradcheck(lambda t: F.interpolate(t, size=size, mode=mode,
                                          align_corners=ac, antialias=aa),
                  lambda v: apply(v, mats), [shape], rng=rng)


def test_scale_factor_sampling_and_recompute():
    """With scale_factor the sampling uses 1/scale_factor (PyTorch's
    compute_scales_value), with recompute_scale_factor=True in / out."""
    rng = np.random.default_rng(5)
    xv = _values(rng, (1, 2, 7, 9))
    x = from_values(xv, "float32")
    for mode, aa in [("bicubic", False), ("bilinear", False),
                     ("bicubic", True), ("bilinear", True)]:
        for sf in [(1.7, 0.6), (2.5, 1.1)]:
            sizes = [math.floor(n * s) for n, s in zip((7, 9), sf)]
            y = F.interpolate(x, scale_factor=sf, mode=mode, antialias=aa)
            mats = matrices(mode, aa, xv.shape, sizes, False, list(sf))
            assert_close(y, apply(xv, mats), k=taps(mats), atol=1e-5)
            y = F.interpolate(x, scale_factor=sf, mode=mode, antialias=aa,
                              recompute_scale_factor=True)
            mats = matrices(mode, aa, xv.shape, sizes, False)
            assert_close(y, apply(xv, mats), k=taps(mats), atol=1e-5)
    # one output with align_corners: the first input pixel
    y = F.interpolate(x, size=(1, 1), mode="bicubic", align_corners=True)
    assert np.array_equal(to64(y)[..., 0, 0], xv[..., 0, 0])


def test_second_derivative_goes_through_the_adjoint(rng):
    for mode, aa, shape, size in [CASES[4], CASES[8], CASES[12]]:
        xv = _values(rng, shape)
        x = ampc.tensor(xv.astype(np.float32), requires_grad=True)
        y = F.interpolate(x, size=size, mode=mode, antialias=aa)
        g, = ampc.autograd.grad((y * y).sum(), x, create_graph=True)
        assert g.grad_fn is not None
        h, = ampc.autograd.grad((g * g).sum(), x)
        mats = matrices(mode, aa, shape, size, False)
        # g = 2 M^T M x, d(g . g)/dx = 2 (2 M^T M)^T g
        m2 = lambda v: 2 * apply(apply(v, mats), [m.T for m in mats])  # noqa
        assert_close(g, m2(xv), "float32", k=64, atol=1e-4)
        assert_close(h, 2 * m2(m2(xv)), "float32", k=256, atol=1e-3)


# ----------------------------------------------------------------------------
# nearest and area on 5-D (and area on 3-D)


def nearest_ref(x, sizes, exact=False):
    for k, n_out in enumerate(sizes):
        n_in = x.shape[2 + k]
        j = np.arange(n_out) + (0.5 if exact else 0.0)
        idx = np.minimum(np.floor(j * n_in / n_out).astype(int), n_in - 1)
        x = np.take(x, idx, axis=2 + k)
    return x


def area_ref(x, sizes):
    for k, n_out in enumerate(sizes):
        n = x.shape[2 + k]
        m = np.zeros((n_out, n))
        for o in range(n_out):
            lo, hi = o * n // n_out, -(-(o + 1) * n // n_out)
            m[o, lo:hi] = 1 / (hi - lo)
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, 2 + k, 0), (1, 0)),
                        0, 2 + k)
    return x


@pytest.mark.parametrize("shape,sizes", [((2, 3, 3, 5, 4), (5, 9, 2)),
                                         ((1, 2, 4, 7, 6), (2, 3, 13))])
def test_nearest_and_area_on_5d(shape, sizes, rng):
    xv = _values(rng, shape)
    for mode, want in [("nearest", nearest_ref(xv, sizes)),
                       ("nearest-exact", nearest_ref(xv, sizes, True)),
                       ("area", area_ref(xv, sizes))]:
        for dtype in FLOAT_NAMES:
            y = F.interpolate(from_values(xv, dtype), size=sizes, mode=mode)
            assert_close(y, want, dtype, k=16)
        fn = {"nearest": lambda v: nearest_ref(v, sizes),
              "nearest-exact": lambda v: nearest_ref(v, sizes, True),
              "area": lambda v: area_ref(v, sizes)}[mode]
        gradcheck(lambda t: F.interpolate(t, size=sizes, mode=mode), fn,
                  [shape], rng=rng)
    xv3 = _values(rng, (2, 3, 11))
    assert_close(F.interpolate(from_values(xv3, "float32"), size=4,
                               mode="area"), area_ref(xv3, (4,)), k=4)


# ----------------------------------------------------------------------------
# torch


TORCH_CALLS = [dict(size=11), dict(size=3), dict(scale_factor=2),
               dict(scale_factor=1.7), dict(scale_factor=0.45),
               dict(scale_factor=2.3, recompute_scale_factor=True),
               dict(scale_factor=3), dict(scale_factor=0.3),
               dict(size=1)]


def _empty(shape, kw):
    """Whether the call gives an empty output (an error in both)."""
    return any(math.floor(n * kw.get("scale_factor", 1)) == 0
               for n in shape[2:])


def _torch_case(torch, rng, shape, mode, kw, ac, aa, dtype="float32"):
    TF = torch.nn.functional
    xv = rng.standard_normal(shape).astype(np.float32)
    x = from_values(xv, dtype).requires_grad_()
    tx = torch.tensor(xv).to(getattr(torch, dtype)).requires_grad_()
    y = F.interpolate(x, mode=mode, align_corners=ac, antialias=aa, **kw)
    ty = TF.interpolate(tx, mode=mode, align_corners=ac, antialias=aa, **kw)
    if not (mode == "area" and len(shape) == 5):
        # (ampc's 3-D area is two adaptive_avg_pool2d: no one node)
        assert y.grad_fn.name() == ty.grad_fn.name()
    assert tuple(y.shape) == tuple(ty.shape)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    y.backward(from_values(g, dtype))
    ty.backward(torch.tensor(g).to(getattr(torch, dtype)))
    return (to64(y), ty.detach().double().numpy(), to64(x.grad),
            tx.grad.double().numpy())


@pytest.mark.parametrize("mode,aa,shapes", [
    ("linear", False, [(2, 3, 7), (1, 2, 32)]),
    ("bilinear", False, [(2, 3, 5, 9), (1, 2, 13, 4)]),
    ("bicubic", False, [(2, 3, 5, 9), (1, 2, 13, 4), (1, 1, 2, 3)]),
    ("trilinear", False, [(1, 2, 3, 5, 4), (1, 1, 7, 2, 3)]),
    ("bilinear", True, [(2, 3, 5, 9), (1, 2, 31, 17)]),
    ("bicubic", True, [(2, 3, 5, 9), (1, 2, 31, 17)]),
])
def test_values_gradients_and_nodes_match_torch(mode, aa, shapes, rng):
    torch = pytest.importorskip("torch")
    for shape in shapes:
        for kw in [kw for kw in TORCH_CALLS if not _empty(shape, kw)]:
            for ac in [False, True]:
                y, ty, gx, tgx = _torch_case(torch, rng, shape, mode, kw, ac,
                                             aa)
                msg = f"{shape} {mode} aa={aa} {kw} align_corners={ac}"
                np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-5,
                                           err_msg=msg)
                np.testing.assert_allclose(gx, tgx, rtol=1e-5, atol=2e-5,
                                           err_msg=msg)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode,shape", [("bicubic", (2, 3, 5, 9)),
                                        ("trilinear", (1, 2, 3, 5, 4)),
                                        ("bilinear", (1, 2, 13, 4))])
def test_16_bit_dtypes_match_torch(dtype, mode, shape, rng):
    """PyTorch's CPU kernels take float16/bfloat16 without antialias; both
    compute in float32 and round once (its weights may round to the dtype
    first: a few units in the last place)."""
    torch = pytest.importorskip("torch")
    eps = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[dtype]
    for kw in [dict(scale_factor=2), dict(size=7), dict(scale_factor=0.6)]:
        for ac in [False, True]:
            y, ty, gx, tgx = _torch_case(torch, rng, shape, mode, kw, ac,
                                         False, dtype)
            np.testing.assert_allclose(y, ty, rtol=4 * eps, atol=4 * eps)
            np.testing.assert_allclose(gx, tgx, rtol=8 * eps, atol=8 * eps)


def test_nearest_and_area_5d_match_torch(rng):
    torch = pytest.importorskip("torch")
    for shape in [(1, 2, 3, 5, 4), (2, 1, 5, 2, 7)]:
        for mode in ["nearest", "nearest-exact", "area"]:
            for kw in TORCH_CALLS:
                if _empty(shape, kw) or (mode == "area" and
                                         "recompute_scale_factor" in kw):
                    continue
                y, ty, gx, tgx = _torch_case(torch, rng, shape, mode, kw,
                                             None, False)
                msg = f"{shape} {mode} {kw}"
                np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-6,
                                           err_msg=msg)
                np.testing.assert_allclose(gx, tgx, rtol=1e-5, atol=1e-5,
                                           err_msg=msg)


def test_upsample_module_takes_the_new_modes():
    torch = pytest.importorskip("torch")
    for kw in [dict(scale_factor=2, mode="bicubic"),
               dict(size=(3, 4, 5), mode="trilinear", align_corners=True)]:
        assert repr(nn.Upsample(**kw)) == repr(torch.nn.Upsample(**kw))
    x = ampc.randn(1, 2, 3, 4, 5)
    assert ampc.equal(nn.Upsample(scale_factor=2, mode="trilinear")(x),
                      F.interpolate(x, scale_factor=2.0, mode="trilinear"))


# ----------------------------------------------------------------------------
# autocast


def test_autocast_policy_and_cpu_dtype():
    """PyTorch's CUDA autocast lists upsample_bicubic2d (and its _aa) and
    upsample_trilinear3d as float32 ops; its CPU autocast keeps the input's
    dtype."""
    for op in ("upsample", "upsample_bicubic", "upsample_trilinear"):
        assert C.autocast_policy(op, "cuda") == "fp32"
        assert C.autocast_policy(op, "cpu") is None
    x = ampc.randn(1, 2, 3, 3).bfloat16()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert F.interpolate(x, scale_factor=2, mode="bicubic").dtype is \
            ampc.bfloat16
        assert F.interpolate(x.unsqueeze(2), scale_factor=2,
                             mode="trilinear").dtype is ampc.bfloat16


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_runs_the_new_modes_in_float32():
    x = ampc.randn(1, 2, 4, 4, device="cuda").half()
    with ampc.autocast("cuda", dtype=ampc.float16):
        for kw in [dict(mode="bicubic"), dict(mode="bicubic", antialias=True),
                   dict(mode="bilinear", antialias=True)]:
            assert F.interpolate(x, scale_factor=0.5, **kw).dtype is \
                ampc.float32
        assert F.interpolate(x.unsqueeze(2), scale_factor=2,
                             mode="trilinear").dtype is ampc.float32
        assert F.interpolate(x.unsqueeze(2), scale_factor=2).dtype is \
            ampc.float32


# ----------------------------------------------------------------------------
# CUDA against the CPU


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("mode,aa,shape,size", CASES, ids=IDS)
def test_cuda_matches_the_cpu(dtype, mode, aa, shape, size):
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, size=shape)
    for ac in ([False] if aa else [False, True]):
        assert_close_to_cpu(
            lambda t: F.interpolate(t, size=size, mode=mode,
                                    align_corners=ac, antialias=aa),
            x, dtype=dtype, grad=True, k=64)


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("mode,aa,shape,size", CASES, ids=IDS)
def test_cuda_float32_gives_the_cpu_bits(mode, aa, shape, size):
    rng = np.random.default_rng(12)
    kind = "cubic" if mode == "bicubic" else "linear"
    x = from_values(rng.uniform(-1, 1, size=shape), "float32")
    g = from_values(rng.uniform(-1, 1, size=shape[:2] + size), "float32")
    for ac in [False, True]:
        y = C.interpolate(x, size, kind, ac, None, aa)
        gx = C.interpolate_backward(g, shape, kind, ac, None, aa)
        assert ampc.equal(C.interpolate(x.cuda(), size, kind, ac, None, aa)
                          .cpu(), y)
        assert ampc.equal(C.interpolate_backward(g.cuda(), shape, kind, ac,
                                                 None, aa).cpu(), gx)
