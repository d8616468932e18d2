"""kthvalue, cummax, cummin, histc and cross (ampc/_tensor_select.py; the
cummax/cummin and histc kernels in csrc/ops_stats.c, cpu/ref/
scan_minmax.c, cpu/ref/histc.c, cuda/scan.cu, cuda/histc.cu): against
float64 NumPy references (odd sizes, every dim, NaN and ties, every
dtype), gradients by finite differences, torch where installed, and the
same tests on a GPU (marked cuda)."""
import math
import warnings

import numpy as np
import pytest

import ampc
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import (ALL_NAMES, FLOAT_NAMES, assert_close, from_values,
                     gradcheck, rand_values, to64)

# ----------------------------------------------------------------------------
# references


def ref_cummax(x, dim, is_min=False):
    """torch's rule: x[j] takes over when >= (<=) the running value or
    NaN."""
    x = np.moveaxis(x, dim, -1)
    vals = np.empty_like(x)
    idx = np.zeros(x.shape, dtype=np.int64)
    for line in np.ndindex(x.shape[:-1]):
        best, at = x[line][0], 0
        for j, v in enumerate(x[line]):
            if (v <= best if is_min else v >= best) or math.isnan(v):
                best, at = v, j
            vals[line][j], idx[line][j] = best, at
    return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)


def _rounded(v, dtype):
    if dtype == "float32":
        return np.float32(v)
    return np.float32(from_values(np.array([v], np.float32).astype(
        np.float64), dtype).float().numpy()[0])


def ref_histc(x, bins, lo, hi, dtype):
    """torch's CPU bin rule, each step rounded to dtype (float32 math)."""
    lo, hi = _rounded(lo, dtype), _rounded(hi, dtype)
    out = np.zeros(bins)
    nb = _rounded(bins, dtype)
    span = _rounded(hi - lo, dtype)
    for v in np.asarray(x, np.float32).reshape(-1):
        if not lo <= v <= hi:
            continue
        t = _rounded(_rounded(_rounded(v - lo, dtype) * nb, dtype) / span,
                     dtype)
        out[min(int(t), bins - 1)] += 1
    return out


def _with_ties_and_nan(shape, dtype, seed, nan=True):
    rng = np.random.default_rng(seed)
    v = rand_values(shape, dtype, rng)
    flat = v.reshape(-1)
    flat[2::5] = flat[0::5][:flat[2::5].size]
    if nan and dtype in FLOAT_NAMES and flat.size > 7:
        flat[7] = math.nan
    return v


# ----------------------------------------------------------------------------
# cummax / cummin


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("shape,dim", [((33,), 0), ((7, 33), 1), ((7, 33), 0),
                                       ((3, 1000 + 3), -1), ((5, 4, 3), 1),
                                       ((2, 3, 300), 2)])
@pytest.mark.parametrize("fn", ["cummax", "cummin"])
def test_cummax_cummin_match_numpy(device, dtype, shape, dim, fn):
    vals = _with_ties_and_nan(shape, dtype, 1)
    x = from_values(vals, dtype).to(device)
    v, i = getattr(ampc, fn)(x, dim)
    ev, ei = ref_cummax(vals, dim, fn == "cummin")
    assert v.dtype is x.dtype and i.dtype is ampc.int64
    assert np.array_equal(to64(v.cpu()), ev, equal_nan=True)
    assert np.array_equal(i.cpu().numpy(), ei)


def test_cummax_0d_and_empty(device):
    v, i = ampc.tensor(5.0, device=device).cummax(0)
    assert v.item() == 5.0 and i.item() == 0 and v.ndim == 0
    v, i = ampc.zeros(3, 0, device=device).cummin(1)
    assert v.shape == (3, 0) and i.shape == (3, 0)


@pytest.mark.parametrize("fn", ["cummax", "cummin"])
def test_cummax_gradient(fn):
    def ref(x):
        v, _ = ref_cummax(x, 1, fn == "cummin")
        return v
    gradcheck(lambda x: getattr(x, fn)(1).values, ref, [(4, 9)])


def test_cummax_gradient_sums_repeated_indices(device):
    x = ampc.tensor([1.0, 3.0, 2.0, 2.5], device=device,
                    requires_grad=True)
    x.cummax(0).values.backward(ampc.tensor([1.0, 2.0, 3.0, 4.0],
                                            device=device))
    assert x.grad.cpu().tolist() == [1.0, 9.0, 0.0, 0.0]


# ----------------------------------------------------------------------------
# kthvalue


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16",
                                   "int64"])
@pytest.mark.parametrize("shape,k,dim", [((33,), 5, 0), ((7, 33), 30, 1),
                                         ((7, 33), 7, 0), ((3, 1003), 500,
                                                           -1),
                                         ((4, 5, 3), 1, 1)])
def test_kthvalue_matches_numpy(device, dtype, shape, k, dim):
    vals = _with_ties_and_nan(shape, dtype, 2, nan=False)
    x = from_values(vals, dtype).to(device)
    for keepdim in (False, True):
        v, i = x.kthvalue(k, dim, keepdim)
        ev = np.take(np.sort(vals, axis=dim), [k - 1], axis=dim)
        if not keepdim:
            ev = ev.squeeze(dim)
        assert np.array_equal(to64(v.cpu()), ev)
        # the index names an element equal to the value
        picked = np.take_along_axis(
            vals, i.cpu().numpy() if keepdim else np.expand_dims(
                i.cpu().numpy(), dim), axis=dim)
        assert np.array_equal(picked.reshape(ev.shape), ev)


def test_kthvalue_nan_is_largest_and_0d():
    v, i = ampc.tensor([3.0, math.nan, 1.0]).kthvalue(3)
    assert math.isnan(v.item()) and i.item() == 1
    v, i = ampc.tensor(4.0).kthvalue(1)
    assert v.item() == 4.0 and i.item() == 0 and v.ndim == 0


def test_kthvalue_gradient():
    def ref(x):
        return np.sort(x, axis=1)[:, 3]
    gradcheck(lambda x: x.kthvalue(4, 1).values, ref, [(5, 9)])


# ----------------------------------------------------------------------------
# histc


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n,bins,lo,hi", [(1000 + 3, 7, -1.3, 2.1),
                                          (33, 1, 0.0, 1.0),
                                          (20011, 257, -2.0, 2.0),
                                          (4099, 9000, -3.0, 3.0)])
def test_histc_matches_the_reference(device, dtype, n, bins, lo, hi):
    rng = np.random.default_rng(3)
    vals = rand_values((n,), dtype, rng)
    vals[::97] = math.nan
    vals[5] = hi
    vals[6] = lo
    x = from_values(vals, dtype).to(device)
    out = x.histc(bins, lo, hi)
    assert out.dtype is x.dtype and out.shape == (bins,)
    assert_close(out.cpu(), ref_histc(to64(x.cpu()), bins, lo, hi, dtype),
                 dtype, rtol=0, atol=0)


def test_histc_range_from_the_data(device):
    x = ampc.tensor([1.0, 2.0, 2.5, 4.0], device=device)
    assert x.histc(3).cpu().tolist() == \
        ref_histc([1.0, 2.0, 2.5, 4.0], 3, 1.0, 4.0, "float32").tolist()
    assert ampc.histc(ampc.tensor([1.0, 1.0, 1.0], device=device),
                      4).cpu().tolist() == [0.0, 0.0, 3.0, 0.0]
    assert ampc.histc(ampc.zeros(0, device=device), 2).cpu().tolist() == \
        [0.0, 0.0]


def test_histc_counts_exactly_in_16_bits():
    assert ampc.ones(3000).bfloat16().histc(1).item() == 3008.0
    assert ampc.ones(3000).half().histc(1).item() == 3000.0


@pytest.mark.parametrize("call,match", [
    (lambda: ampc.tensor([1.0]).histc(4, 2, 1), "max must be larger"),
    (lambda: ampc.tensor([1.0]).histc(0), "bins must be > 0"),
    (lambda: ampc.tensor([1.0]).histc(4, 0, math.inf), "not finite"),
    (lambda: ampc.tensor([1, 2]).histc(4), "floating point"),
])
def test_histc_errors(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


# ----------------------------------------------------------------------------
# cross


def test_cross_matches_numpy(device):
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(5, 3, 7)), rng.normal(size=(1, 3, 7))
    ta = ampc.tensor(a.astype(np.float32), device=device)
    tb = ampc.tensor(b.astype(np.float32), device=device)
    expect = np.cross(a.astype(np.float32), b.astype(np.float32), axis=1)
    assert_close(ampc.linalg.cross(ta, tb, dim=1).cpu(), expect, "float32")
    assert_close(ampc.cross(ta, tb, dim=1).cpu(), expect, "float32")
    with pytest.warns(UserWarning, match="without specifying the dim"):
        assert_close(ta.cross(tb).cpu(), expect, "float32")
    a2 = rng.normal(size=(4, 3))
    t2 = ampc.tensor(a2.astype(np.float32), device=device)
    assert_close(ampc.linalg.cross(t2, t2.flip(0)).cpu(),
                 np.cross(a2, a2[::-1]), "float32")
    ints = ampc.linalg.cross(ampc.tensor([[1, 2, 3]]),
                             ampc.tensor([[4, 5, 6]]))
    assert ints.tolist() == [[-3, 6, -3]]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cross_16bit(dtype):
    rng = np.random.default_rng(5)
    a = rand_values((6, 3), dtype, rng)
    b = rand_values((6, 3), dtype, rng)
    out = ampc.linalg.cross(from_values(a, dtype), from_values(b, dtype))
    assert out.dtype.name == dtype
    assert_close(out, np.cross(a, b), dtype, k=4)


def test_cross_gradient():
    gradcheck(lambda a, b: ampc.linalg.cross(a, b),
              lambda a, b: np.cross(a, b), [(4, 3), (4, 3)])


@pytest.mark.parametrize("call,exc,match", [
    (lambda: ampc.linalg.cross(ampc.ones(3, 4), ampc.ones(3, 4)),
     RuntimeError, "must have length 3"),
    (lambda: ampc.linalg.cross(ampc.ones(4, 3), ampc.ones(3)),
     RuntimeError, "same number of dimensions"),
    (lambda: ampc.linalg.cross(ampc.ones(4, 3), ampc.ones(4, 3), dim=5),
     IndexError, "out of range"),
    (lambda: ampc.linalg.cross(ampc.ones(4, 3).half(), ampc.ones(4, 3)),
     RuntimeError, "same dtype"),
    (lambda: ampc.ones(4, 4).cross(ampc.ones(4, 4)), RuntimeError,
     "no dimension of size 3"),
])
def test_cross_errors(call, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=match):
            call()


# ----------------------------------------------------------------------------
# torch


def test_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    vals = _with_ties_and_nan((6, 301), "float32", 7)
    x, tx = ampc.tensor(vals.astype(np.float32)), torch.tensor(
        vals.astype(np.float32))
    for fn in ("cummax", "cummin"):
        for dim in (0, 1):
            v, i = getattr(x, fn)(dim)
            tv, ti = getattr(tx, fn)(dim)
            assert np.array_equal(v.numpy(), tv.numpy(), equal_nan=True)
            assert np.array_equal(i.numpy(), ti.numpy())
    clean = rng.normal(size=(5, 37)).astype(np.float32)
    v, _ = ampc.tensor(clean).kthvalue(11, 1)
    tv, _ = torch.tensor(clean).kthvalue(11, 1)
    assert np.array_equal(v.numpy(), tv.numpy())
    for name in FLOAT_NAMES:
        h = rand_values((5003,), name, rng)
        a = from_values(h, name)
        t = torch.tensor(h).to(getattr(torch, name))
        for bins, lo, hi in ((13, -1.7, 2.3), (100, 0, 0), (300, -3, 3)):
            assert np.array_equal(to64(a.histc(bins, lo, hi)),
                                  t.histc(bins, lo, hi).double().numpy())
    a, b = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    out = ampc.linalg.cross(ampc.tensor(a.astype(np.float32)),
                            ampc.tensor(b.astype(np.float32)), dim=1)
    tout = torch.linalg.cross(torch.tensor(a.astype(np.float32)),
                              torch.tensor(b.astype(np.float32)), dim=1)
    assert_close(out, tout.double().numpy(), "float32")


@pytest.mark.parametrize("module", ["ampc._tensor_select", "ampc.linalg"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
