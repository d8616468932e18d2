"""cumsum, cumprod, sort, argsort, msort and topk: against float64 NumPy
references (a stable argsort with NaN largest and -0.0 equal to 0.0;
cumsum in float64, then rounded), on every dtype, odd sizes, every dim,
strided and transposed inputs, ties, NaN, inf and -0.0; gradients against
finite differences and torch; argument errors; CUDA against the CPU."""
import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import make_pair, requires_cuda, assert_same
from helpers import (ALL_NAMES, FLOAT_NAMES, from_values, gradcheck,
                     make, to64)

EPS = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}

# (shape, dims): lines of 1, 7, 33 and 1031 along every dim
CASES = [
    ((1,), (0,)), ((7,), (0, -1)), ((33,), (0,)), ((1031,), (0,)),
    ((3, 7), (0, 1)), ((5, 33, 4), (0, 1, 2)), ((1031, 3), (0, -1)),
    ((0, 3), (0, 1)), ((), (0, -1)),
]
LAYOUTS = ("contig", "step", "t")


def _cases(layouts=LAYOUTS):
    for shape, dims in CASES:
        for dim in dims:
            for layout in layouts:
                if layout == "t" and len(shape) < 2:
                    continue
                if layout == "step" and len(shape) == 0:
                    continue
                yield shape, dim, layout


def _ties_values(shape, dtype, rng, special=True):
    """Values with many ties (halves in [-3, 3]) and, for float dtypes,
    NaN, +-inf, -0.0 and 0.0 sprinkled in."""
    if dtype == "bool":
        return (rng.random(shape) < 0.5).astype(np.float64)
    v = rng.integers(-6, 7, size=shape).astype(np.float64)
    if dtype == "int64":
        return v
    v = v / 2
    if special and v.size:
        flat = v.reshape(-1)
        pick = rng.random(flat.shape)
        flat[pick < 0.08] = np.nan
        flat[(pick >= 0.08) & (pick < 0.12)] = np.inf
        flat[(pick >= 0.12) & (pick < 0.16)] = -np.inf
        flat[(pick >= 0.16) & (pick < 0.24)] = -0.0
    return v


def _ref_order(v, dim, descending):
    """The stable sort permutation of v along dim, NaN largest, -0.0 equal
    to 0.0 (np.lexsort is stable; its last key is the primary one)."""
    v = np.moveaxis(np.asarray(v, dtype=np.float64), dim, -1)
    out = np.empty(v.shape, dtype=np.int64)
    for idx in np.ndindex(v.shape[:-1]):
        line = v[idx]
        nan = np.isnan(line)
        x = np.where(nan, 0.0, line) + 0.0     # -0.0 -> 0.0
        if descending:
            out[idx] = np.lexsort((-x, ~nan))
        else:
            out[idx] = np.lexsort((x, nan))
    return np.moveaxis(out, -1, dim)


def _check_gathered(values, x, indices, dim):
    """values == x at indices along dim, bit for bit (NaN, -0.0 too)."""
    xv = to64(x)
    idx = indices.numpy()
    if xv.ndim == 0:
        want = xv
    else:
        want = np.take_along_axis(xv, idx, axis=dim)
    got = to64(values)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


# ----------------------------------------------------------------------------
# cumsum, cumprod


def _scan_tolerance(expected, absum, n, dtype):
    if dtype in ("int64", "bool"):
        return 0.0
    # the dtype's rounding of the float32 (or double) running value, and
    # the running value's own error
    return 2 * EPS[dtype] * np.abs(expected) + 4 * n * 2.0 ** -24 * absum


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_against_numpy(dtype, op):
    rng = np.random.default_rng(3)
    np_op = np.cumsum if op == "cumsum" else np.cumprod
    for shape, dim, layout in _cases():
        if op == "cumprod" and dtype in FLOAT_NAMES:
            v = ref.round_to(rng.uniform(0.8, 1.25, size=shape), dtype)
            if v.size > 4:
                v.reshape(-1)[rng.integers(0, v.size)] = 0.0
        elif op == "cumprod":
            v = rng.integers(-1, 3, size=shape).astype(np.float64) \
                if dtype == "int64" else (rng.random(shape) < 0.9) * 1.0
        else:
            v = ref.round_to(rng.uniform(-3, 3, size=shape), dtype) \
                if dtype in FLOAT_NAMES else \
                np.asarray(_ties_values(shape, dtype, rng), np.float64)
        x = make(v, dtype, layout)
        out = getattr(x, op)(dim)
        want_dtype = ampc.int64 if dtype in ("int64", "bool") else x.dtype
        assert out.dtype is want_dtype
        assert tuple(out.shape) == shape
        axis = dim % max(len(shape), 1)
        exact = np_op(v.reshape(shape if shape else (1,)), axis=axis) \
            .reshape(shape)
        want = ref.round_to(exact, dtype) if dtype in FLOAT_NAMES else exact
        got = to64(out)
        n = shape[axis] if shape else 1
        absum = np.cumsum(np.abs(v.reshape(shape if shape else (1,))),
                          axis=axis).reshape(shape)
        tol = _scan_tolerance(want, absum, n, dtype)
        with np.errstate(invalid="ignore"):
            ok = (got == want) | (np.abs(got - want) <= tol)
        assert ok.all(), (shape, dim, layout, got[~ok][:3], want[~ok][:3])
        if dtype == "float32" and op == "cumsum":
            # double running value: exactly NumPy's float64 sums, rounded
            assert np.array_equal(got, want)


def test_scan_special_values():
    x = ampc.tensor([1.0, float("inf"), -float("inf"), 2.0, float("nan"),
                     3.0])
    assert np.array_equal(to64(x.cumsum(0)),
                          [1, np.inf, np.nan, np.nan, np.nan, np.nan],
                          equal_nan=True)
    assert np.array_equal(to64(x.cumprod(0)),
                          [1, np.inf, -np.inf, -np.inf, np.nan, np.nan],
                          equal_nan=True)


def test_scan_half_accumulates_in_float32():
    # 2048 + 1 + 1 ...: float16 steps of 2 there, so a float16 running
    # value would never move; float32's rounds each output once
    x = ampc.tensor([2048.0] + [1.0] * 8).half()
    assert to64(x.cumsum(0))[-1] == 2056.0
    y = ampc.tensor([256.0] + [1.0] * 8).bfloat16()
    assert to64(y.cumsum(0))[-1] == 264.0


def test_scan_dtype_casts_first():
    x = ampc.tensor([0.4, 0.4, 0.4])
    assert x.cumsum(0, dtype=ampc.int64).tolist() == [0, 0, 0]
    h = ampc.tensor([2048.0, 1.0, 1.0]).half()
    out = ampc.cumsum(h, 0, dtype=ampc.float32)
    assert out.dtype is ampc.float32 and out.tolist() == [2048, 2049, 2050]
    b = ampc.tensor([True, False, True])
    assert b.cumsum(0).dtype is ampc.int64
    assert b.cumprod(0, dtype=ampc.float16).dtype is ampc.float16


def test_scan_in_place():
    x = ampc.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = x._version
    assert x.cumsum_(0) is x
    assert x.tolist() == [[1, 2], [4, 6]] and x._version > v
    i = ampc.tensor([1, 2, 3])
    assert i.cumprod_(0).tolist() == [1, 2, 6]
    t = ampc.tensor([[1.0, 2.0], [3.0, 4.0]]).t()
    t.cumsum_(1)
    assert t.tolist() == [[1, 4], [2, 6]]
    with pytest.raises(RuntimeError, match="cumsum_.*dtype"):
        ampc.tensor([True]).cumsum_(0)
    with pytest.raises(RuntimeError, match="cumsum_.*should match"):
        ampc.ones(2).half().cumsum_(0, dtype=ampc.float32)


# ----------------------------------------------------------------------------
# sort, argsort, topk


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_sort_against_numpy(dtype):
    rng = np.random.default_rng(5)
    for shape, dim, layout in _cases():
        v = _ties_values(shape, dtype, rng)
        x = make(v, dtype, layout)
        for descending in (False, True):
            s = x.sort(dim, descending)
            want = _ref_order(v.reshape(shape), dim % max(len(shape), 1),
                              descending) if shape else np.zeros((), int)
            assert s.indices.dtype is ampc.int64
            assert s.values.dtype is x.dtype
            assert np.array_equal(s.indices.numpy(), want), \
                (shape, dim, layout, descending)
            _check_gathered(s.values, x, s.indices,
                            dim % max(len(shape), 1))
            a = x.argsort(dim, descending, stable=True)
            assert np.array_equal(a.numpy(), want)


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_topk_against_numpy(dtype):
    rng = np.random.default_rng(7)
    for shape, dim, layout in _cases(("contig", "t")):
        v = _ties_values(shape, dtype, rng)
        x = make(v, dtype, layout)
        axis = dim % max(len(shape), 1)
        n = shape[axis] if shape else 1
        for k in sorted({0, min(1, n), min(5, n), n // 2, n}):
            for largest in (True, False):
                t = x.topk(k, dim, largest)
                if not shape:
                    assert t.indices.item() == 0
                    continue
                order = _ref_order(v.reshape(shape), axis, largest)
                want = np.take(order, np.arange(k), axis=axis)
                assert np.array_equal(t.indices.numpy(), want), \
                    (shape, dim, layout, k, largest)
                _check_gathered(t.values, x, t.indices, axis)


@pytest.mark.parametrize("n,k", [(4096, 5), (4096, 100), (1000, 31),
                                 (1000, 33), (1000, 999)])
def test_topk_long_rows(n, k):
    """The buffer (small k) and quickselect (larger k) paths, on random,
    sorted, reversed and constant rows."""
    rng = np.random.default_rng(n + k)
    rows = np.stack([rng.standard_normal(n), np.arange(n, dtype=float),
                     np.arange(n, 0, -1, dtype=float), np.ones(n),
                     rng.integers(0, 4, n).astype(float)])
    x = ampc.tensor(rows.astype(np.float32))
    for largest in (True, False):
        t = x.topk(k, largest=largest)
        want = _ref_order(rows.astype(np.float32), 1, largest)[:, :k]
        assert np.array_equal(t.indices.numpy(), want)
        _check_gathered(t.values, x, t.indices, 1)


def test_sort_long_rows_and_wide_ints():
    rng = np.random.default_rng(11)
    f = rng.standard_normal((3, 5000)).astype(np.float32)
    s = ampc.tensor(f).sort()
    assert np.array_equal(s.indices.numpy(), np.argsort(f, kind="stable"))
    i = rng.integers(-2 ** 62, 2 ** 62, size=(4, 3000))
    i[:, ::7] = i[:, 1:2]                           # ties
    for descending in (False, True):
        got = ampc.tensor(i).sort(descending=descending)
        want = np.argsort(-i if descending else i, kind="stable")
        assert np.array_equal(got.indices.numpy(), want)
        assert np.array_equal(got.values.numpy(),
                              np.take_along_axis(i, want, 1))
    t = ampc.tensor(i).topk(7)
    want = np.argsort(-i, kind="stable")[:, :7]
    assert np.array_equal(t.indices.numpy(), want)


def test_sort_threads_agree():
    rng = np.random.default_rng(13)
    x = ampc.tensor(rng.integers(0, 9, (64, 700)).astype(np.float32))
    before = ampc.get_num_threads()
    try:
        ampc.set_num_threads(1)
        one = x.sort(0), x.topk(40, 0)
        ampc.set_num_threads(2)
        two = x.sort(0), x.topk(40, 0)
    finally:
        ampc.set_num_threads(before)
    for a, b in zip(one, two):
        assert a.indices.equal(b.indices) and a.values.equal(b.values)


def test_return_types_and_functions():
    x = ampc.tensor([[3.0, 1.0, 2.0]])
    s = ampc.sort(x)
    assert isinstance(s, ampc.return_types.sort)
    values, indices = s
    assert values is s.values and indices is s.indices
    assert repr(s).startswith("ampc.return_types.sort(\nvalues=tensor(")
    t = ampc.topk(x, 2)
    assert isinstance(t, ampc.return_types.topk)
    assert t.values.tolist() == [[3, 2]] and t.indices.tolist() == [[0, 2]]
    assert ampc.argsort(x, descending=True).tolist() == [[0, 2, 1]]
    assert ampc.msort(x.t()).tolist() == [[1], [2], [3]]
    assert ampc.cumsum(x, -1).tolist() == [[3, 4, 6]]
    assert ampc.cumprod(x, 1).tolist() == [[3, 3, 6]]
    assert x.topk(2, sorted=False).indices.tolist() == [[0, 2]]
    e = ampc.zeros(0, 3).sort(0)
    assert tuple(e.values.shape) == (0, 3) and e.indices.dtype is ampc.int64
    assert tuple(ampc.zeros(0, 3).topk(0, 0).values.shape) == (0, 3)
    z = ampc.tensor(5.0)
    assert z.sort().values.item() == 5.0 and z.topk(1).indices.item() == 0
    assert z.cumsum(0).shape == () and z.cumprod(-1).item() == 5.0


def test_errors_name_op_and_argument():
    x = ampc.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"topk\(\): selected index k out "
                       "of range"):
        x.topk(4)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(-1)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ampc.tensor(1.0).topk(2)
    with pytest.raises(TypeError, match=r"topk\(\): argument 'k'"):
        x.topk(1.5)
    with pytest.raises(TypeError, match=r"topk\(\): argument 'largest'"):
        x.topk(1, largest=1)
    with pytest.raises(IndexError, match=r"sort\(\): Dimension out of range"):
        x.sort(2)
    with pytest.raises(IndexError, match=r"topk\(\): Dimension out of "):
        x.topk(1, dim=-3)
    with pytest.raises(TypeError, match=r"sort\(\): argument 'descending'"):
        x.sort(descending=2)
    with pytest.raises(TypeError, match=r"argsort\(\): argument 'stable'"):
        x.argsort(stable="yes")
    with pytest.raises(TypeError, match=r"sort\(\): argument 'dim'"):
        x.sort(dim=0.5)
    with pytest.raises(TypeError):
        x.cumsum()
    with pytest.raises(IndexError, match=r"cumsum\(\): Dimension out of "):
        x.cumsum(2)
    with pytest.raises(IndexError, match=r"cumprod\(\): Dimension out of "):
        ampc.tensor(1.0).cumprod(1)
    with pytest.raises(TypeError, match=r"cumsum\(\): argument 'dtype'"):
        x.cumsum(0, dtype="float")
    with pytest.raises(RuntimeError, match=r"cumsum\(\): dtype bool"):
        x.cumsum(0, dtype=ampc.bool)


# ----------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod_grad(dim):
    gradcheck(lambda a: a.cumsum(dim), lambda a: np.cumsum(a, axis=dim),
              [(4, 5)])
    gradcheck(lambda a: a.cumprod(dim), lambda a: np.cumprod(a, axis=dim),
              [(4, 5)], low=0.5, high=1.5)


def test_cumprod_grad_with_zeros():
    rng = np.random.default_rng(17)
    v = ref.round_to(rng.uniform(0.5, 1.5, size=(4, 6)), "float32")
    v[0, 2] = 0.0                       # one zero
    v[1, 1] = v[1, 4] = 0.0             # two zeros
    v[2, 0] = 0.0                       # a zero first
    v[3, 5] = 0.0                       # a zero last
    gradcheck(lambda a: a.cumprod(1), lambda a: np.cumprod(a, axis=1),
              None, values=[v])


def test_sort_topk_grad():
    rng = np.random.default_rng(19)
    v = rng.permutation(40).reshape(5, 8).astype(np.float64) / 4

    def np_sort(a):
        return np.sort(a, axis=0)

    def np_top(a):
        return -np.sort(-a, axis=1)[:, :3]
    gradcheck(lambda a: a.sort(0).values, np_sort, None, values=[v])
    gradcheck(lambda a: a.topk(3).values, np_top, None, values=[v])
    gradcheck(lambda a: a.sort(1, descending=True)[0] * 2,
              lambda a: -np.sort(-a, axis=1) * 2, None, values=[v])
    x = ampc.tensor([3.0, 1.0], requires_grad=True)
    s = x.sort()
    assert s.values.requires_grad and not s.indices.requires_grad
    assert s.values.grad_fn.name() == "SortBackward0"


def test_second_derivatives():
    x = ampc.tensor([[0.5, 2.0, 0.0, 1.5], [1.2, 0.7, 0.9, 1.1]],
                    requires_grad=True)
    for f in (lambda t: (t.cumprod(1) ** 2).sum(),
              lambda t: (t.cumsum(0) * t).sum(),
              lambda t: (t.sort(1).values ** 3).sum(),
              lambda t: (t.topk(2).values ** 3).sum()):
        g, = ampc.autograd.grad(f(x), x, create_graph=True)
        gg, = ampc.autograd.grad((g * g).sum(), x)
        # central differences of (g*g).sum()
        base = to64(x)
        num = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            vals = []
            for s in (1, -1):
                p = base.copy()
                p[idx] += s * 1e-3
                xp = ampc.tensor(p.astype(np.float32), requires_grad=True)
                gp, = ampc.autograd.grad(f(xp), xp)
                vals.append(float((gp * gp).sum()))
            num[idx] = (vals[0] - vals[1]) / 2e-3
        assert np.allclose(to64(gg), num, rtol=2e-2, atol=2e-2)


def test_grads_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(23)
    v = rng.uniform(0.5, 1.5, size=(3, 6)).astype(np.float32)
    v[0, 1] = 0.0
    v[1, 2] = v[1, 4] = 0.0
    for name, f in (("cumprod", lambda t: t.cumprod(1)),
                    ("cumsum", lambda t: t.cumsum(0)),
                    ("sort", lambda t: t.sort(1, descending=True)[0]),
                    ("topk", lambda t: t.topk(4)[0])):
        a = ampc.tensor(v, requires_grad=True)
        b = torch.tensor(v, requires_grad=True)
        w = rng.uniform(0.5, 1.5, size=tuple(f(b).shape)).astype(np.float32)
        ga, = ampc.autograd.grad((f(a) * ampc.tensor(w)).sum(), a,
                                 create_graph=True)
        gb, = torch.autograd.grad((f(b) * torch.tensor(w)).sum(), b,
                                  create_graph=True)
        assert np.allclose(to64(ga), gb.detach().numpy(), rtol=1e-5,
                           atol=1e-6), name
        if name != "cumprod":
            continue        # the others' gradients do not depend on a
        gga, = ampc.autograd.grad((ga ** 2).sum(), a)
        ggb, = torch.autograd.grad((gb ** 2).sum(), b)
        assert np.allclose(to64(gga), ggb.numpy(), rtol=1e-4,
                           atol=1e-5), name


def test_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(29)
    v = _ties_values((6, 33), "float32", rng).astype(np.float32)
    a, b = ampc.tensor(v), torch.tensor(v)
    for d in (0, 1):
        for desc in (False, True):
            sa = a.sort(d, desc, stable=True)
            sb = b.sort(dim=d, descending=desc, stable=True)
            assert np.array_equal(sa.indices.numpy(), sb.indices.numpy())
            assert np.array_equal(to64(sa.values), sb.values.double().numpy(),
                                  equal_nan=True)
    ta, tb = a.topk(5, 1), b.topk(5, 1)
    assert np.array_equal(to64(ta.values), tb.values.double().numpy(),
                          equal_nan=True)
    h = rng.uniform(-2, 2, (4, 300)).astype(np.float32)
    for dt in ("float16", "bfloat16"):
        ca = ampc.tensor(h).to(getattr(ampc, dt)).cumsum(1)
        cb = torch.tensor(h).to(getattr(torch, dt)).cumsum(1)
        assert np.allclose(to64(ca), cb.double().numpy(), rtol=8e-3,
                           atol=4e-2), dt
    i = rng.integers(-5, 5, (4, 9))
    assert np.array_equal(ampc.tensor(i).cumprod(1).numpy(),
                          torch.tensor(i).cumprod(1).numpy())


def test_cpu_autocast_leaves_scans_alone():
    x = ampc.ones(4, 3).bfloat16()
    with ampc.autocast("cpu"):
        assert x.cumsum(0).dtype is ampc.bfloat16
        assert x.cumprod(0).dtype is ampc.bfloat16


# ----------------------------------------------------------------------------
# CUDA against the CPU


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_cuda_sort_topk_match_cpu(dtype):
    rng = np.random.default_rng(31)
    for shape, dim in (((7, 1031), 1), ((1031, 5), 0), ((3, 33, 4), 1),
                       ((4, 1), 1), ((0, 3), 0)):
        v = _ties_values(shape, dtype, rng)
        for layout in ("contig", "t"):
            cpu, gpu = make_pair(v, dtype, layout)
            for desc in (False, True):
                a, b = cpu.sort(dim, desc), gpu.sort(dim, desc)
                assert np.array_equal(a.indices.numpy(),
                                      b.indices.cpu().numpy())
                assert_same(b.values, a.values)
                assert np.array_equal(cpu.argsort(dim, desc).numpy(),
                                      gpu.argsort(dim, desc).cpu().numpy())
            n = shape[dim]
            for k in sorted({0, min(1, n), min(5, n), n}):
                a, b = cpu.topk(k, dim), gpu.topk(k, dim, largest=True)
                assert np.array_equal(a.indices.numpy(),
                                      b.indices.cpu().numpy())
                a = cpu.topk(k, dim, largest=False)
                b = gpu.topk(k, dim, largest=False)
                assert np.array_equal(a.indices.numpy(),
                                      b.indices.cpu().numpy())


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_cuda_scan_matches_cpu(dtype):
    rng = np.random.default_rng(37)
    for shape, dim in (((7, 5000), 1), ((5000, 3), 0), ((3, 40, 5), 1),
                       ((9, 20), 1), ((), 0)):
        v = rng.uniform(-2, 2, shape) if dtype in FLOAT_NAMES else \
            _ties_values(shape, dtype, rng)
        cpu, gpu = make_pair(v, dtype)
        n = shape[dim] if shape else 1
        for op in ("cumsum", "cumprod"):
            if op == "cumprod" and dtype in FLOAT_NAMES:
                cpu, gpu = make_pair(rng.uniform(0.999, 1.001, shape),
                                     dtype)
            a, b = getattr(cpu, op)(dim), getattr(gpu, op)(dim)
            scale = 1 if op == "cumprod" else 4
            assert_same(b, a, k=n * scale)


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_cumsum_is_fp32_unless_dtype_given():
    x = ampc.ones(4, 3, device="cuda").half()
    with ampc.autocast("cuda"):
        assert x.cumsum(0).dtype is ampc.float32
        assert x.cumprod(1).dtype is ampc.float32
        assert x.cumsum(0, dtype=ampc.float16).dtype is ampc.float16
        assert x.sort(0).values.dtype is ampc.float16


@pytest.mark.cuda
@requires_cuda
def test_cuda_grads_match_cpu():
    rng = np.random.default_rng(41)
    v = rng.permutation(60).reshape(6, 10) / 7
    v[0, 3] = 0.0
    for f in (lambda t: t.cumprod(1), lambda t: t.cumsum(0),
              lambda t: t.sort(0).values, lambda t: t.topk(3).values):
        cpu, gpu = make_pair(v, "float32", requires_grad=True)
        w = from_values(rng.uniform(0.5, 1.5, tuple(f(cpu).shape)),
                        "float32")
        (f(cpu) * w).sum().backward()
        (f(gpu) * w.to("cuda")).sum().backward()
        assert_same(gpu.grad, cpu.grad, k=10)
