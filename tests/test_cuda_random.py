"""Random numbers on CUDA: every kind and dtype bit for bit with the CPU
draws of the same seed; and, needing no GPU, a Python recomputation of
csrc/philox.h (IEEE double, no FMA, as the C and CUDA code are written)
that checks the CPU draws bit for bit, so the shared transforms are
covered here.
"""
import math
import struct

import numpy as np
import pytest

import ampc
from cuda_helpers import requires_cuda
from helpers import bits, to64

FLOATS = ("float32", "float16", "bfloat16")
ALL = FLOATS + ("int64", "bool")
SIZES = (1, 7, 1023, 100003)

# ----------------------------------------------------------------------------
# random numbers: bit for bit with the CPU

RANDOM = {
    "uniform": lambda t: t.uniform_(-2.0, 3.0),
    "uniform01": lambda t: t.uniform_(),
    "normal": lambda t: t.normal_(1.5, 2.0),
    "randint": lambda t: t.random_(-5, 17),
    "bernoulli": lambda t: t.bernoulli_(0.3),
}


def raw_bits(t):
    """The raw bit patterns of a tensor of any dtype (bits() takes only
    float16/bfloat16)."""
    if t.dtype in (ampc.float16, ampc.bfloat16):
        return bits(t)
    a = np.asarray(t.contiguous().numpy())
    return a.view(np.uint32) if a.dtype == np.float32 else a


def draw_on(device, kind, dtype, n, seed, offset):
    ampc._C.set_rng_state((seed, offset))
    t = ampc.empty(n, dtype=getattr(ampc, dtype), device=device)
    RANDOM[kind](t)
    return t, ampc._C.get_rng_state()


@pytest.mark.parametrize("offset", [0, 4, 5, 4098, 2 ** 64 - 6])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("kind", list(RANDOM))
@pytest.mark.cuda
@requires_cuda
def test_random_bits_equal_cpu(kind, dtype, n, offset):
    if kind not in ("randint", "bernoulli") and dtype in ("int64", "bool"):
        pytest.skip("float kinds only")
    if kind == "randint" and dtype == "bool":
        pytest.skip("randint into bool is an error")
    c, cstate = draw_on("cpu", kind, dtype, n, 1234567, offset)
    g, gstate = draw_on("cuda", kind, dtype, n, 1234567, offset)
    assert gstate == cstate, "the generator advanced differently"
    got, want = raw_bits(g.cpu()), raw_bits(c)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"{bad.size} of {n} draws differ, first at {bad[:5]}: cuda "
        f"{to64(g.cpu())[bad[:5]]}, cpu {to64(c)[bad[:5]]}")


@pytest.mark.cuda
@requires_cuda
def test_random_creation_functions_equal_cpu():
    for make in (lambda d: ampc.rand(3, 1001, device=d),
                 lambda d: ampc.randn(7, 13, device=d,
                                      dtype=ampc.bfloat16),
                 lambda d: ampc.randint(0, 1000, (4099,), device=d)):
        ampc.manual_seed(99)
        c = make("cpu")
        ampc.manual_seed(99)
        g = make("cuda")
        assert (raw_bits(g.cpu()) == raw_bits(c)).all()


# ----------------------------------------------------------------------------
# no GPU needed: the CPU draws equal a Python recomputation of philox.h

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
U32 = 0xFFFFFFFF
KIND = {"uniform": 0, "normal": 1, "randint": 2, "bernoulli": 3}


def philox(ctr, key):
    c = list(ctr)
    k0, k1 = key
    for rnd in range(10):
        if rnd:
            k0, k1 = (k0 + W0) & U32, (k1 + W1) & U32
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & U32, p1 & U32,
             ((p0 >> 32) ^ c[3] ^ k1) & U32, p0 & U32]
    return c


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits64(u):
    return struct.unpack("<d", struct.pack("<Q", u))[0]


def rand_log(x):
    """philox.h ampc_rand_log, operation for operation."""
    u = f64_bits(x)
    e = ((u >> 52) & 0x7FF) - 1023
    m = from_bits64((u & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    if m > 1.4142135623730951:
        m = m * 0.5
        e += 1
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = 0.08
    for c in (0.08695652173913043, 0.09523809523809523, 0.10526315789473684,
              0.11764705882352941, 0.13333333333333333, 0.15384615384615385,
              0.18181818181818182, 0.22222222222222222, 0.2857142857142857,
              0.4, 0.6666666666666666):
        p = c + z * p
    lm = 2.0 * s + (s * z) * p
    de = float(e)
    return de * 0.6931471803691238 + (lm + de * 1.9082149292705877e-10)


def sincos_small(x):
    z = x * x
    ps = 2.8114572543455206e-15
    for c in (-7.647163731819816e-13, 1.6059043836821613e-10,
              -2.505210838544172e-08, 2.7557319223985893e-06,
              -0.0001984126984126984, 0.008333333333333333,
              -0.16666666666666666):
        ps = c + z * ps
    s = x + (x * z) * ps
    pc = 1.5619206968586225e-16
    for c in (-4.779477332387385e-14, 1.1470745597729725e-11,
              -2.08767569878681e-09, 2.755731922398589e-07,
              -2.48015873015873e-05, 0.001388888888888889,
              -0.041666666666666664):
        pc = c + z * pc
    pc = 0.5 + z * pc
    return s, 1.0 - z * pc


def sincos_turn(j):
    q, r = (j >> 22) & 3, j & 0x3FFFFF
    swap = r > 0x200000
    if swap:
        r = 0x400000 - r
    s, c = sincos_small((r * 2.0 ** -22) * 1.5707963267948966)
    if swap:
        s, c = c, s
    return [(s, c), (c, -s), (-s, -c), (-c, s)][q]


def store(v, dtype, hi=None):
    """float64 v as dtype (RNE once), stepped below hi for uniform."""
    if dtype == "float16":
        out = np.float16(v)
        while hi is not None and float(out) >= hi:
            out = np.nextafter(out, np.float16(-np.inf))
        return float(out)
    out = np.float32(v)
    while hi is not None and float(out) >= hi:
        out = np.nextafter(out, np.float32(-np.inf))
    return float(out)


def oracle(kind, dtype, n, seed, offset, lo, hi):
    out = []
    shift = 1 if kind == "randint" else 2
    for i in range(n):
        g = (offset + i) % 2 ** 64
        ctr = g >> shift
        w = philox([ctr & U32, ctr >> 32, KIND[kind], 0],
                   (seed & U32, seed >> 32))
        if kind == "uniform":
            u = float(w[g & 3] >> 8) * 2.0 ** -24
            out.append(store(lo + (hi - lo) * u, dtype, hi))
        elif kind == "normal":
            k = g & 2
            u1 = float((w[k] >> 8) + 1) * 2.0 ** -24
            rad = math.sqrt(-2.0 * rand_log(u1))
            st, ct = sincos_turn(w[k + 1] >> 8)
            z = rad * (st if g & 1 else ct)
            out.append(store(lo + hi * z, dtype))
        elif kind == "randint":
            j = (g & 1) * 2
            b = w[j] | (w[j + 1] << 32)
            span = int(hi) - int(lo)
            out.append(float(int(lo) + b % span))
        else:
            out.append(1.0 if float(w[g & 3]) * 2.0 ** -32 < lo else 0.0)
    return np.array(out)


@pytest.mark.parametrize("offset", [0, 5, 2 ** 64 - 6])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind,lo,hi", [
    ("uniform", -2.0, 3.0), ("uniform", 0.0, 1.0), ("normal", 1.5, 2.0),
    ("normal", 0.0, 1.0), ("randint", -5.0, 17.0), ("bernoulli", 0.3, 0.0),
])
def test_philox_oracle_cpu(kind, lo, hi, dtype, offset):
    """The CPU draws (csrc/philox.h, shared with cuda/random.cu) equal a
    Python recomputation with the same IEEE double operations: the
    transforms really are exact, portable arithmetic."""
    n = 203
    seed = 0x123456789ABCDEF
    ampc._C.set_rng_state((seed, offset))
    t = ampc.empty(n, dtype=getattr(ampc, dtype))
    if kind == "uniform":
        t.uniform_(lo, hi)
    elif kind == "normal":
        t.normal_(lo, hi)
    elif kind == "randint":
        t.random_(int(lo), int(hi))
    else:
        t.bernoulli_(lo)
    want = oracle(kind, dtype, n, seed, offset, lo, hi)
    np.testing.assert_array_equal(to64(t), want)


def test_rand_log_and_sincos_accuracy():
    """The polynomials stay within a few ulps of libm, so the normal
    distribution is right to double precision."""
    for k in (1, 2, 3, 1000, 2 ** 23, 2 ** 24 - 1, 2 ** 24):
        u = k * 2.0 ** -24
        assert abs(rand_log(u) - math.log(u)) <= 4e-16 * max(
            1.0, abs(math.log(u)))
    for j in range(0, 2 ** 24, 99991):
        s, c = sincos_turn(j)
        t = 2 * math.pi * j / 2 ** 24
        assert abs(s - math.sin(t)) < 2e-15
        assert abs(c - math.cos(t)) < 2e-15
