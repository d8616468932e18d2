"""Linear algebra raw ops: _C.linear, linear_backward, matmul, conv2d and
conv2d_backward on every CPU level and float dtype, against the float64
oracle (reference.py), finite differences and torch where installed; the
GEMM edge cases (sizes that fill no tile, every transpose, K longer than
one block, threads); argument errors; and which variant ran."""
import numpy as np
import pytest

import ampc
import reference as ref
from helpers import (FLOAT_NAMES, assert_close, from_values, numeric_grad,
                     rand_values, to64, to_torch, torch_or_skip)

C = ampc._C


def close(out, expected, dtype, k, msg=""):
    """out (ampc) against float64 expected rounded to dtype: the dtype's
    K-term tolerance, relative to each value and to the largest one (a sum
    that cancels keeps the error of its terms)."""
    r, _ = ref.tolerance(dtype, k)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    assert_close(out, expected, dtype, rtol=r, atol=r * scale, msg=msg)


def tensors(rng, dtype, *shapes):
    """(float64 values exact in dtype, ampc tensors) for each shape."""
    vals = [rand_values(s, dtype, rng, -2.0, 2.0) for s in shapes]
    return vals, [from_values(v, dtype) for v in vals]


def every_other(values, dim, dtype="float32"):
    """An ampc view holding values as every other element along dim of a
    tensor twice as long there."""
    shape = list(values.shape)
    shape[dim] *= 2
    big = np.zeros(shape)
    index = [slice(None)] * values.ndim
    index[dim] = slice(None, None, 2)
    big[tuple(index)] = values
    return from_values(big, dtype)[tuple(index)]


def view(values, dtype, layout):
    """An ampc 2-D tensor holding values: contiguous ("n"), a transposed
    view ("t"), or every other column of a wider tensor ("s")."""
    if layout == "t":
        return from_values(values.T.copy(), dtype).transpose(0, 1)
    if layout == "s":
        return every_other(values, 1, dtype)
    return from_values(values, dtype)


# ----------------------------------------------------------------------------
# GEMM through matmul: sizes that fill no tile, every transpose

GEMM_SIZES = [(1, 1, 1), (7, 33, 65), (33, 7, 127), (65, 127, 1),
              (127, 65, 33)]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_gemm_sizes_and_transposes(cpu_level, dtype, rng):
    for m, k, n in GEMM_SIZES:
        for la in "nts":
            for lb in "nts":
                a = rand_values((m, k), dtype, rng, -2.0, 2.0)
                b = rand_values((k, n), dtype, rng, -2.0, 2.0)
                out = C.matmul(view(a, dtype, la), view(b, dtype, lb))
                assert out.dtype.name == dtype and out.is_contiguous()
                close(out, a @ b, dtype, k, f"{m}x{k}x{n} {la}{lb}: ")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_gemm_blocks_and_threads(cpu_level, dtype, rng):
    """K longer than one packed block (float32 partial sums, rounded once),
    N wider than one column block, and products big enough to be split
    between threads."""
    for m, k, n in [(9, 700, 20), (5, 3, 2100), (70, 300, 130),
                    (130, 64, 90)]:
        (a, b), (ta, tb) = tensors(rng, dtype, (m, k), (k, n))
        close(C.matmul(ta, tb), a @ b, dtype, k, f"{m}x{k}x{n}: ")


def test_gemm_rounds_once(cpu_level, rng):
    """bfloat16 sums of 600 terms carry no rounding before the last: every
    product and partial sum of these values is exact in float32, so the
    result is the exact sum rounded once to bfloat16."""
    k = 600
    a = rng.integers(-8, 9, size=(3, k)).astype(np.float64)
    b = rng.integers(-8, 9, size=(k, 5)).astype(np.float64) / 64.0
    out = C.matmul(from_values(a, "bfloat16"), from_values(b, "bfloat16"))
    np.testing.assert_array_equal(to64(out), ref.round_to(a @ b, "bfloat16"))


# ----------------------------------------------------------------------------
# matmul: torch.matmul's shape rules

MATMUL_SHAPES = [((7,), (7,)), ((7,), (7, 3)), ((5, 7), (7,)),
                 ((2, 5, 7), (2, 7, 3)), ((2, 1, 5, 3), (4, 3, 2)),
                 ((7,), (2, 7, 3)), ((2, 3, 7), (7,)), ((1, 3), (3, 1)),
                 ((3, 4, 1, 5), (5, 2)), ((0, 3), (3, 4)), ((3, 0), (0, 4))]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_matmul_shapes(cpu_level, dtype, rng):
    for sa, sb in MATMUL_SHAPES:
        (a, b), (ta, tb) = tensors(rng, dtype, sa, sb)
        out = C.matmul(ta, tb)
        expected = ref.matmul(a, b)
        assert tuple(out.shape) == expected.shape, (sa, sb)
        close(out, expected, dtype, sa[-1], f"{sa} @ {sb}: ")


def test_matmul_strided_batches(cpu_level, rng):
    """Batch dimensions that do not collapse, a broadcast operand, and
    transposed batched views."""
    a = rand_values((3, 4, 6, 5), "float32", rng)
    b = rand_values((4, 5, 2), "float32", rng)
    ta = from_values(a.transpose(1, 0, 3, 2).copy(), "float32") \
        .transpose(0, 1).transpose(2, 3)
    tb = from_values(b, "float32")
    close(C.matmul(ta, tb), a @ b, "float32", 5)
    close(C.matmul(every_other(a, 1), tb), a @ b, "float32", 5)
    # many small products at once: split between threads by product
    (a, b), (ta, tb) = tensors(rng, "float32", (8, 40, 50), (50, 60))
    close(C.matmul(ta, tb), a @ b, "float32", 50)


# ----------------------------------------------------------------------------
# linear

LINEAR_CASES = [((1, 33), 7), ((7, 1), 65), ((2, 3, 33), 7), ((33,), 1),
                ((5, 7), 33), ((0, 7), 3), ((4, 0), 3), ((17, 300), 50)]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_linear(cpu_level, dtype, rng):
    for xs, out_f in LINEAR_CASES:
        for bias in (False, True):
            for relu in (False, True):
                shapes = [xs, (out_f, xs[-1])] + ([(out_f,)] if bias else [])
                vals, ts = tensors(rng, dtype, *shapes)
                out = C.linear(*ts, relu=relu)
                expected = ref.linear(*vals, relu=relu)
                assert tuple(out.shape) == expected.shape
                close(out, expected, dtype, xs[-1] + 1,
                      f"{xs} -> {out_f} bias={bias} relu={relu}: ")


def test_linear_strided_input(cpu_level, rng):
    (x, w, b), (tx, tw, tb) = tensors(rng, "float32", (6, 9), (5, 9), (5,))
    close(C.linear(every_other(x, 1), tw, tb), ref.linear(x, w, b),
          "float32", 9)
    wt = from_values(w.T.copy(), "float32").transpose(0, 1)
    close(C.linear(tx, wt, tb), ref.linear(x, w, b), "float32", 9)
    big = np.zeros((10, 18))
    big[::2, ::2] = w
    w2 = from_values(big, "float32")[::2, ::2]     # strided both ways
    close(C.linear(tx, w2, tb), ref.linear(x, w, b), "float32", 9)
    (go,), (tgo,) = tensors(rng, "float32", (6, 5))
    got = C.linear_backward(tgo, every_other(x, 1), w2, (True, True, True))
    for g, e in zip(got, ref.linear_backward(go, x, w)):
        close(g, e, "float32", 9)


def test_linear_relu_keeps_nan(cpu_level):
    x = from_values(np.array([[np.nan, 1.0], [-1.0, -2.0]]), "float32")
    w = from_values(np.eye(2), "float32")
    out = to64(C.linear(x, w, relu=True))
    assert np.isnan(out[0]).all()           # NaN * 0 is NaN too
    assert (out[1] == 0.0).all()


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_linear_backward(cpu_level, dtype, rng):
    for xs, out_f in LINEAR_CASES:
        (x, w, go), (tx, tw, tgo) = tensors(
            rng, dtype, xs, (out_f, xs[-1]), xs[:-1] + (out_f,))
        gx, gw, gb = C.linear_backward(tgo, tx, tw, (True, True, True))
        ex, ew, eb = ref.linear_backward(go, x, w)
        rows = int(np.prod(xs[:-1]))
        close(gx, ex, dtype, out_f, f"grad_x {xs}: ")
        close(gw, ew, dtype, rows, f"grad_w {xs}: ")
        close(gb, eb, dtype, rows, f"grad_b {xs}: ")


def test_linear_backward_needs(cpu_level, rng):
    _, (tx, tw, tgo) = tensors(rng, "float32", (3, 4), (5, 4), (3, 5))
    for needs in [(True, False, False), (False, True, False),
                  (False, False, True), (False, False, False)]:
        got = C.linear_backward(tgo, tx, tw, needs)
        assert [g is not None for g in got] == list(needs)


def test_linear_backward_finite_differences(rng):
    """The backward GEMMs against central differences of the forward."""
    x, w, b = [ref.round_to(rng.uniform(-1, 1, s), "float32")
               for s in [(3, 2, 5), (4, 5), (4,)]]
    go = ref.round_to(rng.uniform(0.5, 1.5, (3, 2, 4)), "float32")
    expected = numeric_grad(lambda *v: ref.linear(*v), [x, w, b], go)
    got = C.linear_backward(from_values(go, "float32"),
                            from_values(x, "float32"),
                            from_values(w, "float32"), (True, True, True))
    for g, e in zip(got, expected):
        assert_close(g, e, "float32", rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# conv2d

# (N, C, H, W), (OC, KH, KW), stride, padding, dilation
CONV_CASES = [
    ((1, 1, 5, 7), (1, 3, 3), (1, 1), (0, 0), (1, 1)),
    ((2, 3, 7, 5), (7, 3, 3), (2, 2), (1, 1), (1, 1)),
    ((3, 33, 1, 1), (7, 1, 1), (1, 1), (0, 0), (1, 1)),
    ((2, 3, 1, 1), (5, 3, 3), (1, 1), (2, 2), (2, 2)),
    ((2, 3, 9, 8), (5, 3, 3), (1, 1), (2, 2), (2, 2)),
    ((1, 7, 8, 7), (3, 2, 3), (2, 2), (0, 0), (1, 1)),
    ((2, 5, 6, 6), (3, 1, 1), (2, 2), (0, 0), (1, 1)),
    ((2, 3, 7, 9), (4, 3, 2), (1, 2), (2, 0), (1, 2)),
    ((17, 7, 9, 9), (33, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 16, 20, 20), (33, 3, 3), (1, 1), (1, 1), (1, 1)),
    # more output channels than one A block (mc) and K = 288 deeper than
    # one K block (kc) at every level: the weights packed once per call
    # are read block by block
    ((2, 32, 6, 5), (260, 3, 3), (1, 1), (1, 1), (1, 1)),
]


def conv_tensors(rng, dtype, case, bias=True):
    xs, (oc, kh, kw), st, pad, dil = case
    shapes = [xs, (oc, xs[1], kh, kw)] + ([(oc,)] if bias else [])
    return tensors(rng, dtype, *shapes)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_conv2d(cpu_level, dtype, rng):
    for i, case in enumerate(CONV_CASES):
        _, (_, kh, kw), st, pad, dil = case
        bias, relu = i % 2 == 0, i % 3 == 0
        vals, ts = conv_tensors(rng, dtype, case, bias)
        out = C.conv2d(*ts, stride=st, padding=pad, dilation=dil, relu=relu)
        expected = ref.conv2d(*vals, stride=st, padding=pad, dilation=dil,
                              relu=relu)
        assert tuple(out.shape) == expected.shape
        close(out, expected, dtype, case[0][1] * kh * kw + 1,
              f"case {i}: ")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_conv2d_backward(cpu_level, dtype, rng):
    for i, case in enumerate(CONV_CASES):
        xs, (oc, kh, kw), st, pad, dil = case
        (x, w), (tx, tw) = conv_tensors(rng, dtype, case, bias=False)
        oh, ow = ref.conv2d(x, w, stride=st, padding=pad,
                            dilation=dil).shape[2:]
        (go,), (tgo,) = tensors(rng, dtype, (xs[0], oc, oh, ow))
        gx, gw, gb = C.conv2d_backward(tgo, tx, tw, st, pad, dil,
                                       (True, True, True))
        ex, ew, eb = ref.conv2d_backward(go, x, w, st, pad, dil)
        close(gx, ex, dtype, oc * kh * kw, f"grad_x case {i}: ")
        close(gw, ew, dtype, xs[0] * oh * ow, f"grad_w case {i}: ")
        close(gb, eb, dtype, xs[0] * oh * ow, f"grad_b case {i}: ")


def test_conv2d_backward_needs(cpu_level, rng):
    (x, w), (tx, tw) = conv_tensors(rng, "float32", CONV_CASES[1], False)
    (go,), (tgo,) = tensors(rng, "float32", (2, 7, 4, 3))
    ex, ew, eb = ref.conv2d_backward(go, x, w, (2, 2), (1, 1), (1, 1))
    for needs in [(True, False, False), (False, True, False),
                  (False, False, True), (False, True, True)]:
        got = C.conv2d_backward(tgo, tx, tw, 2, 1, 1, needs)
        assert [g is not None for g in got] == list(needs)
        for g, e in zip(got, (ex, ew, eb)):
            if g is not None:
                close(g, e, "float32", 100)


@pytest.mark.parametrize("case", [CONV_CASES[1], CONV_CASES[7]])
def test_conv2d_backward_finite_differences(case, rng):
    """The backward kernels (GEMM + col2im, and the batch-summed weight
    GEMM) against central differences of the forward."""
    xs, (oc, kh, kw), st, pad, dil = case
    x, w, b = [ref.round_to(rng.uniform(-1, 1, s), "float32")
               for s in [xs, (oc, xs[1], kh, kw), (oc,)]]

    def fwd(x, w, b):
        return ref.conv2d(x, w, b, st, pad, dil)

    go = ref.round_to(rng.uniform(0.5, 1.5, fwd(x, w, b).shape), "float32")
    expected = numeric_grad(fwd, [x, w, b], go)
    got = C.conv2d_backward(from_values(go, "float32"),
                            from_values(x, "float32"),
                            from_values(w, "float32"), st, pad, dil,
                            (True, True, True))
    for g, e in zip(got, expected):
        assert_close(g, e, "float32", rtol=1e-4, atol=1e-5)


def test_conv2d_noncontiguous_and_int_params(cpu_level, rng):
    (x, w, b), (tx, tw, tb) = conv_tensors(rng, "float32", CONV_CASES[1])
    out = C.conv2d(every_other(x, 3), tw, tb, 2, 1, 1)
    close(out, ref.conv2d(x, w, b, (2, 2), (1, 1)), "float32", 27)


# ----------------------------------------------------------------------------
# against torch, where installed


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_against_torch(cpu_level, dtype, rng):
    torch = torch_or_skip()
    F = torch.nn.functional
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]

    def same(a, t):
        e = t.detach().to(torch.float64).numpy()
        scale = max(1.0, float(np.abs(e).max(initial=0.0)))
        np.testing.assert_allclose(to64(a), e, rtol=tol, atol=tol * scale)

    _, (x, w, b) = tensors(rng, dtype, (9, 33), (7, 33), (7,))
    tx, tw, tb = (to_torch(torch, t).requires_grad_() for t in (x, w, b))
    y = F.linear(tx, tw, tb)
    same(C.linear(x, w, b), y)
    (go,), (tgo,) = tensors(rng, dtype, (9, 7))
    y.backward(to_torch(torch, tgo))
    for got, t in zip(C.linear_backward(tgo, x, w, (True, True, True)),
                      (tx, tw, tb)):
        same(got, t.grad)

    _, (a, m) = tensors(rng, dtype, (2, 5, 33), (33, 6))
    same(C.matmul(a, m.transpose(0, 1).contiguous().transpose(0, 1)),
         torch.matmul(to_torch(torch, a), to_torch(torch, m)))

    _, (x, w, b) = tensors(rng, dtype, (2, 3, 9, 8), (5, 3, 3, 3), (5,))
    tx, tw, tb = (to_torch(torch, t).requires_grad_() for t in (x, w, b))
    y = F.conv2d(tx, tw, tb, stride=(1, 2), padding=1, dilation=(2, 1))
    same(C.conv2d(x, w, b, (1, 2), 1, (2, 1)), y)
    (go,), (tgo,) = tensors(rng, dtype, tuple(y.shape))
    y.backward(to_torch(torch, tgo))
    got = C.conv2d_backward(tgo, x, w, (1, 2), 1, (2, 1), (True, True, True))
    for g, t in zip(got, (tx, tw, tb)):
        same(g, t.grad)


# ----------------------------------------------------------------------------
# dispatch


def test_kernel_variant(cpu_level):
    for slot in ("gemm", "conv2d_fwd", "conv2d_bwd_input",
                 "conv2d_bwd_weight", "peak_flops"):
        assert C.kernel_variant(slot) == cpu_level


def test_peak_flops(cpu_level):
    fma = C._peak_flops(0.01)
    assert fma > 1e8
    bf16 = C._peak_flops(0.01, "bf16_dot")
    has = ampc.backends.cpu.features().get("avx512bf16", False)
    assert (bf16 > 1e8) == (cpu_level == "avx512" and has)
    with pytest.raises(ValueError, match="kind must be"):
        C._peak_flops(0.01, "fp64")


# ----------------------------------------------------------------------------
# argument errors: one test each


def f32(*shape):
    return ampc.zeros(*shape)


def test_error_conv2d_3d_input():
    with pytest.raises(RuntimeError,
                       match=r"conv2d\(\): input must be 4-D \(N, C, H, W\)"
                             r", got 3-D"):
        C.conv2d(f32(3, 8, 8), f32(4, 3, 3, 3))


def test_error_conv2d_weight_not_4d():
    with pytest.raises(RuntimeError,
                       match=r"conv2d\(\): weight must be 4-D \(OC, C, KH, "
                             r"KW\), got 3-D"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3))


def test_error_conv2d_channels():
    msg = ("conv2d(): expected input to have 3 channels (weight has shape "
           "[32, 3, 3, 3]), got 4 channels")
    with pytest.raises(RuntimeError) as e:
        C.conv2d(f32(2, 4, 8, 8), f32(32, 3, 3, 3))
    assert str(e.value) == msg


def test_error_conv2d_dtype_mismatch():
    with pytest.raises(RuntimeError,
                       match=r"conv2d\(\): expected weight to have dtype "
                             r"float32 \(the input's\), got bfloat16"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3).bfloat16())


def test_error_conv2d_bias_shape():
    with pytest.raises(RuntimeError,
                       match=r"expected bias to have shape \[4\]"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3), f32(5))


def test_error_conv2d_stride():
    with pytest.raises(RuntimeError,
                       match=r"conv2d\(\): stride must be positive, got "
                             r"\(0, 1\)"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3), stride=(0, 1))


def test_error_conv2d_padding():
    with pytest.raises(RuntimeError, match=r"padding must be non-negative"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3), padding=-1)


def test_error_conv2d_dilation():
    with pytest.raises(RuntimeError, match=r"dilation must be positive"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3), dilation=(1, 0))


def test_error_conv2d_param_type():
    with pytest.raises(TypeError,
                       match=r"conv2d\(\): stride must be an int or a pair "
                             r"of ints, got 'same'"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3), stride="same")
    with pytest.raises(TypeError, match=r"padding must be an int or a pair"):
        C.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3), padding=(1, 2, 3))


def test_error_conv2d_output_too_small():
    with pytest.raises(RuntimeError,
                       match=r"conv2d\(\): output size is too small"):
        C.conv2d(f32(1, 3, 2, 2), f32(4, 3, 3, 3))


def test_error_conv2d_backward_grad_shape():
    with pytest.raises(RuntimeError,
                       match=r"conv2d_backward\(\): expected grad_out to "
                             r"have shape \[1, 4, 6, 6\]"):
        C.conv2d_backward(f32(1, 4, 5, 5), f32(1, 3, 8, 8),
                          f32(4, 3, 3, 3), 1, 0, 1, (True, True, True))


def test_error_needs():
    with pytest.raises(TypeError, match=r"needs must be a tuple of 3 bools"):
        C.conv2d_backward(f32(1, 4, 6, 6), f32(1, 3, 8, 8),
                          f32(4, 3, 3, 3), 1, 0, 1, (True,))
    with pytest.raises(TypeError, match=r"linear_backward\(\): needs"):
        C.linear_backward(f32(2, 4), f32(2, 3), f32(4, 3), None)


def test_error_linear_dtype_mismatch():
    msg = ("linear(): expected weight to have dtype float32 (the input's), "
           "got float16")
    with pytest.raises(RuntimeError) as e:
        C.linear(f32(2, 3), f32(4, 3).half())
    assert str(e.value) == msg


def test_error_linear_features():
    with pytest.raises(RuntimeError,
                       match=r"linear\(\): input has 5 features .* weight "
                             r"has shape \[4, 3\]"):
        C.linear(f32(2, 5), f32(4, 3))


def test_error_linear_weight_ndim():
    with pytest.raises(RuntimeError,
                       match=r"linear\(\): weight must be 2-D"):
        C.linear(f32(2, 3), f32(3))


def test_error_linear_bias():
    with pytest.raises(RuntimeError,
                       match=r"linear\(\): expected bias to have shape \[4\]"):
        C.linear(f32(2, 3), f32(4, 3), f32(3))


def test_error_linear_backward_grad_shape():
    with pytest.raises(RuntimeError,
                       match=r"linear_backward\(\): expected grad_out to "
                             r"have shape \[2, 4\]"):
        C.linear_backward(f32(2, 5), f32(2, 3), f32(4, 3),
                          (True, True, True))


def test_error_matmul_0d():
    with pytest.raises(RuntimeError,
                       match=r"matmul\(\): both arguments to matmul need to "
                             r"be at least 1D, but they are 0D and 2D"):
        C.matmul(ampc.tensor(1.0), f32(2, 2))


def test_error_matmul_sizes():
    with pytest.raises(RuntimeError,
                       match=r"matmul\(\): input \(shape \[2, 3\]\) and "
                             r"other \(shape \[4, 5\]\) cannot be multiplied"):
        C.matmul(f32(2, 3), f32(4, 5))


def test_error_matmul_batch():
    with pytest.raises(RuntimeError, match=r"do not broadcast"):
        C.matmul(f32(2, 3, 4), f32(3, 4, 5))


def test_error_not_float():
    with pytest.raises(RuntimeError,
                       match=r"matmul\(\): expected input to be a floating "
                             r"point tensor .* got int64"):
        C.matmul(ampc.zeros(2, 2, dtype=ampc.int64), f32(2, 2))


def test_error_not_tensor():
    with pytest.raises(TypeError,
                       match=r"linear\(\): argument 'weight' must be a "
                             r"Tensor, not list"):
        C.linear(f32(2, 3), [[1.0, 2.0, 3.0]])
