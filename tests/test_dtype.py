"""Dtype conversions, bit for bit: all 65,536 float16 and bfloat16 patterns
both ways, float32 -> float16/bfloat16 round-to-nearest-even on ties,
subnormals and overflow, and casts between every pair of dtypes, on every
CPU level.  NumPy's float16 is the float16 oracle; bfloat16's is the uint32
formula in reference.py (design.md §9)."""
import pickle

import numpy as np
import pytest

import ampc
import reference as ref
from helpers import ALL_NAMES, BIG, DTYPES, assert_close, bits, from_values, \
    strided, to64

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def _f16_tensor(u16):
    return ampc._C.from_bits(np.ascontiguousarray(u16), ampc.float16)


def _bf16_tensor(u16):
    return ampc._C.from_bits(np.ascontiguousarray(u16), ampc.bfloat16)


def _f32_bits(t):
    return t.contiguous().numpy().view(np.uint32)


def _assert_same_f32(actual_f32_tensor, expected_f32):
    """Bit-exact float32 comparison; NaN only has to stay NaN."""
    got = actual_f32_tensor.numpy()
    nan = np.isnan(expected_f32)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32),
                          expected_f32[~nan].view(np.uint32))


def _f16_nan(u16):
    return ((u16 & 0x7C00) == 0x7C00) & ((u16 & 0x03FF) != 0)


def _bf16_nan(u16):
    return ((u16 & 0x7F80) == 0x7F80) & ((u16 & 0x007F) != 0)


def _check16(actual_bits, expected_bits, is_nan):
    exp_nan = is_nan(expected_bits)
    assert np.array_equal(is_nan(actual_bits), exp_nan), "NaN-ness differs"
    keep = ~exp_nan
    a, e = actual_bits[keep], expected_bits[keep]
    bad = np.nonzero(a != e)[0]
    assert bad.size == 0, (
        f"{bad.size} patterns differ; first: got {a[bad[:4]]}, expected "
        f"{e[bad[:4]]}")


def _interesting_f32(rng, n=200000):
    """Random float32 bit patterns plus float16/bfloat16 ties, subnormals
    and the overflow boundary."""
    rand = rng.integers(0, 2**32, size=n, dtype=np.uint64) \
        .astype(np.uint32).view(np.float32)
    f16 = ALL16.view(np.float16).astype(np.float32)
    f16 = f16[np.isfinite(f16)]
    f16s = np.sort(np.unique(f16))
    mids16 = ((f16s[:-1].astype(np.float64) + f16s[1:]) / 2).astype(
        np.float32)                          # exact ties (fit in float32)
    bf = ref.bf16_to_f32(ALL16)
    bf = np.sort(np.unique(bf[np.isfinite(bf)]))
    mids_bf = ((bf[:-1].astype(np.float64) + bf[1:]) / 2).astype(np.float32)
    special = np.array([0.0, -0.0, 65504.0, 65519.99, 65520.0, 65536.0,
                        -65520.0, 2.0**-24, 2.0**-25, 2.0**-26, 3 * 2.0**-26,
                        6.1e-5, 1e-8, np.inf, -np.inf, np.nan, 3.4e38,
                        1.17549435e-38, 1e-45], dtype=np.float32)
    return np.concatenate([rand, mids16, mids16 * np.float32(1.0000001),
                           mids_bf, f16, special])


@pytest.fixture(scope="module")
def f32_values():
    return _interesting_f32(np.random.default_rng(99))


# ----------------------------------------------------------------------------
# float16


def test_all_float16_patterns_to_float32(cpu_level):
    t = _f16_tensor(ALL16)
    out = t.float()
    assert out.dtype is ampc.float32
    _assert_same_f32(out, ALL16.view(np.float16).astype(np.float32))


def test_all_float16_patterns_roundtrip(cpu_level):
    back = _f16_tensor(ALL16).float().half()
    _check16(bits(back), ALL16, _f16_nan)


def test_float32_to_float16_matches_numpy(cpu_level, f32_values):
    t = ampc.from_numpy(f32_values)
    out = t.half()
    with np.errstate(over="ignore"):
        expected = f32_values.astype(np.float16).view(np.uint16)
    _check16(bits(out), expected, _f16_nan)


def test_float16_numpy_is_float16():
    a = np.array([1.5, -2.25], dtype=np.float16)
    t = ampc.from_numpy(a)
    assert t.dtype is ampc.float16
    assert t.numpy().dtype == np.float16
    assert ampc.tensor([1.0], dtype=ampc.float16).numpy().dtype == np.float16


def test_float16_ties_round_to_even():
    # 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even 1.0;
    # 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: goes up.
    t = ampc.tensor([1 + 2**-11, 1 + 3 * 2**-11, 65520.0, 65519.0, 2**-25,
                     3 * 2**-26])
    assert to64(t.half()).tolist() == [1.0, 1 + 2**-9, np.inf, 65504.0, 0.0,
                                       2**-24]


def test_float16_overflow_and_specials():
    t = ampc.tensor([1e6, -1e6, float("inf"), float("-inf"), float("nan")])
    h = to64(t.half())
    assert h[:4].tolist() == [np.inf, -np.inf, np.inf, -np.inf]
    assert np.isnan(h[4])


def test_float32_to_float16_big(cpu_level):
    rng = np.random.default_rng(5)
    v = rng.normal(0, 1000, size=BIG).astype(np.float32)
    out = ampc.from_numpy(v).half()
    assert np.array_equal(bits(out), v.astype(np.float16).view(np.uint16))
    back = out.float()
    assert np.array_equal(back.numpy(),
                          v.astype(np.float16).astype(np.float32))


# ----------------------------------------------------------------------------
# bfloat16


def test_all_bfloat16_patterns_to_float32(cpu_level):
    out = _bf16_tensor(ALL16).float()
    _assert_same_f32(out, ref.bf16_to_f32(ALL16))


def test_all_bfloat16_patterns_roundtrip(cpu_level):
    back = _bf16_tensor(ALL16).float().bfloat16()
    _check16(bits(back), ALL16, _bf16_nan)


def test_float32_to_bfloat16_matches_formula(cpu_level, f32_values):
    out = ampc.from_numpy(f32_values).bfloat16()
    _check16(bits(out), ref.bf16_bits(f32_values), _bf16_nan)


def test_bfloat16_ties_round_to_even():
    # bf16 has 8 significand bits: 1 + 2^-8 is a tie between 1 and
    # 1 + 2^-7 -> 1.0; 1 + 3 * 2^-8 -> 1 + 2^-6.
    t = ampc.tensor([1 + 2**-8, 1 + 3 * 2**-8, 3.0e38, -1e-40])
    out = to64(t.bfloat16())
    assert out[:2].tolist() == [1.0, 1 + 2**-6]
    assert np.isfinite(out[2])        # bf16 has float32's range
    assert out[3] == ref.round_bf16(np.float32(-1e-40))


def test_float32_to_bfloat16_big(cpu_level):
    rng = np.random.default_rng(6)
    v = rng.normal(0, 1e10, size=BIG).astype(np.float32)
    out = ampc.from_numpy(v).bfloat16()
    assert np.array_equal(bits(out), ref.bf16_bits(v))


def test_bfloat16_refuses_numpy():
    t = ampc.ones(2, dtype=ampc.bfloat16)
    with pytest.raises(TypeError, match="BFloat16"):
        t.numpy()
    assert t.float().numpy().tolist() == [1.0, 1.0]


# ----------------------------------------------------------------------------
# float16 <-> bfloat16 (all patterns)


def test_float16_to_bfloat16_all(cpu_level):
    out = _f16_tensor(ALL16).bfloat16()
    f32 = ALL16.view(np.float16).astype(np.float32)
    _check16(bits(out), ref.bf16_bits(f32), _bf16_nan)


def test_bfloat16_to_float16_all(cpu_level):
    out = _bf16_tensor(ALL16).half()
    with np.errstate(over="ignore"):
        expected = ref.bf16_to_f32(ALL16).astype(np.float16).view(np.uint16)
    _check16(bits(out), expected, _f16_nan)


# ----------------------------------------------------------------------------
# every pair of dtypes


def _values_for(src):
    if src == "bool":
        return np.array([0, 1, 1, 0, 1], dtype=np.float64)
    if src == "int64":
        return np.array([0, 1, -1, 7, -300, 70000, 2**40, 255, 256],
                        dtype=np.float64)
    v = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -2.7, 3.999, 255.5, 1e5,
                  -7e4, 1e-3, 2.0**-20, 123456.789])
    return ref.round_to(v, src)


@pytest.mark.parametrize("layout", ("contig", "step"))
@pytest.mark.parametrize("dst", ALL_NAMES)
@pytest.mark.parametrize("src", ALL_NAMES)
def test_cast_every_pair(cpu_level, src, dst, layout):
    v = _values_for(src)
    t = from_values(v, src) if layout == "contig" else strided(v, src)
    out = t.to(DTYPES[dst])
    assert out.dtype.name == dst
    assert out.shape == t.shape
    expected = ref.cast(v, src, dst)
    assert_close(out, expected, dst, rtol=0, atol=0)
    if src == dst:
        assert out is t
    else:
        assert out.is_contiguous()


@pytest.mark.parametrize("dst", ("float32", "float16", "bfloat16", "bool"))
@pytest.mark.parametrize("src", ("float32", "float16", "bfloat16"))
def test_cast_inf_nan(cpu_level, src, dst):
    v = np.array([np.inf, -np.inf, np.nan])
    out = to64(from_values(v, src).to(DTYPES[dst]))
    if dst == "bool":
        assert out.tolist() == [1.0, 1.0, 1.0]
    else:
        assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


def test_cast_methods():
    t = ampc.tensor([1.7, -1.7, 0.0])
    assert t.half().dtype is ampc.float16
    assert t.bfloat16().dtype is ampc.bfloat16
    assert t.long().tolist() == [1, -1, 0]
    assert t.bool().tolist() == [True, True, False]
    assert t.long().float().tolist() == [1.0, -1.0, 0.0]
    assert t.type(ampc.float16).dtype is ampc.float16
    assert t.type() == "ampc.FloatTensor"
    assert t.half().type() == "ampc.HalfTensor"
    assert t.type_as(ampc.ones(1, dtype=ampc.int64)).dtype is ampc.int64


def test_python_floats_round_like_torch():
    # float64 -> float32 -> float16, as torch does
    vals = [0.1, 1 / 3, 65519.0, 1e-7, 2.0**-24 * 1.5]
    t = ampc.tensor(vals, dtype=ampc.float16)
    assert np.array_equal(
        bits(t), np.array(vals).astype(np.float32).astype(np.float16)
        .view(np.uint16))
    t = ampc.tensor(vals, dtype=ampc.bfloat16)
    assert np.array_equal(bits(t), ref.bf16_bits(np.array(vals)))


# ----------------------------------------------------------------------------
# the dtype objects


def test_dtype_objects():
    assert ampc.float is ampc.float32
    assert ampc.half is ampc.float16
    assert ampc.long is ampc.int64
    assert repr(ampc.float32) == "ampc.float32"
    assert repr(ampc.bfloat16) == "ampc.bfloat16"
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8,
             "bool": 1}
    for name, dt in DTYPES.items():
        assert dt.name == name
        assert dt.itemsize == sizes[name]
        assert dt.is_floating_point == (name in ref.FLOATS)
        assert isinstance(dt, ampc.dtype)
        assert pickle.loads(pickle.dumps(dt)) is dt
        assert ampc.empty(2, dtype=dt).element_size() == sizes[name]
    assert ampc.get_default_dtype() is ampc.float32
    assert len({hash(d) for d in DTYPES.values()}) == 5


def test_to_bits_from_bits_roundtrip():
    u = np.array([0, 1, 0x3C00, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8001],
                 dtype=np.uint16)
    for dt in (ampc.float16, ampc.bfloat16):
        t = ampc._C.from_bits(u, dt)
        assert t.dtype is dt
        assert np.array_equal(ampc._C.to_bits(t), u)


@pytest.mark.parametrize("name", ["int32", "float64", "double", "int",
                                  "uint8", "complex64"])
def test_pytorch_dtypes_ampc_lacks_say_which_it_has(name):
    with pytest.raises(AttributeError, match=rf"ampc has no {name} dtype; "
                       r"its dtypes are float32 \(float\), float16 "):
        getattr(ampc, name)
    assert not hasattr(ampc, name)
    with pytest.raises(AttributeError, match="^module 'ampc' has no "
                       "attribute 'no_such_thing'$"):
        ampc.no_such_thing
