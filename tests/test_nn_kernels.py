"""The NN kernels of ampc._C (relu_backward, max_pool2d, softmax and
log_softmax, dropout; the losses are in test_nn_loss_kernels.py), forward
and backward, for every float dtype on every CPU level: against the
float64 NumPy oracle (reference.py) on random data of odd sizes, gradients
also against central differences of the oracle, and against torch where it
is installed.  Then the error cases of every NN kernel, one test each.
"""
import numpy as np
import pytest

import ampc
import reference as ref
from helpers import (
    FLOAT_NAMES, assert_close, from_values, numeric_grad, rand_values, to64,
    torch_or_skip,
)

C = ampc._C
NAN, INF = float("nan"), float("inf")


def tensor(values, dtype):
    return from_values(np.asarray(values, dtype=np.float64), dtype)


def longs(values):
    return from_values(np.asarray(values, dtype=np.float64), "int64")


def tol(dtype, k=1):
    return dict(zip(("rtol", "atol"), ref.tolerance(dtype, k)))


def check_variant(slot, level):
    """The kernel that ran is the level's own (nll_loss is ref-only)."""
    want = "ref" if slot.startswith("nll_loss") else level
    assert C.kernel_variant(slot) == want


def torch_tensor(torch, values, dtype):
    return torch.tensor(np.asarray(values, dtype=np.float64)).to(
        getattr(torch, dtype))


def from_torch(t):
    return t.detach().to(dtype=__import__("torch").float64).numpy()


# ----------------------------------------------------------------------------
# relu_backward


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape", [(1,), (3, 7), (2, 33, 5), (300, 301)])
def test_relu_backward(cpu_level, dtype, shape, rng):
    out = rand_values(shape, dtype, rng)
    out.flat[::5] = 0.0
    out.flat[1::7] = -0.0
    out.flat[2::11] = NAN
    out.flat[3::13] = -INF
    out.flat[4::13] = INF
    grad = rand_values(shape, dtype, rng)
    got = C.relu_backward(tensor(grad, dtype), tensor(out, dtype))
    check_variant("relu_bwd", cpu_level)
    assert got.dtype.name == dtype and tuple(got.shape) == shape
    assert np.array_equal(to64(got), ref.relu_backward(grad, out))


def test_relu_backward_strided(cpu_level):
    out = np.arange(-6.0, 6.0).reshape(3, 4)
    grad = np.arange(12.0).reshape(3, 4) + 1
    got = C.relu_backward(tensor(grad.T.copy(), "float32").t(),
                          tensor(out.T.copy(), "float32").t())
    assert np.array_equal(to64(got), ref.relu_backward(grad, out))


def test_relu_backward_torch(rng):
    torch = torch_or_skip()
    for dtype in FLOAT_NAMES:
        out = rand_values((7, 33), dtype, rng)
        out[0, :3] = [0.0, NAN, -0.0]
        grad = rand_values((7, 33), dtype, rng)
        want = torch.ops.aten.threshold_backward(
            torch_tensor(torch, grad, dtype), torch_tensor(torch, out, dtype),
            0)
        got = C.relu_backward(tensor(grad, dtype), tensor(out, dtype))
        assert np.array_equal(to64(got), from_torch(want))


# ----------------------------------------------------------------------------
# max_pool2d

# (input shape, kernel, stride, padding, dilation, ceil_mode)
POOL_CASES = [
    ((1, 1, 1, 1), (1, 1), None, (0, 0), (1, 1), False),
    ((17, 3, 5, 7), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((2, 7, 8, 8), (2, 2), None, (0, 0), (1, 1), False),
    ((1, 33, 7, 5), (3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 5, 7), (3, 2), (1, 2), (1, 1), (2, 1), True),
    ((2, 3, 9, 9), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ((1, 1, 1, 1), (2, 2), (2, 2), (1, 1), (1, 1), True),
    ((8, 16, 32, 32), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((4, 16, 24, 24), (3, 3), (1, 1), (1, 1), (1, 1), False),
]


def pool_input(shape, dtype, rng, specials=True):
    x = rand_values(shape, dtype, rng)
    if specials and x.size > 8:
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, 3, replace=False)] = NAN
        flat[rng.choice(flat.size, 3, replace=False)] = -INF
    return x


def run_pool(x, dtype, case):
    shape, k, s, p, d, ceil = case
    return C.max_pool2d(tensor(x, dtype), k, s, p, d, ceil)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d(cpu_level, dtype, case, rng):
    x = pool_input(case[0], dtype, rng)
    y, idx = run_pool(x, dtype, case)
    check_variant("max_pool2d_fwd", cpu_level)
    want, want_idx = ref.max_pool2d(x, *case[1:])
    assert y.dtype.name == dtype and idx.dtype is ampc.int64
    assert np.array_equal(to64(y), want, equal_nan=True)
    assert np.array_equal(to64(idx), want_idx)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d_backward(cpu_level, dtype, case, rng):
    x = pool_input(case[0], dtype, rng, specials=False)
    y, idx = run_pool(x, dtype, case)
    g = rand_values(tuple(y.shape), dtype, rng)
    got = C.max_pool2d_backward(tensor(g, dtype), idx, case[0])
    check_variant("max_pool2d_bwd", cpu_level)
    assert tuple(got.shape) == case[0] and got.dtype.name == dtype
    want = ref.max_pool2d_backward(g, to64(idx).astype(np.int64), case[0])
    k = case[1][0] * case[1][1]
    assert_close(got, want, dtype, **tol(dtype, k))


def test_max_pool2d_strided_input(cpu_level, rng):
    x = rand_values((2, 3, 6, 8), "float32", rng)
    t = tensor(np.swapaxes(x, 2, 3).copy(), "float32").transpose(2, 3)
    y, idx = C.max_pool2d(t, 2, 2)
    want, want_idx = ref.max_pool2d(x, (2, 2))
    assert np.array_equal(to64(y), want)
    assert np.array_equal(to64(idx), want_idx)


def test_max_pool2d_gradient_by_differences(rng):
    """Away from ties the max picks one element, whose gradient is 1."""
    x = rng.permutation(3 * 49).reshape(1, 3, 7, 7) * 0.25
    g = ref.round_to(rng.uniform(0.5, 1.5, (1, 3, 4, 4)), "float32")
    case = ((3, 3), (2, 2), (1, 1), (1, 1), False)
    y, idx = C.max_pool2d(tensor(x, "float32"), *case)
    got = C.max_pool2d_backward(tensor(g, "float32"), idx, x.shape)
    (want,) = numeric_grad(lambda v: ref.max_pool2d(v, *case)[0], [x], g,
                           eps=1e-4)
    assert_close(got, want, "float32", rtol=1e-6, atol=1e-6)


def test_max_pool2d_torch(rng):
    """Values and indices as torch's in each dtype; the gradient as torch's
    float32 one (torch adds overlapping float16/bfloat16 gradients in the
    low dtype, ampc in float32)."""
    torch = torch_or_skip()
    F = torch.nn.functional
    for dtype in FLOAT_NAMES:
        for case in POOL_CASES:
            shape, k, s, p, d, ceil = case
            x = pool_input(shape, dtype, rng)
            yt, it = F.max_pool2d(torch_tensor(torch, x, dtype), k, s or k, p,
                                  d, ceil, return_indices=True)
            y, idx = run_pool(x, dtype, case)
            assert np.array_equal(to64(y), from_torch(yt), equal_nan=True)
            assert np.array_equal(to64(idx), it.numpy())
            x32 = torch_tensor(torch, x, "float32").requires_grad_()
            y32 = F.max_pool2d(x32, k, s or k, p, d, ceil)
            g = rand_values(tuple(yt.shape), dtype, rng)
            y32.backward(torch_tensor(torch, g, "float32"))
            got = C.max_pool2d_backward(tensor(g, dtype), idx, shape)
            assert_close(got, from_torch(x32.grad), dtype, **tol(dtype, 9))


# ----------------------------------------------------------------------------
# softmax and log_softmax

# (shape, dim): rows (dim last), columns (dim inside), rows longer than one
# block of the kernel (4096), columns longer than a fold (64), a 0-d tensor;
# narrow rows of one lane step (16), a step and a tail (17, 33), and the
# widths where the long lanes begin (127, 128)
SOFTMAX_CASES = [
    ((1,), 0), ((3, 7), 1), ((7, 3), 0), ((2, 33, 5), 1), ((17, 1000), -1),
    ((2, 5000), 1), ((3, 70, 2), 1), ((), 0), ((5, 1, 3), 1),
    ((4, 16), 1), ((5, 17), 1), ((3, 33), -1), ((3, 127), 1), ((2, 128), 1),
]


def softmax_fn(log):
    return (C.log_softmax, ref.log_softmax) if log else \
        (C.softmax, ref.softmax)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log"])
@pytest.mark.parametrize("case", SOFTMAX_CASES)
def test_softmax(cpu_level, dtype, log, case, rng):
    shape, dim = case
    x = rand_values(shape, dtype, rng, -8.0, 8.0)
    fn, ref_fn = softmax_fn(log)
    y = fn(tensor(x, dtype), dim)
    check_variant("softmax_fwd", cpu_level)
    assert y.dtype.name == dtype and tuple(y.shape) == shape
    r = shape[dim] if shape else 1
    assert_close(y, ref_fn(x, dim if shape else None), dtype, **tol(dtype, r))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log"])
@pytest.mark.parametrize("case", SOFTMAX_CASES)
def test_softmax_backward(cpu_level, dtype, log, case, rng):
    shape, dim = case
    x = rand_values(shape, dtype, rng, -4.0, 4.0)
    fn, _ = softmax_fn(log)
    y = fn(tensor(x, dtype), dim)
    g = rand_values(shape, dtype, rng)
    bwd = C.log_softmax_backward if log else C.softmax_backward
    got = bwd(tensor(g, dtype), y, dim)
    check_variant("softmax_bwd", cpu_level)
    ref_bwd = ref.log_softmax_backward if log else ref.softmax_backward
    want = ref_bwd(g, to64(y), dim if shape else None)
    r = shape[dim] if shape else 1
    # softmax's y * (g - dot) cancels: scale the tolerance by |g| + |dot|
    rtol, atol = ref.tolerance(dtype, r)
    assert_close(got, want, dtype, rtol=rtol, atol=atol * 8)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log"])
@pytest.mark.parametrize("case", [((3, 7), 1), ((4, 5, 3), 1), ((6,), 0)])
def test_softmax_gradient_by_differences(log, case, rng):
    shape, dim = case
    x = ref.round_to(rng.uniform(-2, 2, shape), "float32")
    g = ref.round_to(rng.uniform(0.5, 1.5, shape), "float32")
    fn, ref_fn = softmax_fn(log)
    y = fn(tensor(x, "float32"), dim)
    bwd = C.log_softmax_backward if log else C.softmax_backward
    got = bwd(tensor(g, "float32"), y, dim)
    (want,) = numeric_grad(lambda v: ref_fn(v, dim), [x], g)
    assert_close(got, want, "float32", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("xdt", FLOAT_NAMES)
@pytest.mark.parametrize("ydt", FLOAT_NAMES)
def test_softmax_dtype_argument(cpu_level, xdt, ydt, rng):
    x = rand_values((5, 33), xdt, rng)
    for log in (False, True):
        fn, ref_fn = softmax_fn(log)
        y = fn(tensor(x, xdt), 1, getattr(ampc, ydt))
        assert y.dtype.name == ydt
        assert_close(y, ref_fn(x, 1), ydt, **tol(ydt, 33))


def test_softmax_dtype_from_int64():
    y = C.softmax(longs([[1, 2, 3]]), 1, ampc.float32)
    assert_close(y, ref.softmax(np.array([[1.0, 2, 3]]), 1), "float32")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_softmax_huge_logits(cpu_level, dtype):
    big = 65504.0 if dtype == "float16" else 1e4
    x = np.array([[big, -big, 0.0, 5.0], [-big, -big, -big, -big],
                  [big, big, -big, 1.0], [0.0, 0.0, 0.0, 0.0]])
    x = ref.round_to(x, dtype)
    for log in (False, True):
        fn, ref_fn = softmax_fn(log)
        y = fn(tensor(x, dtype), 1)
        want = ref.round_to(ref_fn(x, 1), dtype)
        assert np.isfinite(to64(y)).sum() == np.isfinite(want).sum()
        assert_close(y, want, dtype, **tol(dtype, 4))


def test_softmax_special_rows(cpu_level):
    x = np.array([[-INF, -INF, -INF], [1.0, NAN, 2.0], [INF, 0.0, 1.0],
                  [-INF, 0.0, -INF]])
    for log in (False, True):
        fn, ref_fn = softmax_fn(log)
        y = to64(fn(tensor(x, "float32"), 1))
        with np.errstate(invalid="ignore"):
            want = ref_fn(x, 1)
        assert np.array_equal(np.isnan(y), np.isnan(want))
        assert_close(y, want, "float32")


@pytest.mark.parametrize("width", [16, 17, 33, 127, 128, 200])
def test_softmax_special_values_in_lanes(cpu_level, width, rng):
    """NaN, +inf and -inf at the first, a middle, the last and the
    repeated tail positions of the lane loops: the rows' NaNs and infinities
    are exactly the reference's."""
    base = rng.uniform(-4, 4, width)
    rows = []
    for at in sorted({0, width // 2, width - 16, width - 1}):
        for v in (NAN, INF, -INF):
            row = base.copy()
            row[at] = v
            rows.append(row)
    rows.append(np.full(width, -INF))
    x = ref.round_to(np.array(rows), "float32")
    for log in (False, True):
        fn, ref_fn = softmax_fn(log)
        y = to64(fn(tensor(x, "float32"), 1))
        check_variant("softmax_fwd", cpu_level)
        with np.errstate(invalid="ignore", over="ignore"):
            want = ref_fn(x, 1)
        assert np.array_equal(np.isnan(y), np.isnan(want))
        assert np.array_equal(np.isinf(y), np.isinf(want))
        assert_close(y, want, "float32", **tol("float32", width))


def test_softmax_torch(rng):
    torch = torch_or_skip()
    for dtype in FLOAT_NAMES:
        for shape, dim in SOFTMAX_CASES:
            x = rand_values(shape, dtype, rng, -6, 6)
            g = rand_values(shape, dtype, rng)
            r = shape[dim] if shape else 1
            for log in (False, True):
                fn, _ = softmax_fn(log)
                tfn = torch.log_softmax if log else torch.softmax
                xt = torch_tensor(torch, x, dtype).requires_grad_()
                yt = tfn(xt, dim)
                yt.backward(torch_tensor(torch, g, dtype))
                y = fn(tensor(x, dtype), dim)
                assert_close(y, from_torch(yt), dtype, **tol(dtype, 4 * r))
                bwd = C.log_softmax_backward if log else C.softmax_backward
                gx = bwd(tensor(g, dtype), y, dim)
                rtol, atol = ref.tolerance(dtype, 4 * r)
                assert_close(gx, from_torch(xt.grad), dtype, rtol=4 * rtol,
                             atol=16 * atol)


# ----------------------------------------------------------------------------
# dropout


def dropout_expected(x, mask, p, dtype):
    scale = np.float32(0.0 if p == 1 else 1.0 / (1.0 - p))
    return ref.round_to(np.float32(x) * mask * scale, dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("n", [1, 7, 33, 100003])
def test_dropout(cpu_level, dtype, p, n, rng):
    x = rand_values((n,), dtype, rng)
    y, mask = C.dropout(tensor(x, dtype), p)
    check_variant("masked_scale", cpu_level)
    assert mask.dtype is ampc.bool and y.dtype.name == dtype
    m = to64(mask)
    assert_close(y, dropout_expected(x, m, p, dtype), dtype)
    if p in (0.0, 1.0):
        assert m.all() if p == 0.0 else not m.any()
    elif n > 1000:
        assert abs(m.mean() - (1 - p)) < 0.01
    g = rand_values((n,), dtype, rng)
    gx = C.dropout_backward(tensor(g, dtype), mask, p)
    assert_close(gx, dropout_expected(g, m, p, dtype), dtype)


def test_dropout_generator_state():
    """dropout draws from the generator random_() uses and advances it the
    same way, so manual_seed makes it repeatable."""
    x = tensor(np.ones(101), "float32")
    ampc.manual_seed(7)
    _, m1 = C.dropout(x, 0.5)
    state = C.get_rng_state()
    assert state[1] == 104              # 101 elements, 4-aligned
    _, m2 = C.dropout(x, 0.5)
    ampc.manual_seed(7)
    _, m3 = C.dropout(x, 0.5)
    assert np.array_equal(to64(m1), to64(m3))
    assert not np.array_equal(to64(m1), to64(m2))
    ampc.manual_seed(7)
    b = C.random_(C.empty((101,), ampc.bool), "bernoulli", 0.5)
    assert np.array_equal(to64(b), to64(m1))


def test_dropout_eval_and_strided(rng):
    x = rand_values((6, 4), "float32", rng)
    before = C.get_rng_state()
    y, mask = C.dropout(tensor(x, "float32"), 0.5, False)
    assert C.get_rng_state() == before
    assert to64(mask).all() and np.array_equal(to64(y), x)
    y, mask = C.dropout(tensor(x.T.copy(), "float32").t(), 0.25)
    assert_close(y, dropout_expected(x, to64(mask), 0.25, "float32"),
                 "float32")


def test_dropout_torch_statistics(rng):
    """Same keep rate as torch's dropout, kept values scaled alike."""
    torch = torch_or_skip()
    x = rand_values((20000,), "float32", rng, 0.5, 1.5)
    yt = from_torch(torch.nn.functional.dropout(
        torch_tensor(torch, x, "float32"), 0.4))
    y = to64(C.dropout(tensor(x, "float32"), 0.4)[0])
    assert abs((y != 0).mean() - (yt != 0).mean()) < 0.02
    both = (y != 0) & (yt != 0)
    assert both.sum() > 1000
    assert_close(y[both], yt[both], "float32")


# ----------------------------------------------------------------------------
# errors, one test each


def f32(shape):
    return tensor(np.zeros(shape), "float32")


def test_relu_backward_shape_mismatch():
    with pytest.raises(RuntimeError, match=r"relu_backward\(\).*grad_output"
                                           r".*shape"):
        C.relu_backward(f32((2, 3)), f32((3, 2)))


def test_relu_backward_dtype_mismatch():
    with pytest.raises(RuntimeError, match="expected grad_output to have "
                                           "dtype float32"):
        C.relu_backward(tensor([1.0], "float16"), f32((1,)))


def test_relu_backward_int_dtype():
    with pytest.raises(RuntimeError, match="floating-point"):
        C.relu_backward(longs([1]), longs([1]))


def test_relu_backward_not_a_tensor():
    with pytest.raises(TypeError, match="'output' must be a Tensor"):
        C.relu_backward(f32((1,)), [1.0])


def test_max_pool2d_rank():
    with pytest.raises(RuntimeError, match=r"max_pool2d\(\): Expected 3D"):
        C.max_pool2d(f32((4, 4)), 2)


def test_max_pool2d_zero_channels():
    with pytest.raises(RuntimeError, match="non-zero C, H and W"):
        C.max_pool2d(f32((1, 0, 4, 4)), 2)


def test_max_pool2d_kernel_zero():
    with pytest.raises(RuntimeError, match="kernel_size must be greater"):
        C.max_pool2d(f32((1, 1, 4, 4)), 0)


def test_max_pool2d_stride_zero():
    with pytest.raises(RuntimeError, match="stride must be greater"):
        C.max_pool2d(f32((1, 1, 4, 4)), 2, 0)


def test_max_pool2d_dilation_zero():
    with pytest.raises(RuntimeError, match="dilation must be greater"):
        C.max_pool2d(f32((1, 1, 4, 4)), 2, 2, 0, 0)


def test_max_pool2d_negative_padding():
    with pytest.raises(RuntimeError, match="padding must be non-negative"):
        C.max_pool2d(f32((1, 1, 4, 4)), 2, 2, -1)


def test_max_pool2d_padding_over_half_kernel():
    with pytest.raises(RuntimeError, match="at most half of kernel_size"):
        C.max_pool2d(f32((1, 1, 9, 9)), 3, 1, 2)


def test_max_pool2d_output_too_small():
    with pytest.raises(RuntimeError, match="Output size is too small"):
        C.max_pool2d(f32((1, 1, 1, 1)), 2)


def test_max_pool2d_bad_kernel_type():
    with pytest.raises(TypeError, match="'kernel_size' must be an int or a "
                                        "tuple of two ints"):
        C.max_pool2d(f32((1, 1, 4, 4)), (2, 2, 2))


def test_max_pool2d_int_input():
    with pytest.raises(RuntimeError, match="floating-point"):
        C.max_pool2d(longs(np.zeros((1, 1, 4, 4))), 2)


def test_max_pool2d_backward_indices_dtype():
    with pytest.raises(RuntimeError, match="indices to have dtype int64"):
        C.max_pool2d_backward(f32((1, 1, 2, 2)), f32((1, 1, 2, 2)),
                              (1, 1, 4, 4))


def test_max_pool2d_backward_indices_shape():
    with pytest.raises(RuntimeError, match="indices to have the shape"):
        C.max_pool2d_backward(f32((1, 1, 2, 2)), longs(np.zeros((1, 1, 2))),
                              (1, 1, 4, 4))


def test_max_pool2d_backward_input_shape_rank():
    with pytest.raises(TypeError, match="input_shape must be a tuple of 4"):
        C.max_pool2d_backward(f32((1, 1, 2, 2)),
                              longs(np.zeros((1, 1, 2, 2))), (4, 4))


def test_max_pool2d_backward_input_shape_channels():
    with pytest.raises(RuntimeError, match="leading"):
        C.max_pool2d_backward(f32((1, 1, 2, 2)),
                              longs(np.zeros((1, 1, 2, 2))), (1, 2, 4, 4))


def test_max_pool2d_backward_index_out_of_range():
    idx = longs(np.array([0, 3, 16, 1]).reshape(1, 1, 2, 2))
    with pytest.raises(IndexError, match=r"indices must lie in \[0, 16\)"):
        C.max_pool2d_backward(f32((1, 1, 2, 2)), idx, (1, 1, 4, 4))


def test_max_pool2d_backward_negative_index():
    idx = longs(np.array([0, -1, 2, 1]).reshape(1, 1, 2, 2))
    with pytest.raises(IndexError, match="indices must lie in"):
        C.max_pool2d_backward(tensor(np.ones((1, 1, 2, 2)), "bfloat16"), idx,
                              (1, 1, 4, 4))


def test_softmax_dim_out_of_range():
    with pytest.raises(IndexError, match=r"softmax\(\): Dimension out of "
                                         "range"):
        C.softmax(f32((2, 3)), 2)


def test_softmax_dim_type():
    with pytest.raises(TypeError, match="'dim' must be an int"):
        C.log_softmax(f32((2, 3)), None)


def test_softmax_int_input():
    with pytest.raises(RuntimeError, match="floating-point"):
        C.softmax(longs([1, 2]), 0)


def test_softmax_int_dtype_argument():
    with pytest.raises(RuntimeError, match="dtype must be a floating-point"):
        C.softmax(f32((2,)), 0, ampc.int64)


def test_softmax_backward_shape_mismatch():
    with pytest.raises(RuntimeError, match=r"softmax_backward\(\).*shape"):
        C.softmax_backward(f32((2, 3)), f32((3, 2)), 1)


def test_log_softmax_backward_dtype_mismatch():
    with pytest.raises(RuntimeError, match="dtype float32"):
        C.log_softmax_backward(tensor([1.0], "bfloat16"), f32((1,)), 0)


def test_nll_loss_target_out_of_bounds():
    with pytest.raises(IndexError, match=r"^nll_loss\(\): Target 12 is out "
                                         r"of bounds \(C = 10\)\.$"):
        C.nll_loss(f32((2, 10)), longs([3, 12]))


def test_cross_entropy_negative_target():
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        C.cross_entropy(f32((2, 10)), longs([3, -1]))


def test_nll_loss_backward_target_out_of_bounds():
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        C.nll_loss_backward(tensor(1.0, "float32"), f32((1, 10)), longs([10]))


def test_nll_loss_float_target():
    with pytest.raises(RuntimeError, match="target to have dtype int64"):
        C.nll_loss(f32((2, 3)), f32((2,)))


def test_nll_loss_batch_mismatch():
    with pytest.raises(RuntimeError, match=r"Expected input batch_size \(2\) "
                                           "to match target"):
        C.nll_loss(f32((2, 3)), longs([0, 1, 2]))


def test_nll_loss_1d_needs_0d_target():
    with pytest.raises(RuntimeError, match="expects a 0-D target"):
        C.nll_loss(f32((3,)), longs([0]))


def test_nll_loss_input_rank():
    with pytest.raises(RuntimeError, match="should be 1D.*got 3D"):
        C.nll_loss(f32((2, 3, 4)), longs([0, 1]))


def test_cross_entropy_weight_shape():
    with pytest.raises(RuntimeError, match="for all 3 classes or no classes"):
        C.cross_entropy(f32((2, 3)), longs([0, 1]), f32((4,)))


def test_cross_entropy_weight_dtype():
    with pytest.raises(RuntimeError, match="expected weight to have dtype "
                                           r"float32 \(the input's\)"):
        C.cross_entropy(f32((2, 3)), longs([0, 1]),
                        tensor(np.ones(3), "float16"))


def test_cross_entropy_bad_reduction():
    with pytest.raises(ValueError, match="reduction must be 'none', 'mean' "
                                         "or 'sum', got 'avg'"):
        C.cross_entropy(f32((2, 3)), longs([0, 1]), None, "avg")


def test_cross_entropy_label_smoothing_range():
    with pytest.raises(RuntimeError, match="label_smoothing must be between"):
        C.cross_entropy(f32((2, 3)), longs([0, 1]), None, "mean", -100, 1.5)


def test_cross_entropy_backward_unreduced_grad_shape():
    _, lp = C.cross_entropy(f32((2, 3)), longs([0, 1]))
    with pytest.raises(RuntimeError, match="grad_output to have the shape"):
        C.cross_entropy_backward(f32((3,)), lp, longs([0, 1]), None, "none")


def test_cross_entropy_backward_reduced_grad_numel():
    _, lp = C.cross_entropy(f32((2, 3)), longs([0, 1]))
    with pytest.raises(RuntimeError, match="must have one element"):
        C.cross_entropy_backward(f32((2,)), lp, longs([0, 1]))


def test_nll_loss_backward_bad_total_weight():
    with pytest.raises(RuntimeError, match="total_weight must be a one-"):
        C.nll_loss_backward(tensor(1.0, "float32"), f32((2, 3)), longs([0, 1]),
                            None, "mean", -100, f32((2,)))


def test_mse_loss_shape_mismatch():
    with pytest.raises(RuntimeError, match=r"mse_loss\(\): expected target to"
                                           " have the shape"):
        C.mse_loss(f32((2, 3)), f32((3,)))


def test_mse_loss_dtype_mismatch():
    with pytest.raises(RuntimeError, match="target to have dtype float32"):
        C.mse_loss(f32((2,)), tensor([1.0, 2.0], "bfloat16"))


def test_mse_loss_backward_bad_reduction():
    with pytest.raises(ValueError, match="reduction must be"):
        C.mse_loss_backward(f32(()), f32((2,)), f32((2,)), "max")


def test_dropout_p_out_of_range():
    with pytest.raises(ValueError, match=r"dropout\(\): dropout probability "
                                         "has to be between 0 and 1, but got "
                                         "1.5"):
        C.dropout(f32((3,)), 1.5)


def test_dropout_p_nan():
    with pytest.raises(ValueError, match="between 0 and 1"):
        C.dropout(f32((3,)), NAN)


def test_dropout_backward_mask_dtype():
    with pytest.raises(RuntimeError, match="mask to have dtype bool"):
        C.dropout_backward(f32((3,)), f32((3,)), 0.5)


def test_exp_range(cpu_level):
    """The kernels' exp over its whole float32 range, through
    log_softmax_backward with a one-hot gradient: gx = onehot - exp(y)."""
    y = np.concatenate([np.linspace(-110.0, 88.7, 4001),
                        [88.72, -np.inf, np.inf, np.nan, 0.0]])
    y = ref.round_to(y, "float32")
    g = np.zeros_like(y)
    g[-1] = 1.0
    got = to64(C.log_softmax_backward(tensor(g, "float32"),
                                      tensor(y, "float32"), 0))
    with np.errstate(over="ignore"):
        want = g - np.exp(y)
    assert_close(got, want, "float32", rtol=4 * 2.0 ** -24, atol=2.0 ** -149)


def test_empty_batches(cpu_level):
    y, idx = C.max_pool2d(f32((0, 3, 4, 4)), 2)
    assert tuple(y.shape) == (0, 3, 2, 2) and tuple(idx.shape) == (0, 3, 2, 2)
    g = C.max_pool2d_backward(y, idx, (0, 3, 4, 4))
    assert tuple(g.shape) == (0, 3, 4, 4)
    assert tuple(C.softmax(f32((0, 5)), 1).shape) == (0, 5)
    assert tuple(C.log_softmax(f32((3, 0)), 1).shape) == (3, 0)
    loss, logp = C.cross_entropy(f32((0, 4)), longs(np.zeros(0)))
    assert np.isnan(to64(loss)) and tuple(logp.shape) == (0, 4)
    loss, logp = C.cross_entropy(f32((0, 4)), longs(np.zeros(0)), None, "sum")
    assert to64(loss) == 0.0
    g = C.cross_entropy_backward(tensor(1.0, "float32"), logp,
                                 longs(np.zeros(0)), None, "sum")
    assert tuple(g.shape) == (0, 4)
    y, mask = C.dropout(f32((0,)), 0.5)
    assert tuple(y.shape) == (0,) and tuple(mask.shape) == (0,)
