"""GEMM and convolution on CUDA (cuda/blas.cu, cuda/dnn.cu, cuda/bias.cu):
linear, matmul and conv2d, forward and backward, run on the GPU and on the
CPU with the same inputs (odd sizes, every float dtype, transposed, strided
and broadcast operands, stride / padding / dilation, bias and fused ReLU)
and compared; against torch on the GPU where torch with CUDA is
importable; the TF32 switches, the cuDNN algorithm cache and the
mixed-device errors.

The first group runs anywhere: ampc.backends.cuda / ampc.backends.cudnn
(defaults, setters, flags()) and the CPU ops' indifference to them.  The
rest needs a GPU and is marked ``cuda``.
"""
import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import (assert_close_to_cpu, assert_same, make_pair,
                          requires_cuda, torch_cuda)
from helpers import FLOAT_NAMES, from_values, to64

C = ampc._C
cudnn = ampc.backends.cudnn
cuda_matmul = ampc.backends.cuda.matmul


def gpu(fn):
    """Marks a test as needing a GPU (marker ``cuda``, skipped without)."""
    return pytest.mark.cuda(requires_cuda(fn))


def uniform(rng, *shape):
    """Values in [-1, 1): sums of them stay small, so the tolerances
    measure rounding, not cancellation."""
    return rng.uniform(-1.0, 1.0, size=shape)


@pytest.fixture
def exact_fp32():
    """float32 without TF32 on both libraries for the test, as on the
    CPU; every flag restored after."""
    saved = C._linalg_cuda_flags()
    C._set_linalg_cuda_flags(matmul_allow_tf32=False, cudnn_allow_tf32=False)
    yield
    C._set_linalg_cuda_flags(**saved)


# ----------------------------------------------------------------------------
# ampc.backends.cuda and ampc.backends.cudnn (no GPU needed)


def test_backend_defaults_are_torchs():
    assert cuda_matmul.allow_tf32 is False
    assert cudnn.enabled is True
    assert cudnn.benchmark is False
    assert cudnn.deterministic is False
    assert cudnn.allow_tf32 is True


def test_backend_setters_reach_the_c_side():
    saved = C._linalg_cuda_flags()
    try:
        cuda_matmul.allow_tf32 = True
        cudnn.benchmark = True
        cudnn.deterministic = True
        cudnn.allow_tf32 = False
        cudnn.enabled = False
        assert C._linalg_cuda_flags() == {
            "matmul_allow_tf32": True, "cudnn_enabled": False,
            "cudnn_benchmark": True, "cudnn_deterministic": True,
            "cudnn_allow_tf32": False}
        assert "allow_tf32=True" in repr(cuda_matmul)
    finally:
        C._set_linalg_cuda_flags(**saved)
    assert C._linalg_cuda_flags() == saved


def test_backend_flags_must_be_bools():
    with pytest.raises(TypeError, match=r"ampc\.backends\.cuda\.matmul\."
                       "allow_tf32 must be a bool, got int"):
        cuda_matmul.allow_tf32 = 1
    with pytest.raises(TypeError, match=r"ampc\.backends\.cudnn\.benchmark "
                       "must be a bool, got str"):
        cudnn.benchmark = "yes"
    with pytest.raises(AttributeError, match="has no setting "
                       "'allow_fp16'; the one setting is allow_tf32"):
        cuda_matmul.allow_fp16 = True
    with pytest.raises(TypeError):
        C._set_linalg_cuda_flags(True)
    with pytest.raises(TypeError):
        C._set_linalg_cuda_flags(cudnn_speed=True)


def test_cudnn_flags_context_restores_even_on_error():
    before = C._linalg_cuda_flags()
    with pytest.raises(ValueError):
        with cudnn.flags(enabled=False, benchmark=True, deterministic=True,
                         allow_tf32=False):
            assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic,
                    cudnn.allow_tf32) == (False, True, True, False)
            raise ValueError("inside")
    assert C._linalg_cuda_flags() == before
    with cudnn.flags(benchmark=True):
        assert cudnn.benchmark is True and cudnn.deterministic is False
    assert cudnn.benchmark is False


def test_cudnn_introspection():
    info = cudnn.algorithm_cache_info()
    assert info.entries >= 0 and info.hits >= 0 and info.misses >= 0
    cudnn.clear_algorithm_cache()
    assert tuple(cudnn.algorithm_cache_info()) == (0, 0, 0)
    v = cudnn.version()
    if cudnn.is_available() and ampc._build_config.CUDA:
        assert v >= 90000
    else:
        assert v is None
    assert ampc.backends.cuda.is_built() in (True, False)


def test_cpu_ops_ignore_the_cuda_flags(rng):
    """The flags choose CUDA kernels only: CPU results are bit-identical
    whatever they say."""
    a = from_values(uniform(rng, 17, 33), "float32")
    b = from_values(uniform(rng, 33, 9), "float32")
    x = from_values(uniform(rng, 2, 3, 9, 9), "float32")
    w = from_values(uniform(rng, 4, 3, 3, 3), "float32")
    plain = (to64(C.matmul(a, b)), to64(C.conv2d(x, w)))
    with cudnn.flags(enabled=False, benchmark=True, allow_tf32=True):
        saved = cuda_matmul.allow_tf32
        cuda_matmul.allow_tf32 = True
        try:
            flagged = (to64(C.matmul(a, b)), to64(C.conv2d(x, w)))
        finally:
            cuda_matmul.allow_tf32 = saved
    for p, f in zip(plain, flagged):
        assert np.array_equal(p, f)


# ----------------------------------------------------------------------------
# linear

# (batch dims, in_features, out_features): 1, 3, 17, 129 and a 2-D batch
LINEAR_SHAPES = [((1,), 1, 1), ((3,), 17, 3), ((17,), 129, 17),
                 ((2, 5), 3, 129), ((129,), 33, 1), ((4,), 1, 7)]


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_linear_matches_cpu(exact_fp32, rng, dtype, bias, relu):
    for batch, fin, fout in LINEAR_SHAPES:
        arrays = [uniform(rng, *batch, fin), uniform(rng, fout, fin)]
        if bias:
            arrays.append(uniform(rng, fout))
        rows = int(np.prod(batch))
        assert_close_to_cpu(
            lambda x, w, b=None: F._linear(x, w, b, relu), *arrays,
            dtype=dtype, grad=True, k=fin, grad_k=max(rows, fout))


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("xl,wl", [("t", "contig"), ("contig", "t"),
                                   ("step", "t"), ("step", "step")])
def test_linear_strided_operands(exact_fp32, rng, dtype, xl, wl):
    """A transposed weight maps to a cuBLAS op flag; a strided one (both
    strides non-unit after the step view) is gathered first."""
    x = uniform(rng, 19, 37)
    w = uniform(rng, 23, 37)
    b = uniform(rng, 23)
    xc, xg = make_pair(x, dtype, xl)
    wc, wg = make_pair(w, dtype, wl)
    bc, bg = make_pair(b, dtype)
    for relu in (False, True):
        assert_same(C.linear(xg, wg, bg, relu), C.linear(xc, wc, bc, relu),
                    k=37)
        gc = C.linear_backward(C.linear(xc, wc, bc), xc, wc,
                               (True, True, True))
        gg = C.linear_backward(C.linear(xg, wg, bg), xg, wg,
                               (True, True, True))
        for got, want in zip(gg, gc):
            assert_same(got, want, k=37)


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_linear_relu_keeps_nan_and_empty_batches(exact_fp32, rng, dtype):
    x = uniform(rng, 5, 8)
    x[2, 3] = np.nan
    w = uniform(rng, 6, 8)
    b = uniform(rng, 6)
    pairs = [make_pair(v, dtype) for v in (x, w, b)]
    got = C.linear(*(p[1] for p in pairs), relu=True)
    want = C.linear(*(p[0] for p in pairs), relu=True)
    assert np.isnan(to64(got.cpu())[2]).all()
    assert_same(got, want, k=8)
    # no rows: an empty output, zero weight and bias gradients
    xe = make_pair(np.zeros((0, 8)), dtype)[1]
    we = pairs[1][1]
    ge = C.linear_backward(C.linear(xe, we), xe, we, (True, True, True))
    assert tuple(ge[0].shape) == (0, 8)
    assert not to64(ge[1].cpu()).any() and not to64(ge[2].cpu()).any()
    # in_features 0: the output is the bias alone
    xz = make_pair(np.zeros((3, 0)), dtype)
    wz = make_pair(np.zeros((6, 0)), dtype)
    got = C.linear(xz[1], wz[1], pairs[2][1])
    assert_same(got, C.linear(xz[0], wz[0], pairs[2][0]))


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_linear_bias_gradient_is_deterministic(rng, dtype):
    go = uniform(rng, 4099, 129)
    x = uniform(rng, 4099, 3)
    w = uniform(rng, 129, 3)
    (goc, gog), (xc, xg), (wc, wg) = (make_pair(v, dtype) for v in
                                      (go, x, w))
    first = C.linear_backward(gog, xg, wg, (False, False, True))[2]
    again = C.linear_backward(gog, xg, wg, (False, False, True))[2]
    assert np.array_equal(to64(first.cpu()), to64(again.cpu()))
    want = C.linear_backward(goc, xc, wc, (False, False, True))[2]
    assert_same(first, want, k=4099)


# ----------------------------------------------------------------------------
# matmul

# (a shape, b shape): 1-D, 2-D, batched, broadcast batches
MATMUL_SHAPES = [
    ((17,), (17,)), ((3,), (3, 129)), ((129, 17), (17,)),
    ((1, 1), (1, 1)), ((17, 129), (129, 3)), ((3, 17, 129), (129, 1)),
    ((3, 17, 129), (3, 129, 5)), ((2, 1, 5, 3), (4, 3, 7)),
    ((5, 3), (2, 3, 4)), ((1, 3, 4), (6, 1, 4, 2)), ((7,), (2, 7, 3)),
]


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_matmul_matches_cpu(exact_fp32, rng, dtype):
    for sa, sb in MATMUL_SHAPES:
        k = sa[-1]
        a = uniform(rng, *sa)
        b = uniform(rng, *sb)
        assert_close_to_cpu(lambda x, y: x @ y, a, b, dtype=dtype,
                            grad=True, k=k, grad_k=max(sa + sb))


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("la,lb", [("t", "contig"), ("contig", "t"),
                                   ("t", "t"), ("step", "step"),
                                   ("expand", "contig"),
                                   ("contig", "expand")])
def test_matmul_views(exact_fp32, rng, dtype, la, lb):
    """Transposes (op flags), strided views (gathered), and a batch
    broadcast by a stride-0 view."""
    a = uniform(rng, 1, 17, 33)
    b = uniform(rng, 1, 33, 9)
    ac, ag = make_pair(a, dtype, la)
    bc, bg = make_pair(b, dtype, lb)
    assert_same(C.matmul(ag, bg), C.matmul(ac, bc), k=33)


@gpu
def test_matmul_uncollapsible_batch(exact_fp32, rng):
    """Batch dimensions whose strides do not merge: the C side loops over
    the outer one and the slot gets strided batches."""
    base = uniform(rng, 4, 6, 5, 3)
    a = base.transpose(1, 0, 2, 3)            # (6, 4, 5, 3), not mergeable
    b = uniform(rng, 3, 2)
    for dtype in FLOAT_NAMES:
        ta = from_values(base, dtype).permute(1, 0, 2, 3)
        ga = from_values(base, dtype).to("cuda").permute(1, 0, 2, 3)
        bc, bg = make_pair(b, dtype)
        out = C.matmul(ga, bg)
        assert_same(out, C.matmul(ta, bc), k=3)
        assert tuple(out.shape) == a.shape[:3] + (2,)


@gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_matmul_long_k_accumulates_in_float32(rng, dtype):
    """K = 8191 in 16-bit: float32 accumulation (no split-K reduction in
    the output type) keeps the GPU within the CPU's float32 tolerance."""
    a = uniform(rng, 33, 8191)
    b = uniform(rng, 8191, 17)
    assert_close_to_cpu(lambda x, y: C.matmul(x, y), a, b, dtype=dtype,
                        k=8191)


@gpu
def test_matmul_allow_tf32_is_observable(rng):
    a = rng.standard_normal((512, 1024))
    b = rng.standard_normal((1024, 256))
    (ac, ag), (bc, bg) = make_pair(a), make_pair(b)
    want = to64(C.matmul(ac, bc))
    saved = cuda_matmul.allow_tf32
    try:
        cuda_matmul.allow_tf32 = False
        exact = to64(C.matmul(ag, bg).cpu())
        cuda_matmul.allow_tf32 = True
        fast = to64(C.matmul(ag, bg).cpu())
    finally:
        cuda_matmul.allow_tf32 = saved
    scale = np.sqrt(1024.0)
    assert np.max(np.abs(exact - want)) < 1e-4 * scale
    # TF32 keeps 10 mantissa bits of each product's operands.  Tensor
    # cores may truncate them rather than round: with these operands the
    # worst error is then 3.5e-3 * scale (rounded: 1.3e-3; bfloat16
    # operands: 1.1e-2), hence 1e-2.
    assert np.max(np.abs(fast - want)) < 1e-2 * scale
    assert not np.array_equal(fast, exact), "allow_tf32 changed nothing"


# ----------------------------------------------------------------------------
# conv2d

# (N, C, H, W, OC, KH, KW, stride, padding, dilation)
CONV_SHAPES = [
    (1, 1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (1, 1)),
    (2, 3, 17, 17, 5, 3, 3, (1, 1), (1, 1), (1, 1)),
    (3, 4, 9, 13, 7, 3, 5, (2, 1), (1, 2), (1, 1)),
    (1, 3, 17, 17, 3, 3, 3, (2, 2), (2, 2), (2, 2)),
    (2, 17, 8, 8, 1, 1, 1, (1, 1), (0, 0), (1, 1)),
    (5, 2, 7, 6, 17, 2, 3, (3, 2), (0, 1), (2, 1)),
    (1, 8, 33, 33, 16, 5, 5, (1, 1), (2, 2), (1, 1)),
]


def conv_fn(stride, padding, dilation, relu):
    def fn(x, w, b=None):
        return F._conv2d(x, w, b, stride, padding, dilation, relu)
    return fn


# cuDNN may choose a Winograd algorithm for a float32 3x3 convolution at
# stride 1 (FMA math, no TF32), as it does for torch.  Its input and output
# transforms multiply the float32 rounding error of the sum: F(4x4, 3x3)
# reached about 2x the direct sum's bound on these shapes in a float32
# simulation.  The sqrt(k) term of the conv tolerances is therefore 4x
# (k * 16) where cuDNN is compared; a wrong sum is still off by far more.
WINOGRAD_K = 16


def conv_k(shape, cudnn=True):
    """(k, grad_k) of a conv shape, widened for Winograd's error where
    cuDNN computes it."""
    n, c, h, w, oc, kh, kw, st, pad, dil = shape
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // st[0] + 1
    ow = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // st[1] + 1
    f = WINOGRAD_K if cudnn else 1
    return c * kh * kw * f, max(n * oh * ow, oc * kh * kw) * f


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_conv2d_matches_cpu(exact_fp32, rng, dtype, bias, relu):
    for shape in CONV_SHAPES:
        n, c, h, w, oc, kh, kw, st, pad, dil = shape
        arrays = [uniform(rng, n, c, h, w), uniform(rng, oc, c, kh, kw)]
        if bias:
            arrays.append(uniform(rng, oc))
        k, gk = conv_k(shape)
        assert_close_to_cpu(conv_fn(st, pad, dil, relu), *arrays,
                            dtype=dtype, grad=True, k=k, grad_k=gk)


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_conv2d_noncontiguous_inputs(exact_fp32, rng, dtype):
    x = uniform(rng, 2, 3, 11, 11)
    w = uniform(rng, 4, 3, 3, 3)
    (xc, xg), (wc, wg) = make_pair(x, dtype, "t"), make_pair(w, dtype, "t")
    got = C.conv2d(xg, wg, None, 1, 1, 1)
    assert_same(got, C.conv2d(xc, wc, None, 1, 1, 1), k=27 * WINOGRAD_K)
    go = make_pair(uniform(rng, *got.shape), dtype, "step")
    gg = C.conv2d_backward(go[1], xg, wg, 1, 1, 1, (True, True, True))
    gc = C.conv2d_backward(go[0], xc, wc, 1, 1, 1, (True, True, True))
    for a, b in zip(gg, gc):
        assert_same(a, b, k=2 * 11 * 11 * WINOGRAD_K)


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_conv2d_empty_batch(rng, dtype):
    xc, xg = make_pair(np.zeros((0, 3, 5, 5)), dtype)
    wc, wg = make_pair(uniform(rng, 4, 3, 3, 3), dtype)
    y = C.conv2d(xg, wg, None, 1, 0, 1)
    assert tuple(y.shape) == (0, 4, 3, 3)
    gx, gw, gb = C.conv2d_backward(y, xg, wg, 1, 0, 1, (True, True, True))
    assert tuple(gx.shape) == (0, 3, 5, 5)
    assert not to64(gw.cpu()).any() and not to64(gb.cpu()).any()


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_conv2d_benchmark_and_deterministic(exact_fp32, rng, dtype):
    x = uniform(rng, 4, 8, 20, 20)
    w = uniform(rng, 16, 8, 3, 3)
    go = uniform(rng, 4, 16, 20, 20)
    (xc, xg), (wc, wg), (gc, gg) = (make_pair(v, dtype) for v in (x, w, go))
    want = C.conv2d(xc, wc, None, 1, 1, 1)
    want_g = C.conv2d_backward(gc, xc, wc, 1, 1, 1, (True, True, True))
    with cudnn.flags(benchmark=True):
        assert_same(C.conv2d(xg, wg, None, 1, 1, 1), want,
                    k=72 * WINOGRAD_K)
        for a, b in zip(C.conv2d_backward(gg, xg, wg, 1, 1, 1,
                                          (True, True, True)), want_g):
            assert_same(a, b, k=1600 * WINOGRAD_K)
    with cudnn.flags(deterministic=True):
        runs = [C.conv2d_backward(gg, xg, wg, 1, 1, 1, (True, True, True))
                for _ in range(3)]
        for r in runs[1:]:
            for a, b in zip(r, runs[0]):
                assert np.array_equal(to64(a.cpu()), to64(b.cpu()))
        for a, b in zip(runs[0], want_g):
            assert_same(a, b, k=1600 * WINOGRAD_K)


@gpu
def test_conv2d_algorithm_cache_is_reused(exact_fp32, rng):
    if not cudnn.is_available():
        pytest.skip("built without cuDNN: no algorithm cache")
    x = make_pair(uniform(rng, 2, 3, 13, 13))[1]
    w = make_pair(uniform(rng, 5, 3, 3, 3))[1]
    cudnn.clear_algorithm_cache()
    y = C.conv2d(x, w, None, 1, 1, 1)
    assert tuple(cudnn.algorithm_cache_info()) == (1, 0, 1)
    for _ in range(3):
        C.conv2d(x, w, None, 1, 1, 1)
    assert tuple(cudnn.algorithm_cache_info()) == (1, 3, 1)
    C.conv2d_backward(y, x, w, 1, 1, 1, (True, True, False))
    assert tuple(cudnn.algorithm_cache_info()) == (3, 3, 3)
    C.conv2d_backward(y, x, w, 1, 1, 1, (True, True, False))
    assert tuple(cudnn.algorithm_cache_info()) == (3, 5, 3)
    # another shape, and another setting, each choose anew
    C.conv2d(x, w, None, 2, 1, 1)
    with cudnn.flags(deterministic=True):
        C.conv2d(x, w, None, 1, 1, 1)
    assert cudnn.algorithm_cache_info().entries == 5
    cudnn.clear_algorithm_cache()
    assert tuple(cudnn.algorithm_cache_info()) == (0, 0, 0)


@gpu
def test_conv2d_allow_tf32_stays_within_tf32_error(rng):
    x = make_pair(rng.standard_normal((8, 64, 16, 16)))
    w = make_pair(rng.standard_normal((64, 64, 3, 3)))
    want = to64(C.conv2d(x[0], w[0], None, 1, 1, 1))
    scale = np.sqrt(64 * 9.0)
    with cudnn.flags(allow_tf32=False):
        exact = to64(C.conv2d(x[1], w[1], None, 1, 1, 1).cpu())
    with cudnn.flags(allow_tf32=True):
        fast = to64(C.conv2d(x[1], w[1], None, 1, 1, 1).cpu())
    assert np.max(np.abs(exact - want)) < 1e-4 * scale
    # truncated TF32 operands give 3.5e-3 * scale here, and cuDNN may pick
    # a Winograd algorithm, whose transforms add to it: a margin
    assert np.max(np.abs(fast - want)) < 1e-2 * scale


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_without_cudnn_matches_cpu(exact_fp32, rng, dtype, bias):
    """cudnn.enabled False: im2col + GEMM (conv_gemm.cu), in chunks of
    images; the algorithm cache is not touched."""
    cudnn.clear_algorithm_cache()
    with cudnn.flags(enabled=False):
        for shape in CONV_SHAPES:
            n, c, h, w, oc, kh, kw, st, pad, dil = shape
            arrays = [uniform(rng, n, c, h, w), uniform(rng, oc, c, kh, kw)]
            if bias:
                arrays.append(uniform(rng, oc))
            k, gk = conv_k(shape, cudnn=False)
            for relu in (False, True):
                assert_close_to_cpu(conv_fn(st, pad, dil, relu), *arrays,
                                    dtype=dtype, grad=True, k=k, grad_k=gk)
        # deterministic: the same gradients bit for bit
        x = make_pair(uniform(rng, 3, 4, 9, 9), dtype)[1]
        wt = make_pair(uniform(rng, 5, 4, 3, 3), dtype)[1]
        go = make_pair(uniform(rng, 3, 5, 9, 9), dtype)[1]
        runs = [C.conv2d_backward(go, x, wt, 1, 1, 1, (True, True, True))
                for _ in range(2)]
        for a, b in zip(*runs):
            assert np.array_equal(to64(a.cpu()), to64(b.cpu()))
    assert tuple(cudnn.algorithm_cache_info()) == (0, 0, 0)


# ----------------------------------------------------------------------------
# errors


@gpu
def test_mixed_devices_are_refused(rng):
    xc, xg = make_pair(uniform(rng, 3, 4))
    wc, wg = make_pair(uniform(rng, 5, 4))
    bc, bg = make_pair(uniform(rng, 5))
    msg = ("Expected all tensors to be on the same device, but found at "
           "least two devices, {} and {}!")
    cases = [
        (lambda: C.linear(xg, wc), "linear", "cuda:0", "cpu"),
        (lambda: C.linear(xc, wg), "linear", "cpu", "cuda:0"),
        (lambda: C.linear(xg, wg, bc), "linear", "cuda:0", "cpu"),
        (lambda: C.linear_backward(C.linear(xg, wg), xc, wg,
                                   (True, True, True)),
         "linear_backward", "cuda:0", "cpu"),
        (lambda: C.matmul(xg, wc.transpose(0, 1)), "matmul", "cuda:0",
         "cpu"),
    ]
    x4c, x4g = make_pair(uniform(rng, 1, 2, 5, 5))
    w4c, w4g = make_pair(uniform(rng, 3, 2, 3, 3))
    cases += [
        (lambda: C.conv2d(x4g, w4c), "conv2d", "cuda:0", "cpu"),
        (lambda: C.conv2d(x4g, w4g, make_pair(uniform(rng, 3))[0]),
         "conv2d", "cuda:0", "cpu"),
        (lambda: C.conv2d_backward(C.conv2d(x4g, w4g), x4c, w4g, 1, 0, 1,
                                   (True, True, True)),
         "conv2d_backward", "cuda:0", "cpu"),
    ]
    for call, fn, d0, d1 in cases:
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == f"{fn}(): " + msg.format(d0, d1)


@gpu
def test_cuda_errors_match_the_cpus(rng):
    """Bad shapes and dtypes raise on a GPU exactly what they raise on the
    CPU."""
    def pair(shape, dtype="float32"):
        return make_pair(uniform(rng, *shape), dtype)

    x, w, w16 = pair((3, 4)), pair((5, 6)), pair((5, 4), "float16")
    x4, w4, w4g = pair((1, 2, 5, 5)), pair((3, 2, 7, 7)), pair((3, 2, 2, 2))
    calls = [
        lambda d: C.linear(x[d], w[d]),
        lambda d: C.linear(x[d], w16[d]),
        lambda d: C.matmul(x[d], w[d]),
        lambda d: C.conv2d(x4[d], w4[d]),
        lambda d: C.conv2d(x4[d], w4g[d], None, 0),
        lambda d: C.conv2d(x4[d], w4g[d], None, 1, -1),
        lambda d: C.conv2d_backward(x4[d], x4[d], w4g[d], 1, 0, 1,
                                    (True, True, True)),
    ]
    for call in calls:
        with pytest.raises(Exception) as on_cpu:
            call(0)
        with pytest.raises(type(on_cpu.value)) as on_gpu:
            call(1)
        assert str(on_gpu.value) == str(on_cpu.value)


# ----------------------------------------------------------------------------
# against torch on the GPU


def torch_exact(torch):
    """torch without TF32 (cuDNN's default is on) and without cuBLAS's
    reduced-precision reductions (on by default for float16 and bfloat16:
    split-K partial sums rounded to the 16-bit type, which ampc's
    tolerance, a float32 accumulation rounded once, does not cover) for the
    comparisons; restored by the caller."""
    m = torch.backends.cuda.matmul
    saved = (m.allow_tf32, torch.backends.cudnn.allow_tf32,
             m.allow_fp16_reduced_precision_reduction,
             m.allow_bf16_reduced_precision_reduction)
    m.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m.allow_fp16_reduced_precision_reduction = False
    m.allow_bf16_reduced_precision_reduction = False
    return saved


def torch_restore(torch, saved):
    m = torch.backends.cuda.matmul
    (m.allow_tf32, torch.backends.cudnn.allow_tf32,
     m.allow_fp16_reduced_precision_reduction,
     m.allow_bf16_reduced_precision_reduction) = saved


def torch_of(torch, values, dtype):
    tdt = {"float32": torch.float32, "float16": torch.float16,
           "bfloat16": torch.bfloat16}[dtype]
    v = ref.round_to(np.asarray(values, dtype=np.float64), dtype)
    return torch.tensor(v, dtype=torch.float64).to(tdt).cuda() \
        .requires_grad_(True)


def against_torch(torch, got, want, dtype, k):
    """An ampc CUDA tensor against a torch CUDA tensor."""
    r, a = ref.tolerance(dtype, k)
    w = want.detach().double().cpu().numpy()
    g = to64(got.detach().cpu())
    scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
    assert g.shape == w.shape
    assert np.allclose(g, w, rtol=2 * r, atol=2 * r * scale, equal_nan=True)


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_against_torch(exact_fp32, rng, dtype):
    torch = torch_cuda()
    saved = torch_exact(torch)
    try:
        # linear with bias, forward and every gradient
        x, w, b = uniform(rng, 17, 129), uniform(rng, 33, 129), uniform(
            rng, 33)
        ours = [make_pair(v, dtype, requires_grad=True)[1] for v in (x, w, b)]
        theirs = [torch_of(torch, v, dtype) for v in (x, w, b)]
        y = F.linear(*ours)
        ty = torch.nn.functional.linear(*theirs)
        against_torch(torch, y, ty, dtype, 129)
        g = uniform(rng, 17, 33)
        y.backward(make_pair(g, dtype)[1])
        ty.backward(torch_of(torch, g, dtype).detach())
        for o, t in zip(ours, theirs):
            against_torch(torch, o.grad, t.grad, dtype, 33)

        # broadcast batched matmul
        a, bb = uniform(rng, 2, 1, 5, 3), uniform(rng, 4, 3, 7)
        got = C.matmul(make_pair(a, dtype)[1], make_pair(bb, dtype)[1])
        want = torch.matmul(torch_of(torch, a, dtype),
                            torch_of(torch, bb, dtype))
        against_torch(torch, got, want, dtype, 3)

        # conv2d with stride, padding, dilation, and its gradients
        x, w, b = (uniform(rng, 2, 3, 17, 17), uniform(rng, 5, 3, 3, 3),
                   uniform(rng, 5))
        ours = [make_pair(v, dtype, requires_grad=True)[1] for v in (x, w, b)]
        theirs = [torch_of(torch, v, dtype) for v in (x, w, b)]
        y = F.conv2d(*ours, stride=2, padding=1, dilation=2)
        ty = torch.nn.functional.conv2d(*theirs, stride=2, padding=1,
                                        dilation=2)
        against_torch(torch, y, ty, dtype, 27)
        g = uniform(rng, *y.shape)
        y.backward(make_pair(g, dtype)[1])
        ty.backward(torch_of(torch, g, dtype).detach())
        for o, t in zip(ours, theirs):
            against_torch(torch, o.grad, t.grad, dtype, 2 * 8 * 8)
    finally:
        torch_restore(torch, saved)
