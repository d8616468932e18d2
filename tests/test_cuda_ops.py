"""Element-wise ops and reductions on CUDA tensors, against the same ops
on the CPU (which the CPU suite checks against NumPy) and, where torch with
CUDA is importable, against torch on the GPU.  Random numbers are
tests/test_cuda_random.py.

Exact equality wherever the GPU computes what the CPU computes with the
same IEEE operations (add, sub, mul, div, maximum, minimum, comparisons,
neg, abs, sqrt, relu, sign, clamp, max/min/argmax/argmin, int64 and bool
everything); a dtype tolerance for the libm functions (exp, log, pow) and
for sums (a different summation order).
"""
import operator

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import (assert_same, make_pair, requires_cuda,
                          torch_cuda)
from helpers import from_values, to64

cuda = [pytest.mark.cuda, requires_cuda]

FLOATS = ("float32", "float16", "bfloat16")
ALL = FLOATS + ("int64", "bool")
SIZES = (1, 7, 1023, 100003)


def values(shape, dtype, seed=0, specials=True, low=-4.0, high=4.0):
    """float64 values that dtype holds exactly; float ones include NaN,
    +-inf, +-0 and repeated values (ties for max/min) when there is
    room."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return (rng.random(shape) < 0.5).astype(np.float64)
    if dtype == "int64":
        return rng.integers(int(low), int(high) + 1, size=shape) \
            .astype(np.float64)
    v = ref.round_to(rng.uniform(low, high, size=shape), dtype)
    flat = v.reshape(-1)
    if specials and flat.size >= 16:
        pos = rng.choice(flat.size, 6, replace=False)
        flat[pos] = [np.nan, np.inf, -np.inf, -0.0, 0.0, flat[pos[0]]]
    return v


def exact(cuda_t, cpu_t, msg=""):
    assert_same(cuda_t, cpu_t, rtol=0.0, atol=0.0, msg=msg)


def on_cuda(t):
    return t.to("cuda")


# ----------------------------------------------------------------------------
# binary ops

BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "div": operator.truediv, "maximum": ampc.maximum,
    "minimum": ampc.minimum, "pow": operator.pow,
}
# libm powf differs by an ulp between glibc and CUDA
BINARY_EXACT = ("add", "sub", "mul", "div", "maximum", "minimum")

SHAPES = [
    ((7,), (7,)), ((1023,), (1023,)), ((100003,), (100003,)), ((1,), (1,)),
    ((0,), (0,)), ((5, 1, 7), (3, 7)), ((4, 1), (1, 9)), ((), (6,)),
    ((2, 3, 5), ()),
]


def binary_inputs(op, dtype, sa, sb, seed=0):
    if op == "pow" and dtype in ("int64", "bool"):
        a = values(sa, dtype, seed, low=-3, high=3)
        b = values(sb, dtype, seed + 1, low=0, high=4)
    elif op == "pow":
        a = np.abs(values(sa, dtype, seed, low=0.1, high=3))
        b = values(sb, dtype, seed + 1, low=-2, high=2)
    else:
        a = values(sa, dtype, seed)
        b = values(sb, dtype, seed + 1)
    return a, b


def skip_invalid(op, dtype):
    if op == "sub" and dtype == "bool":
        pytest.skip("bool subtraction is an error (tested below)")


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.cuda
@requires_cuda
def test_binary_broadcast(op, dtype, shapes):
    skip_invalid(op, dtype)
    a, b = binary_inputs(op, dtype, *shapes)
    ca, ga = make_pair(a, dtype)
    cb, gb = make_pair(b, dtype)
    want, got = BINARY[op](ca, cb), BINARY[op](ga, gb)
    if op in BINARY_EXACT or dtype in ("int64", "bool"):
        exact(got, want)
    else:
        assert_same(got, want)


@pytest.mark.parametrize("layout", ["step", "t", "expand", "offset"])
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.cuda
@requires_cuda
def test_binary_strided(op, dtype, layout):
    skip_invalid(op, dtype)
    shape = (1, 33) if layout == "expand" else (17, 33)
    a, b = binary_inputs(op, dtype, shape, shape, seed=3)
    ca, ga = make_pair(a, dtype, layout)
    # "offset": a dense but misaligned input beside an aligned one and an
    # aligned output (the vector path needs every operand aligned)
    cb, gb = make_pair(b, dtype, "contig" if layout in ("t", "offset")
                       else layout)
    want, got = BINARY[op](ca, cb), BINARY[op](ga, gb)
    if op in BINARY_EXACT or dtype in ("int64", "bool"):
        exact(got, want)
    else:
        assert_same(got, want)


SCALAR_FNS = {
    "x+2.5": lambda x: x + 2.5, "2.5-x": lambda x: 2.5 - x,
    "x*65536": lambda x: x * 65536.0,      # not a float16: opmath keeps it
    "3/x": lambda x: 3.0 / x, "x/3": lambda x: x / 3.0,
    "x-1e-4": lambda x: x - 1e-4, "x*3(int)": lambda x: x * 3,
    "x+True": lambda x: x + True, "x**2": lambda x: x ** 2,
    "2**x": lambda x: 2 ** x,
}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("fn", list(SCALAR_FNS))
@pytest.mark.cuda
@requires_cuda
def test_binary_python_scalar(fn, dtype, n):
    if dtype == "bool" and fn in ("2.5-x", "x-1e-4"):
        pytest.skip("float scalar with bool: covered by the others")
    low = 0.5 if "**" in fn else -4.0
    x = values((n,), dtype, n, specials="**" not in fn, low=low)
    c, g = make_pair(x, dtype)
    f = SCALAR_FNS[fn]
    want, got = f(c), f(g)
    if "**" in fn and want.dtype.is_floating_point:
        assert_same(got, want)
    else:
        exact(got, want)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("zdtype", ("float32", "float16", "int64"))
@pytest.mark.cuda
@requires_cuda
def test_binary_zero_dim_tensors(dtype, zdtype):
    """A 0-d operand on the GPU (float16/bfloat16 opmath from device
    memory), and a 0-d CPU tensor beside a CUDA tensor (as PyTorch
    allows): both as the CPU computes."""
    x = values((1023,), dtype, 5)
    c, g = make_pair(x, dtype)
    z = from_values(np.array(3.3 if zdtype != "int64" else 3.0), zdtype)
    for f in (lambda x, z: x * z, lambda x, z: z - x,
              lambda x, z: ampc.maximum(x, z)):
        want = f(c, z)
        exact(f(g, on_cuda(z)), want)
        exact(f(g, z), want)


@pytest.mark.cuda
@requires_cuda
def test_binary_zero_dim_both():
    a, b = ampc.tensor(2.5), ampc.tensor(4.0, dtype=ampc.float16)
    exact(on_cuda(a) * on_cuda(b), a * b)
    exact(on_cuda(a) + 1, a + 1)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.cuda
@requires_cuda
def test_binary_empty(dtype):
    c, g = make_pair(np.zeros((0, 3)), dtype)
    exact(g * g, c * c)
    exact(g + 1, c + 1)


@pytest.mark.parametrize("dtype", FLOATS + ("int64",))
@pytest.mark.cuda
@requires_cuda
def test_binary_in_place(dtype):
    x = values((37, 41), dtype, 9)
    y = values((41,), dtype, 10)
    c, g = make_pair(x, dtype)
    cy, gy = make_pair(y, dtype)
    for f in (lambda t, u: t.add_(u), lambda t, u: t.mul_(2),
              lambda t, u: t.sub_(u[:1]), lambda t, u: t.clamp_(-1, 2)):
        rc, rg = f(c, cy), f(g, gy)
        assert rg is g and rc is c
        exact(g, c)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.cuda
@requires_cuda
def test_binary_in_place_overlap(dtype):
    """An input that overlaps the output without being it is copied
    first, on both devices."""
    x = values((1000,), dtype, 11, specials=False)
    c, g = make_pair(x, dtype)
    c[1:].add_(c[:-1])
    g[1:].add_(g[:-1])
    exact(g, c)
    c2, g2 = make_pair(x.reshape(25, 40), dtype)
    c2[:, 1:].mul_(c2[:, :-1])
    g2[:, 1:].mul_(g2[:, :-1])
    exact(g2, c2)
    c3, g3 = make_pair(x.reshape(25, 40)[:, :25], dtype)
    c3.sub_(c3.t())
    g3.sub_(g3.t())
    exact(g3, c3)
    c4, g4 = make_pair(x.reshape(25, 40), dtype)
    c4.sub_(c4[:1])
    g4.sub_(g4[:1])
    c4.add_(c4[:, :1])
    g4.add_(g4[:, :1])
    exact(g4, c4)


@pytest.mark.parametrize("op", ["add", "mul", "maximum"])
@pytest.mark.cuda
@requires_cuda
def test_binary_out(op):
    """out= with another dtype goes through a temporary and a cast."""
    a, b = values((129,), "float16", 1), values((129,), "float16", 2)
    ca, ga = make_pair(a, "float16")
    cb, gb = make_pair(b, "float16")
    cout = ampc.empty(129)
    gout = ampc.empty(129, device="cuda")
    ampc._C.binary(op, ca, cb, cout)
    ampc._C.binary(op, ga, gb, gout)
    exact(gout, cout)


@pytest.mark.cuda
@requires_cuda
def test_binary_errors():
    g = ampc.ones(3, device="cuda")
    c = ampc.ones(3)
    msg = (r"Expected all tensors to be on the same device, but found at "
           r"least two devices, cuda:0 and cpu!")
    with pytest.raises(RuntimeError, match=msg):
        g + c
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        c * g
    with pytest.raises(RuntimeError, match=r"same device"):
        ampc._C.binary("add", g, g, c)
    with pytest.raises(RuntimeError, match=r"Subtraction, the `-` operator"):
        g.bool() - g.bool()
    with pytest.raises(RuntimeError, match=r"negative integer powers"):
        g.long() ** ampc.tensor([1, -1, 2], device="cuda")
    with pytest.raises(RuntimeError, match=r"doesn't match the broadcast"):
        ampc._C.binary("add", g, g, ampc.empty(4, device="cuda"))
    with pytest.raises(RuntimeError, match=r"can't be cast"):
        ampc._C.binary("add", g, g, ampc.empty(3, dtype=ampc.int64,
                                               device="cuda"))
    with pytest.raises(RuntimeError, match=r"single memory location"):
        ampc.zeros(1, device="cuda").expand(3).add_(g)


# ----------------------------------------------------------------------------
# comparisons, unary ops, clamp

COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


@pytest.mark.parametrize("shapes", SHAPES[:7], ids=str)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.cuda
@requires_cuda
def test_compare(op, dtype, shapes):
    a = values(shapes[0], dtype, 1, low=-2, high=2)
    b = values(shapes[1], dtype, 2, low=-2, high=2)
    ca, ga = make_pair(a, dtype)
    cb, gb = make_pair(b, dtype)
    f = getattr(ampc, op)
    exact(f(ga, gb), f(ca, cb))
    exact(f(ga, 0.5), f(ca, 0.5))
    exact(f(ga, 1), f(ca, 1))
    t = ga.t() if ga.ndim == 2 else ga
    u = ca.t() if ca.ndim == 2 else ca
    exact(f(t, 1.0), f(u, 1.0))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.cuda
@requires_cuda
def test_compare_scalar_rounded(dtype):
    """A comparison rounds the Python scalar to the tensor's dtype first
    (no opmath), as the CPU does."""
    x = ampc.tensor([0.1, 0.2, 0.3], dtype=getattr(ampc, dtype))
    g = on_cuda(x)
    for v in (0.1, 0.2, 0.30000001):
        exact(g == v, x == v)
        exact(g < v, x < v)


UNARY = ("neg", "abs", "sqrt", "exp", "log", "relu", "sign", "sigmoid",
         "tanh", "isfinite")
UNARY_EXACT = ("neg", "abs", "sqrt", "relu", "sign", "isfinite")


@pytest.mark.parametrize("layout", ["contig", "step", "t"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", UNARY)
@pytest.mark.cuda
@requires_cuda
def test_unary(op, dtype, n, layout):
    floats = ("sqrt", "exp", "log", "sigmoid", "tanh")     # (bool -> float)
    if dtype == "bool" and op not in ("isfinite",) + floats:
        pytest.skip("not defined on bool")
    shape = (n,) if layout != "t" else (max(1, n // 7), 7)
    x = values(shape, dtype, n)
    c, g = make_pair(x, dtype, layout)
    f = lambda t: ampc._C.unary(op, t)    # noqa: E731
    want, got = f(c), f(g)
    if op in UNARY_EXACT or dtype in ("int64", "bool") and op not in floats:
        exact(got, want)
    else:
        assert_same(got, want)


@pytest.mark.parametrize("dtype", FLOATS + ("int64",))
@pytest.mark.cuda
@requires_cuda
def test_unary_in_place_and_out(dtype):
    x = values((100, 3), dtype, 4)
    c, g = make_pair(x, dtype)
    ampc._C.unary("neg", c, c)
    ampc._C.unary("neg", g, g)
    exact(g, c)
    co, go = ampc.empty(100, 3), ampc.empty(100, 3, device="cuda")
    ampc._C.unary("abs", c, co)
    ampc._C.unary("abs", g, go)
    exact(go, co)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.cuda
@requires_cuda
def test_misaligned_inputs_and_outputs(dtype):
    """One operand or the output one element into its storage (dense, but
    off the 16-byte alignment of the contiguous kernels' vector loads and
    stores) beside aligned ones: the kernels must take their element path
    (a wrong alignment test faults with 'misaligned address' or reads
    shifted values)."""
    n = 1027
    x, y = values((n,), dtype, 12), values((n,), dtype, 13)
    cx, gx = make_pair(x, dtype, "offset")
    cy, gy = make_pair(y, dtype)
    for op in ("add", "mul", "maximum"):
        exact(BINARY[op](gy, gx), BINARY[op](cy, cx), msg=f"{op}: ")
    for op in ("eq", "lt"):
        f = getattr(ampc, op)
        exact(f(gy, gx), f(cy, cx), msg=f"{op}: ")
    for op in ("isfinite",) + (() if dtype == "bool" else ("neg", "abs")):
        exact(ampc._C.unary(op, gx), ampc._C.unary(op, cx), msg=f"{op}: ")
    # misaligned outputs: in place, and out=
    cz, gz = make_pair(x, dtype, "offset")
    cz.add_(cy)
    gz.add_(gy)
    exact(gz, cz, msg="add_: ")
    dt = getattr(ampc, dtype)
    co = ampc.empty(n + 1, dtype=dt)[1:]
    go = ampc.empty(n + 1, dtype=dt, device="cuda")[1:]
    ampc._C.binary("maximum", cy, cx, co)
    ampc._C.binary("maximum", gy, gx, go)
    exact(go, co, msg="maximum(out=): ")


@pytest.mark.parametrize("bounds", [(-1, 1), (None, 0.5), (-0.25, None),
                                    (2, -2), (0, 3)])
@pytest.mark.parametrize("dtype", ALL[:4])
@pytest.mark.cuda
@requires_cuda
def test_clamp(dtype, bounds):
    x = values((3, 1001), dtype, 8)
    c, g = make_pair(x, dtype, "t" if dtype != "int64" else "contig")
    exact(g.clamp(*bounds), c.clamp(*bounds))
    exact(ampc.clamp(g, *bounds), ampc.clamp(c, *bounds))


# ----------------------------------------------------------------------------
# reductions

RED_SHAPES = [(7,), (1023,), (100003,), (1,), (3, 5, 7), (2, 1023),
              (1023, 3), (4, 0, 3), (5, 4099, 2), (3, 70000)]


def dims_of(shape):
    out = [None] + list(range(len(shape)))
    if len(shape) >= 2:
        out.append((0, len(shape) - 1))
    return out


@pytest.mark.parametrize("shape", RED_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.cuda
@requires_cuda
def test_sum_mean(op, dtype, shape):
    if op == "mean" and dtype in ("int64", "bool"):
        pytest.skip("mean of integers is an error (tested below)")
    x = values(shape, dtype, 2, specials=False)
    c, g = make_pair(x, dtype)
    for dim in dims_of(shape):
        for keepdim in (False, True):
            want = getattr(c, op)(dim, keepdim)
            got = getattr(g, op)(dim, keepdim)
            red = np.prod([shape[d] for d in (
                range(len(shape)) if dim is None else
                (dim if isinstance(dim, tuple) else (dim,)))])
            assert_same(got, want, k=max(1, int(red)),
                        msg=f"{op}(dim={dim}, keepdim={keepdim}): ")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.cuda
@requires_cuda
def test_sum_specials(dtype):
    """inf, -inf and NaN propagate through the tree as on the CPU."""
    x = values((4, 5000), dtype, 3)
    c, g = make_pair(x, dtype)
    for dim in (None, 0, 1):
        assert_same(g.sum(dim), c.sum(dim), k=5000)


@pytest.mark.parametrize("shape", RED_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
@pytest.mark.cuda
@requires_cuda
def test_extremes(op, dtype, shape):
    """Values and first indices exactly; a NaN wins; ties keep the first
    index (the values include repeats, +-0 and +-inf)."""
    if 0 in shape:
        pytest.skip("no identity (the error is tested below)")
    x = values(shape, dtype, 4, low=-3, high=3)
    c, g = make_pair(x, dtype)
    for dim in [None] + list(range(len(shape))):
        want = getattr(c, op)(dim) if dim is not None else getattr(c, op)()
        got = getattr(g, op)(dim) if dim is not None else getattr(g, op)()
        for w, o in zip(want if isinstance(want, tuple) else [want],
                        got if isinstance(got, tuple) else [got]):
            exact(o, w, msg=f"{op}(dim={dim}): ")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("where", [0, 1, 4097, 99999])
@pytest.mark.cuda
@requires_cuda
def test_extremes_nan_and_ties(dtype, where):
    x = np.zeros(100003)
    x[[5, where, 70000]] = [np.nan, np.nan, np.nan] if where != 1 else \
        [2.0, np.nan, np.nan]
    c, g = make_pair(x, dtype)
    for op in ("max", "min", "argmax", "argmin"):
        exact(getattr(g, op)(), getattr(c, op)())
        got, want = getattr(g, op)(0), getattr(c, op)(0)
        for o, w in zip(got if isinstance(got, tuple) else [got],
                        want if isinstance(want, tuple) else [want]):
            exact(o, w, msg=f"{op}(0): ")
    t = np.full((3, 50000), 1.0)
    t[1, 777] = t[1, 30000] = 2.0
    t[2, 12] = -1.0
    ct, gt = make_pair(t, dtype)
    for dim in (0, 1):
        exact(gt.argmax(dim), ct.argmax(dim))
        exact(gt.argmin(dim), ct.argmin(dim))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.cuda
@requires_cuda
def test_reduce_strided_input(dtype):
    x = values((6, 9, 11), dtype, 6, specials=False)
    c, g = make_pair(x, dtype, "t")
    for dim in (None, 0, 1, 2, (0, 2), (1, 2)):
        op = "sum"
        assert_same(getattr(g, op)(dim), getattr(c, op)(dim), k=99)
    for dim in (0, 1, 2):
        exact(g.max(dim)[0], c.max(dim)[0])
        exact(g.argmin(dim), c.argmin(dim))


@pytest.mark.cuda
@requires_cuda
def test_reduce_errors_and_empty():
    g = ampc.ones(3, 0, device="cuda")
    exact(g.sum(1), ampc.ones(3, 0).sum(1))
    exact(g.mean(1), ampc.ones(3, 0).mean(1))
    with pytest.raises(IndexError, match=r"max\(\): Expected reduction"):
        g.max(1)
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer"):
        ampc.ones(3, dtype=ampc.int64, device="cuda").mean()


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.cuda
@requires_cuda
def test_cat(dtype):
    parts = [values((3, n, 5), dtype, n) for n in (1, 4, 7)]
    pairs = [make_pair(p, dtype) for p in parts]
    exact(ampc.cat([p[1] for p in pairs], 1), ampc.cat([p[0] for p in pairs],
                                                       1))
    mixed = [pairs[0][1], pairs[1][1].float()]
    exact(ampc.cat(mixed, 1), ampc.cat([pairs[0][0], pairs[1][0].float()],
                                       1))
    with pytest.raises(RuntimeError, match=r"same device"):
        ampc.cat([pairs[0][1], pairs[1][0]], 1)


# ----------------------------------------------------------------------------
# gradients through the ops (autograd runs the same kernels)

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.cuda
@requires_cuda
def test_gradients(dtype):
    from cuda_helpers import assert_close_to_cpu
    a = values((17, 33), dtype, 1, specials=False, low=0.5, high=2)
    b = values((33,), dtype, 2, specials=False, low=0.5, high=2)
    assert_close_to_cpu(lambda x, y: (x * y + x / y - y).sum(1), a, b,
                        dtype=dtype, grad=True, k=33)
    assert_close_to_cpu(lambda x: (x.clamp(0.7, 1.5) * 3).mean(0), a,
                        dtype=dtype, grad=True, k=17)
    assert_close_to_cpu(lambda x: x.max(1)[0], a, dtype=dtype, grad=True)


# ----------------------------------------------------------------------------
# against torch on the GPU

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.cuda
@requires_cuda
def test_against_torch(dtype):
    torch = torch_cuda()
    from helpers import to_torch
    x = values((257, 129), dtype, 1, specials=False)
    y = values((129,), dtype, 2, specials=False)
    gx, gy = make_pair(x, dtype)[1], make_pair(y, dtype)[1]
    tx = to_torch(torch, gx.cpu()).cuda()
    ty = to_torch(torch, gy.cpu()).cuda()
    pairs = [
        (gx + gy, tx + ty), (gx * 0.1, tx * 0.1), (gx / gy, tx / ty),
        (ampc.maximum(gx, gy), torch.maximum(tx, ty)),
        (gx.clamp(-1, 1), tx.clamp(-1, 1)),
        (gx.abs().sqrt(), tx.abs().sqrt()),
        ((gx > gy), (tx > ty)), (gx.max(1)[0], tx.max(1)[0]),
        (gx.argmax(0), tx.argmax(0)),
    ]
    for mine, theirs in pairs:
        got = to64(mine.cpu())
        want = theirs.double().cpu().numpy() if theirs.dtype != torch.bool \
            else theirs.cpu().numpy().astype(np.float64)
        np.testing.assert_array_equal(got, want)
    for mine, theirs, k in ((gx.sum(1), tx.sum(1), 129),
                            (gx.mean(0), tx.mean(0), 257)):
        r, a = ref.tolerance(dtype, k)
        np.testing.assert_allclose(to64(mine.cpu()),
                                   theirs.double().cpu().numpy(),
                                   rtol=2 * r, atol=2 * a)
