"""scatter_reduce / scatter_reduce_ and the legacy scatter_(reduce="add" or
"multiply") (ampc/_scatter.py, csrc/scatter_ops.c, csrc/cpu/ref/scatter.c,
cuda/scatter.cu, the rules of csrc/scatter_math.h): every reduce mode with
and without include_self, on every dtype, against a float64 NumPy loop on
random data with odd sizes and repeated indices; against torch (values,
NaN rules, gradients, second derivatives); gradients against finite
differences; layouts and the thread split; PyTorch's errors.  Tests that
take the ``device`` fixture run again on CUDA when there is a GPU.
"""
import math
import warnings

import numpy as np
import pytest

import ampc
import cuda_helpers
import reference as ref
from helpers import (
    assert_close, from_values, gradcheck, numeric_grad, rand_values, to64,
    torch_or_skip,
)

device = cuda_helpers.device        # the fixture: "cpu", then "cuda"
MODES = ("sum", "prod", "mean", "amax", "amin")
DTYPES = ("float32", "float16", "bfloat16", "int64", "bool")


def reference(base, dim, index, src, op, include_self, integer=False):
    """The definition, in float64 (Python ints for int64's floor mean): each
    scattered element gets self's value (with include_self) and its values
    in index order, reduced; NaN propagates through amax/amin."""
    out = np.array(base, dtype=np.float64)
    dim %= max(out.ndim, 1)
    groups = {}
    for pos in np.ndindex(*index.shape):
        at = list(pos)
        at[dim] = index[pos]
        groups.setdefault(tuple(at), []).append(src[pos])
    for at, vals in groups.items():
        vals = ([out[at]] if include_self else []) + list(vals)
        if op == "sum":
            r = math.fsum(vals)
        elif op == "prod":
            r = float(np.prod(vals))
        elif op == "mean":
            r = (math.floor(sum(int(v) for v in vals) / len(vals))
                 if integer else math.fsum(vals) / len(vals))
        elif any(np.isnan(vals)):
            r = np.nan
        else:
            r = max(vals) if op == "amax" else min(vals)
        out[at] = r
    return out


def random_case(rng, shape, dim, ishape, sshape, dtype, op):
    """(base, index, src) values: prod's float factors near 1 (no
    overflow), of either sign."""
    near_one = op == "prod" and dtype in ("float32", "float16", "bfloat16")
    low, high = (0.5, 1.5) if near_one else (-3, 3)
    base = rand_values(shape, dtype, rng, low, high)
    src = rand_values(sshape, dtype, rng, low, high)
    if near_one:
        src *= rng.choice([-1.0, 1.0], size=sshape)
    index = rng.integers(0, shape[dim], size=ishape)
    return base, index, src


def bool_reference(base, dim, index, src, op, include_self):
    """bool: sum and amax are "or", prod and amin "and"."""
    op = {"sum": "amax", "prod": "amin"}.get(op, op)
    return reference(base, dim, index, src, op, include_self)


# ----------------------------------------------------------------------------
# values


@pytest.mark.parametrize("op", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_mode_and_dtype_matches_numpy(op, dtype, device):
    """3-D self (5, 7, 3), index (4, 6, 2) but 9 long along dim (repeated
    indices), src larger than both: every dim (and -1), with and without
    include_self, out of place and in place."""
    if op == "mean" and dtype == "bool":
        pytest.skip("mean is not implemented for bool (as in PyTorch)")
    rng = np.random.default_rng(MODES.index(op) * 7 + DTYPES.index(dtype))
    for dim in (0, 1, 2, -1):
        for include_self in (True, False):
            shape, ishape = [5, 7, 3], [4, 6, 2]
            ishape[dim] = 9                  # longer than self along dim
            sshape = [max(a, b) + 1 for a, b in zip(ishape, shape)]
            base, index, src = random_case(rng, shape, dim, ishape, sshape,
                                           dtype, op)
            t = from_values(base, dtype).to(device)
            got = t.scatter_reduce(dim, ampc.tensor(index).to(device),
                                   from_values(src, dtype).to(device), op,
                                   include_self=include_self)
            if dtype == "bool":
                want = bool_reference(base, dim, index, src, op,
                                      include_self)
            else:
                want = reference(base, dim, index, src, op, include_self,
                                 integer=dtype == "int64")
            assert got.dtype is t.dtype and got.device == t.device
            assert_close(got.cpu(), want, dtype, k=12,
                         msg=f"{op} dim={dim} include_self={include_self}: ")
            # the in-place form writes the same values into self (on the
            # GPU a float sum or product is formed by atomics in the order
            # the threads arrive, so its last bits may differ run to run)
            t.scatter_reduce_(dim, ampc.tensor(index).to(device),
                              from_values(src, dtype).to(device), op,
                              include_self=include_self)
            if device == "cuda" and dtype.startswith(("float", "bfloat")) \
                    and op in ("sum", "mean", "prod"):
                assert_close(t.cpu(), to64(got.cpu()), dtype, k=4)
            else:
                np.testing.assert_array_equal(to64(t.cpu()),
                                              to64(got.cpu()))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_reductions_are_formed_in_float32(dtype, cpu_level):
    """2049 ones summed into one float16 element give 2049 (a float32 sum
    rounded once; one rounding per add would stop at 2048); mean divides
    the float32 sum; on every CPU level (the casts are the level's)."""
    dt = getattr(ampc, dtype)
    idx = ampc.zeros(2049, dtype=ampc.int64)
    ones = ampc.ones(2049, dtype=dt)
    got = ampc.zeros(2, dtype=dt).scatter_reduce(0, idx, ones, "sum")
    assert_close(got, [2048.0 if dtype == "bfloat16" else 2049.0, 0.0],
                 dtype)
    vals = np.array([1000.0, 0.2, 0.2])
    mean = ampc.zeros(1, dtype=dt).scatter_reduce(
        0, ampc.zeros(3, dtype=ampc.int64), from_values(vals, dtype),
        "mean", include_self=False)
    assert_close(mean, [ref.round_to(vals, dtype).astype(np.float32)
                        .sum(dtype=np.float32) / 3], dtype, rtol=0, atol=0)


def test_nan_rules_of_amax_and_amin_match_torch(device):
    torch = torch_or_skip()
    nan = float("nan")
    base = [1.0, 2.0, nan, 4.0, -0.0, 0.0]
    idx = [0, 0, 1, 1, 2, 2, 3, 4, 5]
    src = [nan, 5.0, 1.0, 7.0, 3.0, nan, -nan, 0.0, -0.0]
    for op in ("amax", "amin"):
        for inc in (True, False):
            got = ampc.tensor(base).to(device).scatter_reduce(
                0, ampc.tensor(idx).to(device), ampc.tensor(src).to(device),
                op, include_self=inc).cpu().numpy()
            want = torch.tensor(base).scatter_reduce(
                0, torch.tensor(idx), torch.tensor(src), op,
                include_self=inc).numpy()
            np.testing.assert_array_equal(got, want)
            # a tie keeps self's zero: its sign too
            np.testing.assert_array_equal(np.signbit(got[4:]),
                                          np.signbit(want[4:]))


def test_integer_mean_floors_and_counts_self(device):
    x = ampc.tensor([7, -7, 0, 5]).to(device)
    idx = ampc.tensor([0, 0, 1, 1, 2]).to(device)
    src = ampc.tensor([1, 1, 1, 1, -1]).to(device)
    assert x.scatter_reduce(0, idx, src, "mean").tolist() == [3, -2, -1, 5]
    assert x.scatter_reduce(0, idx, src, "mean",
                            include_self=False).tolist() == [1, 1, -1, 5]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64",
                                   "bool"])
def test_matches_torch(dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(3)
    tdt = getattr(torch, dtype)
    for op in MODES:
        if op == "mean" and dtype == "bool":
            continue
        for dim in (0, 1, -1):
            for inc in (True, False):
                shape, ishape = [4, 6, 5], [3, 4, 4]
                ishape[dim] = 7
                base, index, src = random_case(rng, shape, dim, ishape,
                                               ishape, dtype, op)
                got = from_values(base, dtype).scatter_reduce(
                    dim, ampc.tensor(index), from_values(src, dtype), op,
                    include_self=inc)
                want = torch.tensor(base).to(tdt).scatter_reduce(
                    dim, torch.tensor(index), torch.tensor(src).to(tdt), op,
                    include_self=inc)
                want = want.to(torch.float64).numpy()
                if dtype in ("int64", "bool"):
                    np.testing.assert_array_equal(to64(got), want)
                else:
                    # (PyTorch may round a 16-bit mean's sum before dividing)
                    assert_close(got, want, dtype, k=8,
                                 msg=f"{op} dim={dim} include_self={inc}: ")


def test_layouts_and_the_thread_split_keep_index_order(device):
    """Transposed and sliced self, src and index, an expanded index (stride
    0), and shapes with few slices (the split along dim): each element's
    float32 sum is the one np.add.at forms in index order, bit for bit on
    the CPU."""
    rng = np.random.default_rng(5)
    cases = [
        # (self shape, index shape, dim): 1-D (one slice, split along dim),
        # few wide rows (runs), many short rows (slices), 3-D
        ((1000,), (60000,), 0),
        ((300, 3), (40000, 3), 0),
        ((2, 500), (2, 30000), 1),
        ((700, 40), (900, 40), 0),
        ((64, 33, 5), (64, 50, 5), 1),
    ]
    for shape, ishape, dim in cases:
        base = ref.round_to(rng.normal(size=shape), "float32")
        src = ref.round_to(rng.normal(size=ishape), "float32")
        index = rng.integers(0, shape[dim], size=ishape)
        want = base.astype(np.float32)
        cols = np.indices(ishape)
        cols[dim] = index
        np.add.at(want, tuple(cols), src.astype(np.float32))
        layouts = [
            (ampc.tensor(base), ampc.tensor(index), ampc.tensor(src)),
            # transposed copies read back as views of the same values
            tuple(ampc.tensor(np.ascontiguousarray(a.T)).t() if a.ndim == 2
                  else ampc.tensor(a) for a in (base, index, src)),
        ]
        for t, i, s in layouts:
            got = t.to(device).scatter_reduce(dim, i.to(device),
                                              s.to(device), "sum")
            if device == "cpu":
                np.testing.assert_array_equal(got.numpy(), want)
            else:
                assert_close(got.cpu(), want.astype(np.float64), "float32",
                             k=200)
    # an expanded index and a sliced self
    x = ampc.zeros(7, 12)[:, ::2].to(device)
    idx = ampc.tensor([[3], [0], [3], [6]]).expand(4, 6).to(device)
    src = ampc.arange(24.0).reshape(4, 6).to(device)
    x.scatter_reduce_(0, idx, src, "amax", include_self=False)
    want = np.zeros((7, 6))
    want[3] = np.maximum(np.arange(6.0), np.arange(12.0, 18.0))
    want[0] = np.arange(6.0, 12.0)
    want[6] = np.arange(18.0, 24.0)
    np.testing.assert_array_equal(to64(x.cpu()), want)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_results_do_not_depend_on_the_thread_count(dtype):
    """Every mode, on each way the CPU splits the work (none for a 1-D
    index or an expanded one over short rows; wide rows cut into pieces;
    slices), gives the same bits on 1 and 5 threads, and the NumPy loop's
    values."""
    rng = np.random.default_rng(9)
    n = 12000
    rows = rng.integers(0, 500, n)
    cases = [  # (self shape, dim, index)
        ((500,), 0, rows),
        ((500, 3), 0, np.broadcast_to(rows[:, None], (n, 3))),
        ((40, 100), 0, rng.integers(0, 40, (160, 100))),
        ((6, 50), 1, rng.integers(0, 50, (6, 2400))),
    ]
    prev = ampc.get_num_threads()
    try:
        for shape, dim, index in cases:
            base = rand_values(shape, dtype, rng)
            src = rand_values(index.shape, dtype, rng, 0.9, 1.1) \
                if dtype == "float32" else rand_values(index.shape, dtype,
                                                       rng, -1, 1)
            for op in MODES:
                for inc in (True, False):
                    outs = []
                    for threads in (1, 5):
                        ampc.set_num_threads(threads)
                        outs.append(to64(from_values(base, dtype)
                                         .scatter_reduce(
                            dim, ampc.tensor(index),
                            from_values(src, dtype), op,
                            include_self=inc)))
                    np.testing.assert_array_equal(
                        outs[0], outs[1], err_msg=f"{shape} {op} {inc}")
                    if op != "prod":    # (long float products drift)
                        want = reference(base, dim, index, src, op, inc,
                                         integer=dtype == "int64")
                        assert_close(outs[0], want, dtype, k=200,
                                     msg=f"{shape} {op} {inc}: ")
    finally:
        ampc.set_num_threads(prev)


def test_zero_d_empty_index_and_aliases(device):
    torch = torch_or_skip()
    cases = [
        lambda lib: lib.tensor(5.0).scatter_reduce(0, lib.tensor(0),
                                                   lib.tensor(3.0), "prod"),
        lambda lib: lib.tensor(1.0).scatter_reduce(
            0, lib.tensor([0, 0, 0]), lib.tensor([1.0, 2.0, 3.0]), "sum"),
        lambda lib: lib.tensor(2.0).scatter_reduce(
            -1, lib.tensor(0), lib.tensor([5.0]), "mean",
            include_self=False),
        lambda lib: lib.arange(6.0).reshape(2, 3).scatter_reduce(
            0, lib.zeros(0, 3, dtype=lib.int64), lib.ones(2, 3), "mean",
            include_self=False),
        # PyTorch's parser takes max and min for amax and amin
        lambda lib: lib.arange(4.0).scatter_reduce(
            0, lib.tensor([1, 1]), lib.tensor([9.0, -2.0]), "max"),
        lambda lib: lib.arange(4.0).scatter_reduce(
            0, lib.tensor([1, 1]), lib.tensor([9.0, -2.0]), "min"),
        lambda lib: lib.scatter_reduce(
            lib.zeros(3), 0, lib.tensor([2, 2]), lib.tensor([1.0, 2.0]),
            "sum", include_self=False),
    ]
    for case in cases:
        got, want = case(ampc), case(torch)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # the same on the device, in place
    x = ampc.tensor(2.0).to(device)
    x.scatter_reduce_(0, ampc.tensor(0).to(device),
                      ampc.tensor(4.0).to(device), "amin")
    assert x.item() == 2.0


def test_legacy_scatter_reduce_add_and_multiply(device):
    """scatter_(..., reduce=) with a tensor (PyTorch's deprecation warning)
    or a number (cast to self's dtype first), on floats, ints and bools."""
    torch = torch_or_skip()
    idx = [[0, 0, 1], [1, 1, 1]]
    for reduce in ("add", "multiply"):
        for dtype, base, src, number in [
                ("float32", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
                 [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]], 2.5),
                ("int64", [[1, 2, 3], [4, 5, 6]],
                 [[2, 3, 4], [5, 6, 7]], 2.7),
                ("bool", [[True, False, True], [False, True, False]],
                 [[True, False, False], [True, True, False]], True)]:
            outs = []
            for lib in (ampc, torch):
                dt = getattr(lib, dtype)
                x = lib.tensor(base, dtype=dt)
                i = lib.tensor(idx)
                s = lib.tensor(src, dtype=dt)
                if lib is ampc:
                    x, i, s = x.to(device), i.to(device), s.to(device)
                    with pytest.warns(UserWarning, match="deprecated"):
                        a = x.clone().scatter_(0, i, s, reduce=reduce)
                else:       # (PyTorch warns once a process)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        a = x.clone().scatter_(0, i, s, reduce=reduce)
                b = x.scatter(0, i, number, reduce=reduce)
                c = x.clone().scatter_(0, i, value=number, reduce=reduce)
                outs.append([o.cpu().numpy() for o in (a, b, c)])
            for got, want in zip(*outs):
                np.testing.assert_array_equal(got, want,
                                              err_msg=f"{reduce} {dtype}")


# ----------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("op", MODES)
@pytest.mark.parametrize("include_self", [True, False])
def test_gradients_match_finite_differences(op, include_self):
    """Distinct values (no ties for amax/amin, no zeros for prod): the
    reduction is smooth there.  dim 1 of (4, 5) from (4, 7), repeats."""
    rng = np.random.default_rng(11)
    index = rng.integers(0, 5, size=(4, 7))
    low, high = (0.5, 1.5) if op == "prod" else (-2.0, 2.0)
    values = [ref.round_to(rng.permutation(np.linspace(low, high, n))
                           .reshape(s), "float32")
              for n, s in ((20, (4, 5)), (28, (4, 7)))]

    def ampc_fn(a, s):
        return a.scatter_reduce(1, ampc.tensor(index), s, op,
                                include_self=include_self)

    def ref_fn(a, s):
        return reference(a, 1, index, s, op, include_self)

    gradcheck(ampc_fn, ref_fn, None, rng=rng, values=values, rtol=2e-3,
              atol=2e-4)


def test_gradients_match_torch_with_ties_and_zeros(device):
    """Small integers: amax/amin ties (the gradient shared evenly), prod
    with one zero and with two in a group, the in-place form and the
    legacy multiply; and the numeric helper agrees where it is smooth."""
    torch = torch_or_skip()
    rng = np.random.default_rng(2)
    base = rng.integers(-2, 3, (4, 5)).astype(np.float32)
    src = rng.integers(-2, 3, (6, 5)).astype(np.float32)
    index = rng.integers(0, 4, (6, 5))
    w = ref.round_to(rng.uniform(0.5, 1.5, (4, 5)), "float32")
    for op in MODES:
        for inc in (True, False):
            res = []
            for lib in (ampc, torch):
                a = lib.tensor(base, requires_grad=True)
                s = lib.tensor(src, requires_grad=True)
                i, wt = lib.tensor(index), lib.tensor(w.astype(np.float32))
                if lib is ampc:
                    a, s = (a.detach().to(device).requires_grad_(),
                            s.detach().to(device).requires_grad_())
                    i, wt = i.to(device), wt.to(device)
                y = (a * 1).scatter_reduce_(0, i, s, op, include_self=inc)
                (y * wt).sum().backward()
                res.append([t.detach().cpu().numpy()
                            for t in (y, a.grad, s.grad)])
            for got, want in zip(*res):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                           err_msg=f"{op} {inc}")
    # legacy multiply: ampc differentiates it as prod with include_self
    a = ampc.tensor(base, requires_grad=True)
    s = ampc.tensor(src, requires_grad=True)
    with pytest.warns(UserWarning, match="deprecated"):
        y = a.scatter(0, ampc.tensor(index), s, reduce="multiply")
    (y * ampc.tensor(w.astype(np.float32))).sum().backward()
    ga, gs = numeric_grad(
        lambda x, y: reference(x, 0, index, y, "prod", True),
        [base.astype(np.float64), src.astype(np.float64)], w, eps=1e-3)
    np.testing.assert_allclose(to64(a.grad), ga, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(to64(s.grad), gs, rtol=1e-3, atol=1e-3)


def test_16_bit_gradients_keep_the_dtype():
    for dt in (ampc.float16, ampc.bfloat16):
        a = ampc.ones(3, 4, dtype=dt, requires_grad=True)
        s = ampc.full((5, 4), 2.0, dtype=dt, requires_grad=True)
        idx = ampc.tensor([[0, 1, 2, 0]] * 5)
        a.scatter_reduce(0, idx, s, "mean").sum().backward()
        assert a.grad.dtype is dt and s.grad.dtype is dt
        assert_close(s.grad, np.full((5, 4), 1 / 6), dt.name)


def test_second_derivatives_match_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(4)
    base = rng.uniform(0.5, 2, (4, 5)).astype(np.float32)
    src = rng.uniform(0.5, 2, (6, 5)).astype(np.float32)
    index = rng.integers(0, 4, (6, 5))
    v = rng.normal(size=(4, 5)).astype(np.float32)
    vs = rng.normal(size=(6, 5)).astype(np.float32)
    for op in MODES:
        for inc in (True, False):
            res = []
            for lib in (ampc, torch):
                a = lib.tensor(base, requires_grad=True)
                s = lib.tensor(src, requires_grad=True)
                out = a.scatter_reduce(0, lib.tensor(index), s, op,
                                       include_self=inc)
                ga, gs = lib.autograd.grad((out ** 2).sum(), (a, s),
                                           create_graph=True)
                h = lib.autograd.grad((ga * lib.tensor(v)).sum()
                                      + (gs * lib.tensor(vs)).sum(), (a, s))
                res.append([t.detach().numpy() for t in (ga, gs, *h)])
            for got, want in zip(*res):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                           err_msg=f"{op} {inc}")


def test_prod_second_derivative_with_two_zeros_raises():
    x = ampc.ones(1, 3, requires_grad=True)
    s = ampc.tensor([[0.0, 0.0, 1.0], [0.0, 3.0, 0.0]], requires_grad=True)
    out = x.scatter_reduce(0, ampc.zeros(2, 3, dtype=ampc.int64), s, "prod")
    gx, gs = ampc.autograd.grad(out.sum(), (x, s), create_graph=True)
    assert gs.tolist() == [[0.0, 3.0, 0.0], [0.0, 0.0, 1.0]]
    with pytest.raises(RuntimeError, match="Double backward is unsupported "
                                           "for src when >1 zeros"):
        ampc.autograd.grad(gs.sum(), (x, s))


# ----------------------------------------------------------------------------
# errors


def test_errors_name_the_op_the_argument_and_what_was_expected():
    x = ampc.zeros(2, 3)
    idx = ampc.tensor([[0, 0, 1], [1, 1, 1]])
    src = ampc.ones(2, 3)
    cases = [
        (lambda: x.scatter_reduce(0, idx, src, "median"), RuntimeError,
         r"scatter_reduce\(\): reduce argument must be either sum, prod, "
         r"mean, amax or amin, got median"),
        (lambda: x.scatter_reduce(0, idx.float(), src, "sum"), RuntimeError,
         r"scatter_reduce\(\): Expected dtype int64 for index"),
        (lambda: x.scatter_reduce_(0, idx + 5, src, "sum"), IndexError,
         r"scatter_reduce_\(\): index 5 is out of bounds for dimension 0 "
         r"with size 2"),
        (lambda: x.scatter_reduce(1, idx - 4, src, "amax"), IndexError,
         r"index -4 is out of bounds for dimension 1 with size 3"),
        (lambda: x.scatter_reduce(0, idx, src.half(), "sum"), RuntimeError,
         r"Expected self.dtype to be equal to src.dtype \(self float32, src "
         r"float16\)"),
        (lambda: x.scatter_reduce(0, ampc.zeros(3, 3, dtype=ampc.int64), src,
                                  "sum"), RuntimeError,
         r"Expected index \[3, 3\] to be no larger than self \[2, 3\] apart "
         r"from dimension 0 and to be no larger size than src \[2, 3\]"),
        (lambda: x.scatter_reduce(0, ampc.zeros(2, dtype=ampc.int64), src,
                                  "sum"), RuntimeError,
         r"Index tensor must have the same number of dimensions as self"),
        (lambda: x.scatter_reduce(0, idx, ampc.ones(2, 3, 1), "sum"),
         RuntimeError,
         r"Index tensor must have the same number of dimensions as src"),
        (lambda: x.scatter_reduce(2, idx, src, "sum"), IndexError,
         r"Dimension out of range \(expected to be in range of \[-2, 1\], "
         r"but got 2\)"),
        (lambda: x.scatter_reduce(0, idx, 1.0, "sum"), TypeError,
         r"argument 'src' \(position 3\) must be Tensor, not float"),
        (lambda: x.scatter_reduce(0, idx, src, "sum", include_self=1),
         TypeError, r"argument 'include_self' must be bool, not int"),
        (lambda: ampc.ones(3, dtype=ampc.bool).scatter_reduce(
            0, ampc.tensor([0]), ampc.ones(1, dtype=ampc.bool), "mean"),
         NotImplementedError, r"\"mean\" is not implemented for bool"),
        (lambda: x.scatter(0, idx, src, reduce="mean"), RuntimeError,
         r"scatter_\(\): reduce argument must be either add or multiply"),
        (lambda: x.expand(4, 2, 3).scatter_reduce_(
            0, ampc.zeros(2, 2, 3, dtype=ampc.int64), ampc.ones(2, 2, 3),
            "sum"), RuntimeError, r"more than one element of the "
         r"written-to tensor"),
        (lambda: x.scatter_add_(0, idx, 2.0), TypeError,
         r"scatter_add_\(\): argument 'src' \(position 3\) must be Tensor"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()
    assert x.sum().item() == 0          # nothing was written


def test_kernel_call_checks_its_arguments():
    """_C.scatter_reduce_ itself refuses what its kernels cannot take."""
    x = ampc.zeros(2, 3)
    idx = ampc.tensor([[0, 1, 1]])
    with pytest.raises(RuntimeError, match="expected input of dtype float32 "
                                           "or int64"):
        ampc._C.scatter_reduce_(x.half(), 0, idx, x.half(), "sum")
    with pytest.raises(RuntimeError, match="reduce argument must be"):
        ampc._C.scatter_reduce_(x, 0, idx, x, "max")
    with pytest.raises(RuntimeError, match="expected src to have dtype "
                                           "float32"):
        ampc._C.scatter_reduce_(x, 0, idx, x.long(), "sum")
    with pytest.raises(RuntimeError, match="one rank >= 1"):
        ampc._C.scatter_reduce_(x, 0, idx.reshape(-1), x, "sum")
    # src sharing self's memory is read as it was
    y = ampc.arange(4.0)
    ampc._C.scatter_reduce_(y, 0, ampc.tensor([1, 2, 3, 0]), y, "sum")
    assert y.tolist() == [3.0, 1.0, 3.0, 5.0]
