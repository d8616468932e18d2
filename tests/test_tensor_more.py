"""prod, logsumexp, count_nonzero, lerp, addcmul, addcdiv and nan_to_num
(ampc/_tensor_more.py) against float64 NumPy, finite differences and
torch."""
import math

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import assert_same, make_pair, requires_cuda
from helpers import (ALL_NAMES, FLOAT_NAMES, assert_close, gradcheck, make,
                     rand_values, to64, to_torch, torch_or_skip)

SIZES = (1, 7, 33, 1031)
INF, NAN = math.inf, math.nan


def _tol(dtype, n):
    """A product or sum of n float32 terms, rounded to dtype."""
    r, _ = ref.tolerance(dtype)
    return r + n * 2.0 ** -23


# ----------------------------------------------------------------------------
# prod


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_prod_all_and_dims(dtype, n, rng):
    low, high = (0.5, 1.5) if dtype in FLOAT_NAMES else (-2, 2)
    v = rand_values((3, n), dtype, rng, low, high)
    if dtype == "int64":
        v = np.where(rng.random(v.shape) < 0.8, np.sign(v) + (v == 0), v)
    for layout in ("contig", "step"):
        x = make(v, dtype, layout)
        want = "int64" if dtype in ("int64", "bool") else dtype
        for dim in (None, 0, 1, -1):
            for keepdim in (False, True):
                got = x.prod() if dim is None and not keepdim else \
                    x.prod(dim, keepdim) if dim is not None else \
                    x.prod(None, True)
                e = np.prod(v, axis=dim, keepdims=keepdim)
                assert got.dtype.name == want
                t = _tol(dtype, v.size)
                assert_close(got, e, want, rtol=t, atol=0 if want ==
                             "int64" else 1e-30, msg=f"dim={dim} ")


def test_prod_int64_wraps_and_dtype_arg():
    x = ampc.tensor([2 ** 40, 2 ** 40])
    assert x.prod().item() == (2 ** 80) % 2 ** 64    # wraps, as torch
    h = ampc.tensor([300.0, 300.0]).half()
    assert h.prod().item() == INF                    # rounded once
    assert h.prod(dtype=ampc.float32).item() == 90000.0
    assert ampc.tensor([True, True]).prod().dtype is ampc.int64
    assert ampc.zeros(0).prod().item() == 1.0
    assert ampc.zeros(2, 0).prod(1).tolist() == [1.0, 1.0]
    assert ampc.tensor(3.0).prod(0).item() == 3.0


def test_prod_gradient_finite_differences():
    gradcheck(lambda x: x.prod(1), lambda x: np.prod(x, 1), [(3, 7)],
              low=0.5, high=1.5)
    gradcheck(lambda x: x.prod(), lambda x: np.prod(x), [(9,)],
              low=0.5, high=1.5)


def test_prod_gradient_with_zeros_matches_torch():
    torch = torch_or_skip()
    v = np.array([[0.0, 2.0, 3.0, 4.0], [0.0, 0.0, 2.0, 1.0],
                  [1.0, 2.0, 3.0, 5.0]], dtype=np.float32)
    for dim in (None, 1, 0):
        a = ampc.tensor(v, requires_grad=True)
        b = torch.tensor(v, requires_grad=True)
        (a.prod() if dim is None else a.prod(dim)).sum().backward()
        (b.prod() if dim is None else b.prod(dim)).sum().backward()
        assert np.allclose(to64(a.grad), b.grad.numpy()), dim


def test_prod_second_derivative():
    x = ampc.tensor([2.0, 3.0, 0.0], requires_grad=True)
    g, = ampc.autograd.grad(x.prod(), x, create_graph=True)
    assert g.tolist() == [0.0, 0.0, 6.0]
    h, = ampc.autograd.grad(g[2], x)
    assert h.tolist() == [3.0, 2.0, 0.0]


def test_prod_matches_torch_dtypes():
    torch = torch_or_skip()
    for name in ALL_NAMES:
        x = make(rand_values((4, 5), name, np.random.default_rng(3), -2, 2),
                 name)
        for dim in (None, 1):
            a = x.prod() if dim is None else x.prod(dim)
            t = to_torch(torch, x)
            b = t.prod() if dim is None else t.prod(dim)
            assert a.dtype.name == str(b.dtype).split(".")[1], name


def test_prod_autocast_cpu_runs_in_float32():
    torch = torch_or_skip()
    x = ampc.tensor([1.5, 2.0, 3.0]).bfloat16()
    with ampc.autocast("cpu"):
        a = x.prod()
    with torch.autocast("cpu"):
        b = to_torch(torch, x).prod()
    assert a.dtype is ampc.float32 and b.dtype == torch.float32
    assert a.item() == b.item()


def test_prod_is_rounded_once_from_double(cpu_level):
    # float32 partial products would overflow to inf on the way
    v = np.array([1e30, 1e30, 1e-30, 1e-30, 3.0] * 7, dtype=np.float32)
    x = ampc.tensor(v)
    assert x.prod().item() == np.float32(np.prod(v.astype(np.float64)))
    assert x.reshape(7, 5).t().prod(1).tolist()[2:] == [0.0, 0.0, 2187.0]
    assert x.reshape(7, 5).prod(0).tolist()[:2] == [INF, INF]


def test_prod_levels_agree(cpu_level, rng):
    v = rand_values((5, 1031), "float32", rng, 0.5, 1.5)
    for layout in ("contig", "t"):
        x = make(v if layout == "contig" else v.T.copy(), "float32", layout)
        assert_close(x.prod(-1 if layout == "contig" else 0),
                     np.prod(v, 1), rtol=1e-6, atol=0)
    big = make(rand_values((300000,), "float32", rng, 0.999, 1.001),
               "float32")
    assert_close(big.prod(), np.prod(to64(big)), rtol=1e-6, atol=0)


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_prod_cuda_matches_cpu(dtype):
    rng = np.random.default_rng(6)
    for shape in ((3, 7), (4, 33, 5), (2, 1031), (1, 300000), (70000, 3)):
        low, high = (0.999, 1.001) if dtype in FLOAT_NAMES else (-1, 1)
        cpu, gpu = make_pair(rand_values(shape, dtype, rng, low, high),
                             dtype)
        for dim in (None, 0, -1, 1 if len(shape) > 2 else 0):
            a = cpu.prod() if dim is None else cpu.prod(dim)
            b = gpu.prod() if dim is None else gpu.prod(dim, keepdim=True)
            if dim is not None:
                b = b.squeeze(dim)
            assert_same(b, a, rtol=1e-6 if dtype == "float32" else None,
                        msg=f"{shape} dim={dim} ")
    x = ampc.tensor([0.0, 2.0, 3.0], device="cuda", requires_grad=True)
    x.prod().backward()
    assert x.grad.cpu().tolist() == [6.0, 0.0, 0.0]


def test_prod_errors():
    x = ampc.ones(2, 3)
    with pytest.raises(TypeError, match=r"prod\(\): argument 'dim'"):
        x.prod((0, 1))
    with pytest.raises(IndexError, match="prod"):
        x.prod(2)


def test_prod_speed_is_reasonable():
    import time
    x = ampc.rand(1000, 1031) + 0.5
    t0 = time.perf_counter()
    for _ in range(3):
        x.prod(1)
        x.prod(0)
    assert time.perf_counter() - t0 < 2.0


# ----------------------------------------------------------------------------
# logsumexp and count_nonzero


def _lse(v, dims, keepdim):
    m = np.max(v, axis=dims, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(v - m), axis=dims, keepdims=True)) + m
    return out if keepdim else np.squeeze(out, axis=dims)


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_logsumexp_values(dtype, n, rng):
    v = rand_values((2, n), dtype, rng, -30, 30)
    for layout in ("contig", "step"):
        x = make(v, dtype, layout)
        for dims in (0, 1, (0, 1), -1):
            for keepdim in (False, True):
                got = x.logsumexp(dims, keepdim)
                want = dtype if dtype in FLOAT_NAMES else "float32"
                assert got.dtype.name == want
                d = dims if isinstance(dims, tuple) else (dims,)
                assert_close(got, _lse(v, d, keepdim), want,
                             rtol=_tol(want, 4), atol=1e-5)


def test_logsumexp_special_values_match_torch():
    torch = torch_or_skip()
    rows = [[-INF, -INF], [INF, 1.0], [INF, INF], [NAN, 1.0], [1e30, 1e30],
            [-1e30, 5.0], [-INF, 2.0]]
    x = ampc.tensor(rows)
    a = x.logsumexp(1)
    b = torch.tensor(rows).logsumexp(1)
    assert np.array_equal(to64(a), b.double().numpy(), equal_nan=True)
    assert ampc.zeros(0, 3).logsumexp(0).tolist() == [-INF] * 3
    assert ampc.logsumexp(ampc.tensor(2.0), 0).item() == 2.0


def test_logsumexp_gradient():
    gradcheck(lambda x: x.logsumexp(1), lambda x: _lse(x, (1,), False),
              [(3, 5)])
    gradcheck(lambda x: x.logsumexp((0, 1), True),
              lambda x: _lse(x, (0, 1), True), [(2, 3)])


def test_logsumexp_errors():
    with pytest.raises(TypeError):
        ampc.ones(2).logsumexp()
    with pytest.raises(IndexError, match="logsumexp"):
        ampc.ones(2).logsumexp(1)


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_count_nonzero(dtype, rng):
    v = rand_values((4, 33), dtype, rng, -1, 1)
    v[0, :5] = 0
    x = make(v, dtype, "step")
    assert x.count_nonzero().item() == np.count_nonzero(v)
    for dim in (0, 1, (0, 1), -1):
        got = ampc.count_nonzero(x, dim)
        assert got.dtype is ampc.int64
        assert got.tolist() == np.count_nonzero(v, axis=dim).tolist()
    assert ampc.tensor([NAN, 0.0]).count_nonzero().item() == 1


# ----------------------------------------------------------------------------
# lerp, addcmul, addcdiv


def _lerp_ref(s, e, w):
    return np.where(np.abs(w) < 0.5, s + w * (e - s), e - (e - s) * (1 - w))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", (1, 7, 1031))
def test_lerp_values(dtype, n, rng):
    s, e, w = (rand_values((3, n), dtype, rng) for _ in range(3))
    a, b = make(s, dtype, "step"), make(e, dtype)
    assert_close(a.lerp(b, make(w, dtype)), _lerp_ref(s, e, w), dtype,
                 k=4)
    assert_close(ampc.lerp(a, b, 0.75), _lerp_ref(s, e, 0.75), dtype, k=4)
    assert_close(a.lerp(b[:1], 0.25), _lerp_ref(s, e[:1], 0.25), dtype,
                 k=4)
    c = a.clone()
    assert c.lerp_(b, 0.3) is c
    assert_close(c, _lerp_ref(s, e, 0.3), dtype, k=4)


def test_lerp_ends_exact_and_vs_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(5)
    s = rng.normal(size=1031).astype(np.float32)
    e = rng.normal(size=1031).astype(np.float32)
    w = rng.uniform(-1, 2, size=1031).astype(np.float32)
    a = ampc.tensor(s).lerp(ampc.tensor(e), ampc.tensor(w))
    b = torch.tensor(s).lerp(torch.tensor(e), torch.tensor(w))
    assert np.allclose(to64(a), b.numpy(), rtol=1e-6, atol=1e-6)
    assert ampc.tensor(s).lerp(ampc.tensor(e), 1.0).tolist() == \
        ampc.tensor(e).tolist()


def test_lerp_gradient():
    gradcheck(lambda s, e, w: s.lerp(e, w), _lerp_ref,
              [(3, 4), (4,), (3, 1)], low=-1, high=1)
    gradcheck(lambda s, e: s.lerp(e, 0.7), lambda s, e: _lerp_ref(s, e, .7),
              [(5,), (5,)])


def test_lerp_errors():
    x = ampc.zeros(2)
    with pytest.raises(RuntimeError, match="lerp.*`end`.*float16"):
        x.lerp(x.half(), 0.5)
    with pytest.raises(RuntimeError, match="lerp.*`weight`"):
        x.lerp(x, x.half())
    with pytest.raises(RuntimeError, match="lerp"):
        ampc.zeros(2, dtype=ampc.int64).lerp(ampc.zeros(2,
                                                        dtype=ampc.int64), 1)
    with pytest.raises(TypeError, match="lerp.*'end'"):
        x.lerp(1.0, 0.5)
    with pytest.raises(RuntimeError, match="lerp_.*broadcast shape"):
        x.lerp_(ampc.zeros(3, 2), 0.5)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_addcmul_addcdiv_values(dtype, rng):
    s, a, b = (rand_values(sh, dtype, rng) for sh in
               ((4, 33), (33,), (4, 1)))
    b = np.where(b == 0, 1.0, b)
    x, t1, t2 = make(s, dtype, "step"), make(a, dtype), make(b, dtype)
    assert_close(x.addcmul(t1, t2, value=0.5), s + 0.5 * a * b, dtype, k=3)
    assert_close(ampc.addcdiv(x, t1, t2, value=-2), s - 2 * a / b, dtype,
                 k=3)
    y = x.clone()
    assert y.addcmul_(t1, t2) is y
    assert_close(y, s + a * b, dtype, k=3)
    y = x.clone()
    y.addcdiv_(t1, t2, value=3)
    assert_close(y, s + 3 * a / b, dtype, k=3)


def test_addcmul_promotion_matches_torch():
    torch = torch_or_skip()
    cases = [("float16", "float32", "float32"), ("int64", "int64", "int64"),
             ("bfloat16", "int64", "bfloat16"), ("bool", "float16", "bool")]
    for d0, d1, d2 in cases:
        xs = [ampc.ones(3, dtype=getattr(ampc, d)) for d in (d0, d1, d2)]
        ts = [to_torch(torch, x) for x in xs]
        a = xs[0].addcmul(xs[1], xs[2])
        b = ts[0].addcmul(ts[1], ts[2])
        assert a.dtype.name == str(b.dtype).split(".")[1], (d0, d1, d2)
        assert to64(a).tolist() == b.double().tolist()
    s = ampc.ones(2).half()
    assert s.addcmul(ampc.tensor(2.0), ampc.tensor(3.0)).dtype is \
        ampc.float16


def test_addcmul_addcdiv_gradients():
    gradcheck(lambda s, a, b: s.addcmul(a, b, value=0.5),
              lambda s, a, b: s + 0.5 * a * b, [(3, 4), (4,), (3, 1)])
    gradcheck(lambda s, a, b: ampc.addcdiv(s, a, b, value=2),
              lambda s, a, b: s + 2 * a / b, [(3, 4), (4,), (3, 1)],
              low=0.5, high=2)


def test_addcdiv_errors():
    i = ampc.ones(2, dtype=ampc.int64)
    with pytest.raises(RuntimeError, match="addcdiv.*Integer division"):
        i.addcdiv(i, i)
    with pytest.raises(RuntimeError, match="addcmul_.*broadcast shape"):
        ampc.zeros(2).addcmul_(ampc.ones(3, 2), ampc.ones(2))
    with pytest.raises(TypeError, match="addcmul.*'tensor2'"):
        ampc.zeros(2).addcmul(ampc.ones(2), 2.0)
    with pytest.raises(TypeError, match="addcmul.*'value'"):
        ampc.zeros(2).addcmul(ampc.ones(2), ampc.ones(2), value="a")


# ----------------------------------------------------------------------------
# nan_to_num


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_nan_to_num_defaults_match_torch(dtype):
    torch = torch_or_skip()
    v = [NAN, INF, -INF, 1.5, -0.0]
    x = ampc.tensor(v).to(getattr(ampc, dtype))
    t = torch.tensor(v).to(getattr(torch, dtype))
    assert np.array_equal(to64(x.nan_to_num()),
                          t.nan_to_num().double().numpy())
    assert np.array_equal(to64(ampc.nan_to_num(x, 1.0, 2.0, -3.0)),
                          t.nan_to_num(1.0, 2.0, -3.0).double().numpy())
    y = x[::2]
    assert y.nan_to_num_(neginf=7.0) is y
    assert to64(x).tolist() == [0.0, INF, 7.0, 1.5, -0.0]


def test_nan_to_num_ints_and_gradient():
    i = ampc.tensor([1, 2])
    j = i.nan_to_num()
    assert j.tolist() == [1, 2] and j.data_ptr() != i.data_ptr()
    x = ampc.tensor([NAN, 2.0, INF, -3.0], requires_grad=True)
    x.nan_to_num().sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(TypeError, match="nan_to_num.*'posinf'"):
        ampc.zeros(1).nan_to_num(posinf="x")
