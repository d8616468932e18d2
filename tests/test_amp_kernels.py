"""The fused AMP kernels on every CPU level: the multi-tensor unscale-and-
check (``_amp_foreach_non_finite_check_and_unscale_`` and its telemetry
variant ``_amp_unscale_counts_``), the scale update (``_amp_update_scale_``)
and the gradient-norm slot, against the float64 NumPy oracle in
``reference.py``, bit patterns, and torch where installed.
"""
import itertools
import math

import numpy as np
import pytest

import ampc
import reference as ref
from helpers import BIG, bits, from_values, to64, torch_or_skip

C = ampc._C
FLOATS = ("float32", "float16", "bfloat16")
DT = {"float32": ampc.float32, "float16": ampc.float16,
      "bfloat16": ampc.bfloat16}
# the largest binade the random values reach, per dtype (no overflow)
TOP = {"float32": 60, "float16": 13, "bfloat16": 60}


def scalar(v):
    return C.full((), v, ampc.float32)


def grad_values(rng, n, dtype):
    """Values exact in dtype over a wide range of magnitudes, with zeros,
    so that unscaling makes subnormals and zeros to count."""
    v = rng.standard_normal(n) * 2.0 ** rng.integers(-30, TOP[dtype], n)
    v[rng.random(n) < 0.1] = 0.0
    return ref.round_to(v, dtype)


def run(values, dtypes, inv_scale, found=0.0):
    """Both entry points on copies of the same values -> (outputs as
    float64, found_inf, counts)."""
    grads = [from_values(v, d) for v, d in zip(values, dtypes)]
    twins = [from_values(v, d) for v, d in zip(values, dtypes)]
    f1, f2 = scalar(found), scalar(found)
    assert ampc._amp_foreach_non_finite_check_and_unscale_(
        grads, f1, scalar(inv_scale)) is None
    counts = C._amp_unscale_counts_(twins, f2, scalar(inv_scale))
    outs = [to64(g) for g in grads]
    for g, t in zip(outs, twins):
        np.testing.assert_array_equal(g, to64(t))
    assert f1.item() == f2.item()
    return outs, f1.item(), counts


def check(values, dtypes, inv_scale, msg=""):
    outs, found, counts = run(values, dtypes, inv_scale)
    want_found = False
    for i, (v, d, o, c) in enumerate(zip(values, dtypes, outs, counts)):
        want, f, want_counts = ref.amp_unscale(v, d, inv_scale)
        want_found |= f
        np.testing.assert_array_equal(
            o, want, err_msg=f"{msg} tensor {i} ({d}, {len(v)} elements)")
        assert tuple(c) == want_counts, f"{msg} tensor {i} counts"
    assert found == (1.0 if want_found else 0.0), msg


# ----------------------------------------------------------------------------
# unscale-and-check against the oracle, every level


PLANTS = ("nowhere", "first", "last", "alone")


def planted(rng, sizes, dtypes, plant):
    values = [grad_values(rng, n, d) for n, d in zip(sizes, dtypes)]
    if plant == "first" and values[0].size:
        values[0][0] = np.inf
    elif plant == "last" and values[-1].size:
        values[-1][-1] = np.nan
    elif plant == "alone":
        values.append(np.array([-np.inf]))
        dtypes = dtypes + [dtypes[0]]
    return values, dtypes


@pytest.mark.parametrize("dtype", FLOATS + ("mixed",))
@pytest.mark.parametrize("plant", PLANTS)
def test_unscale_matches_reference(cpu_level, dtype, plant):
    rng = np.random.default_rng(hash((dtype, plant)) % 2 ** 32)
    sizes = [0, 1, 7, 15, 16, 17, 31, 33, 64, 65, 127, 1000]
    dtypes = [FLOATS[i % 3] if dtype == "mixed" else dtype
              for i in range(len(sizes))]
    values, dtypes = planted(rng, sizes, dtypes, plant)
    for inv in (2.0 ** -16, 0.3, 1.0, 7.5):
        check(values, dtypes, inv, msg=f"{cpu_level} inv={inv}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_unscale_big_tensor_split_over_threads(cpu_level, dtype):
    """1000003 elements (well above the parallel threshold, not a multiple
    of any vector width): one thread boundary falls inside the tensor."""
    rng = np.random.default_rng(5)
    v = grad_values(rng, BIG, dtype)
    check([v], [dtype], 2.0 ** -16, msg="clean")
    v[BIG // 2 + 3] = -np.inf
    v[BIG - 1] = np.nan
    check([v], [dtype], 2.0 ** -16, msg="planted")


def test_unscale_thread_split_crosses_tensors(cpu_level):
    """Many tensors whose combined range is split across threads: the
    per-tensor counts add up across the pieces, planted values are found
    in small and big tensors alike."""
    rng = np.random.default_rng(6)
    sizes = [70001, 3, 65537, 1, 129, 40000, 0, 5]
    dtypes = ["float32", "float16", "bfloat16", "float32", "float16",
              "bfloat16", "float32", "float16"]
    values = [grad_values(rng, n, d) for n, d in zip(sizes, dtypes)]
    check(values, dtypes, 2.0 ** -20, msg="clean")
    values[1][2] = np.inf
    values[5][39999] = np.nan
    check(values, dtypes, 2.0 ** -20, msg="planted")


def test_results_do_not_depend_on_the_thread_count(cpu_level):
    rng = np.random.default_rng(14)
    values = [grad_values(rng, n, "float32") for n in (300001, 7, 70001)]
    values[0][123456] = np.inf
    prev = ampc.get_num_threads()
    got = []
    try:
        for threads in (1, 2, 3):
            ampc.set_num_threads(threads)
            outs, found, counts = run(values, ["float32"] * 3, 0.3)
            norms = [C._grad_norm([from_values(v, "float32")
                                   for v in values[1:]], p).item()
                     for p in NORMS]
            got.append((outs, found, counts, norms))
    finally:
        ampc.set_num_threads(prev)
    for outs, found, counts, norms in got[1:]:
        for a, b in zip(outs, got[0][0]):
            np.testing.assert_array_equal(a, b)
        assert (found, counts, norms) == got[0][1:]


def test_unscale_empty_and_zero_size(cpu_level):
    assert ampc._amp_foreach_non_finite_check_and_unscale_(
        [], scalar(0.0), scalar(0.5)) is None
    check([np.zeros(0), np.zeros(0)], ["float32", "float16"], 0.5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unscale_special_inv_scales(cpu_level, dtype):
    """inv_scale 0, inf and NaN (a broken scale): inf * 0 and 0 * inf are
    NaN, NaN spreads; the rounding keeps them NaN in every dtype."""
    rng = np.random.default_rng(15)
    v = grad_values(rng, 301, dtype)
    v[:4] = [0.0, np.inf, -np.inf, np.nan]
    for inv in (0.0, math.inf, math.nan, -2.0):
        check([v, v[4:69]], [dtype, dtype], inv, msg=f"inv={inv}")


def test_found_inf_is_never_cleared(cpu_level):
    """The caller zeroes found_inf; a clean list leaves a 1 in place."""
    outs, found, _ = run([np.ones(9)], ["float32"], 0.5, found=1.0)
    assert found == 1.0


def test_finite_overflow_after_multiply_is_not_flagged(cpu_level):
    """The test is on the input: 60000 * 4 overflows float16 to inf, yet
    found_inf stays 0 (PyTorch's semantics)."""
    outs, found, counts = run([np.array([60000.0, 1.0])], ["float16"], 4.0)
    assert found == 0.0
    assert outs[0][0] == np.inf and outs[0][1] == 4.0
    assert tuple(counts[0]) == (0, 0, 0, 0)


# ----------------------------------------------------------------------------
# every bit pattern


def all_patterns(dtype):
    return np.arange(65536, dtype=np.uint32).astype(np.uint16)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_every_16bit_pattern(cpu_level, dtype):
    """All 65536 patterns: inv_scale == 1 leaves every bit (NaN payloads,
    signalling NaNs, -0 and subnormals included); 0.5 matches the oracle
    on every non-NaN pattern and keeps every NaN a NaN."""
    pats = all_patterns(dtype)
    for inv in (1.0, 0.5, 2.0 ** -10):
        t = C.from_bits(pats.copy(), DT[dtype])
        f = scalar(0.0)
        counts = C._amp_unscale_counts_([t], f, scalar(inv))
        with np.errstate(invalid="ignore"):
            vals = ref.bf16_to_f32(pats).astype(np.float64) \
                if dtype == "bfloat16" else pats.view(np.float16).astype(
                    np.float64)
        want, _, want_counts = ref.amp_unscale(vals, dtype, inv)
        assert f.item() == 1.0
        assert tuple(counts[0]) == want_counts
        got_bits = bits(t)
        if inv == 1.0:
            np.testing.assert_array_equal(got_bits, pats)
            continue
        got = to64(t)
        nan = np.isnan(vals)
        assert np.isnan(got[nan]).all()
        np.testing.assert_array_equal(got[~nan], want[~nan])


def test_float32_patterns_bit_identical_when_inv_is_one(cpu_level):
    rng = np.random.default_rng(7)
    pats = rng.integers(0, 2 ** 32, 200003, dtype=np.uint64) \
        .astype(np.uint32)
    pats[:6] = [0x7F800001, 0xFFC00123, 0x7F800000, 0x80000000, 0x00000001,
                0x807FFFFF]
    a = pats.view(np.float32)
    t = C.tensor_from_array(a.copy(), ampc.float32, "cpu")
    f = scalar(0.0)
    ampc._amp_foreach_non_finite_check_and_unscale_([t], f, scalar(1.0))
    np.testing.assert_array_equal(t.numpy().view(np.uint32), pats)
    assert f.item() == 1.0


# ----------------------------------------------------------------------------
# layouts and aliasing


def test_non_contiguous_gradients(cpu_level):
    """A transposed gradient (dense) runs in place over its memory; a
    sliced one (not dense) goes through a copy and is written back; the
    elements between the slice's are untouched."""
    rng = np.random.default_rng(8)
    base = ref.round_to(rng.uniform(-4, 4, (33, 18)), "float32")
    t = from_values(base.T.copy(), "float32").transpose(0, 1)
    assert not t.is_contiguous()
    big = from_values(base, "float32")
    s = big[:, ::2]
    f = scalar(0.0)
    ampc._amp_foreach_non_finite_check_and_unscale_([t, s], f, scalar(0.25))
    np.testing.assert_array_equal(to64(t), base * 0.25)
    want = base.copy()
    want[:, ::2] *= 0.25
    np.testing.assert_array_equal(to64(big), want)
    assert f.item() == 0.0


def test_same_tensor_twice_is_unscaled_twice(cpu_level):
    """As in PyTorch: each list entry is unscaled, in order."""
    g = from_values(np.full(100001, 8.0), "float32")
    ampc._amp_foreach_non_finite_check_and_unscale_([g, g], scalar(0.0),
                                                    scalar(0.5))
    np.testing.assert_array_equal(to64(g), np.full(100001, 2.0))


def test_versions_move_on_writes_only(cpu_level):
    g = from_values(np.ones(5), "float32")
    f = scalar(0.0)
    v0 = g._version
    ampc._amp_foreach_non_finite_check_and_unscale_([g], f, scalar(1.0))
    assert g._version == v0
    ampc._amp_foreach_non_finite_check_and_unscale_([g], f, scalar(0.5))
    assert g._version > v0


@pytest.mark.parametrize("dtype", FLOATS)
def test_count_nonfinite_writes_nothing(cpu_level, dtype):
    """_amp_count_nonfinite: the check-only pass, whose counts match the
    oracle's at inv_scale 1, on odd sizes, a strided view and a planted
    inf and NaN; no bit and no version moves."""
    rng = np.random.default_rng(9)
    values = [grad_values(rng, n, dtype) for n in (1, 7, 33, 1031)]
    values[1][3] = math.inf
    values[3][5] = math.nan
    values[3][6] = -math.inf
    ts = [from_values(v, dtype) for v in values]
    base = from_values(np.tile(values[2], 2), dtype)
    ts.append(base[::2])
    values.append(np.tile(values[2], 2)[::2])
    pattern = (lambda t: to64(t).view(np.uint64)) if dtype == "float32" \
        else bits
    before = [(pattern(t), t._version) for t in ts]
    counts = C._amp_count_nonfinite(ts)
    for t, (b, v), c, vals in zip(ts, before, counts, values):
        assert t._version == v
        np.testing.assert_array_equal(pattern(t), b)
        assert tuple(c) == ref.amp_unscale(vals, dtype, 1.0)[2]
    assert C._amp_count_nonfinite([]) == []


def test_count_nonfinite_errors():
    with pytest.raises(NotImplementedError,
                       match=r"_amp_count_nonfinite.*tensors\[1\] is int64"):
        C._amp_count_nonfinite([ampc.ones(2), ampc.tensor([1, 2])])
    with pytest.raises(TypeError, match="_amp_count_nonfinite"):
        C._amp_count_nonfinite(3)


# ----------------------------------------------------------------------------
# against torch


@pytest.mark.parametrize("dtype", FLOATS)
def test_unscale_matches_torch(dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(9)
    sizes = [1, 17, 1000, 70001]
    values = [grad_values(rng, n, dtype) for n in sizes]
    values[2][5] = np.inf
    for inv in (2.0 ** -16, 0.3, 1.0):
        grads = [from_values(v, dtype) for v in values]
        f = scalar(0.0)
        ampc._amp_foreach_non_finite_check_and_unscale_(grads, f,
                                                        scalar(inv))
        tg = [torch.tensor(v, dtype=torch.float64).to(getattr(torch, dtype))
              for v in values]
        tf = torch.zeros(())
        torch._amp_foreach_non_finite_check_and_unscale_(
            tg, tf, torch.full((), inv))
        assert f.item() == tf.item()
        for g, t in zip(grads, tg):
            np.testing.assert_array_equal(
                to64(g), t.to(torch.float64).numpy())


def test_update_scale_matches_torch():
    torch = torch_or_skip()
    for scale, tracker, found, growth, backoff, interval in itertools.product(
            (1.0, 65536.0, 3.0e38, 2.0 ** -149), (0, 1, 4), (0.0, 1.0, 3.0),
            (2.0, 1.5), (0.5, 0.1), (1, 2, 5, 0)):
        s, g = scalar(scale), C.full((), tracker, ampc.int64)
        C._amp_update_scale_(s, g, scalar(found), growth, backoff, interval)
        ts = torch.full((), scale)
        tt = torch.full((), tracker, dtype=torch.int32)
        torch._amp_update_scale_(ts, tt, torch.full((), found), growth,
                                 backoff, interval)
        assert (s.item(), g.item()) == (ts.item(), tt.item()), \
            (scale, tracker, found, growth, backoff, interval)


# ----------------------------------------------------------------------------
# the scale update, exhaustively over its edge cases


def test_update_scale_pytorch_sequence():
    """test_grad_scaling_update_scale: growth 2, backoff 0.25, interval 2,
    scale 4 -> (tracker 1, scale 4) -> (0, 8) -> found_inf (0, 2)."""
    s, g, f = scalar(4.0), C.full((), 0, ampc.int64), scalar(0.0)
    out = ampc._amp_update_scale_(s, g, f, 2.0, 0.25, 2)
    assert out is s
    assert (g.item(), s.item()) == (1, 4.0)
    ampc._amp_update_scale_(s, g, f, 2.0, 0.25, 2)
    assert (g.item(), s.item()) == (0, 8.0)
    ampc._amp_update_scale_(s, g, scalar(1.0), 2.0, 0.25, 2)
    assert (g.item(), s.item()) == (0, 2.0)


def test_update_scale_edge_cases():
    """Every combination of the edge values against the oracle: found_inf
    NaN/negative/2 all count as found, growth to inf is refused, backoff
    has no floor, interval <= 0 or a tracker past it never grows."""
    big = float(np.finfo(np.float32).max)
    scales = (1.0, 65536.0, big, big / 2, 2.0 ** -149, 0.0, 3.0)
    trackers = (0, 1, 2, 5, 2 ** 40)
    founds = (0.0, 1.0, 2.0, math.nan, -1.0, math.inf, -0.0)
    growths = (2.0, 1.5, 16.0, 2.0 ** 100)
    backoffs = (0.5, 0.25, 0.1, 2.0 ** -100)
    intervals = (1, 2, 3, 6, 0, -1)
    n = 0
    for sc, tr, fo, gr, bo, iv in itertools.product(
            scales, trackers, founds, growths, backoffs, intervals):
        s, g = scalar(sc), C.full((), tr, ampc.int64)
        C._amp_update_scale_(s, g, scalar(fo), gr, bo, iv)
        want = ref.amp_update_scale(sc, tr, fo, gr, bo, iv)
        assert (s.item(), g.item()) == want, (sc, tr, fo, gr, bo, iv)
        n += 1
    assert n == 7 * 5 * 7 * 4 * 4 * 6


def test_update_scale_errors():
    f = scalar(0.0)
    with pytest.raises(RuntimeError, match="growth_tracker must be an int "
                                           "tensor."):
        C._amp_update_scale_(scalar(1.0), scalar(0.0), f, 2.0, 0.5, 1)
    with pytest.raises(RuntimeError, match="current_scale must be a float "
                                           "tensor."):
        C._amp_update_scale_(C.full((), 1, ampc.int64),
                             C.full((), 0, ampc.int64), f, 2.0, 0.5, 1)
    with pytest.raises(RuntimeError, match="current_scale must be a "
                                           "1-element tensor."):
        C._amp_update_scale_(C.full((2,), 1.0, ampc.float32),
                             C.full((), 0, ampc.int64), f, 2.0, 0.5, 1)
    with pytest.raises(RuntimeError, match="found_inf must be a float "
                                           "tensor."):
        C._amp_update_scale_(scalar(1.0), C.full((), 0, ampc.int64),
                             C.full((), 0, ampc.int64), 2.0, 0.5, 1)
    with pytest.raises(TypeError, match="'growth_interval' \\(position 6\\) "
                                        "must be int, not float"):
        C._amp_update_scale_(scalar(1.0), C.full((), 0, ampc.int64), f, 2.0,
                             0.5, 2.5)
    with pytest.raises(TypeError, match="argument 'found_inf'"):
        C._amp_update_scale_(scalar(1.0), C.full((), 0, ampc.int64), 0.0,
                             2.0, 0.5, 1)


def test_update_scale_is_the_kernel_slot():
    assert "amp_update_scale" in C.kernel_slots()
    assert C.kernel_variant("amp_update_scale") == "ref"


# ----------------------------------------------------------------------------
# argument errors of the unscale


def test_unscale_errors():
    fn = ampc._amp_foreach_non_finite_check_and_unscale_
    g = [from_values(np.ones(3), "float32")]
    with pytest.raises(TypeError, match="argument 'found_inf' \\(position "
                                        "2\\) must be Tensor, not int"):
        fn([], 1, 2)
    # an empty list returns before the tensor checks, as in PyTorch
    assert fn([], C.full((2,), 0, ampc.int64), scalar(1.0)) is None
    with pytest.raises(RuntimeError, match="^found_inf must be a 1-element "
                                           "tensor.$"):
        fn(g, C.full((2,), 0.0, ampc.float32), scalar(1.0))
    with pytest.raises(RuntimeError, match="^inv_scale must be a float "
                                           "tensor.$"):
        fn(g, scalar(0.0), C.full((), 1, ampc.int64))
    with pytest.raises(RuntimeError, match="^found_inf must be a float "
                                           "tensor.$"):
        fn(g, scalar(0.0).half(), scalar(1.0))
    with pytest.raises(NotImplementedError,
                       match="\"_amp_foreach_non_finite_check_and_unscale_"
                             "cpu\" not implemented for 'Long'"):
        fn([C.full((3,), 1, ampc.int64)], scalar(0.0), scalar(1.0))
    with pytest.raises(TypeError, match="expected Tensor as element 1 in "
                                        "argument 0, but got int"):
        fn([g[0], 3], scalar(0.0), scalar(1.0))
    with pytest.raises(TypeError, match="must be tuple of Tensors"):
        fn(g[0], scalar(0.0), scalar(1.0))


# ----------------------------------------------------------------------------
# the gradient-norm slot


NORMS = (2.0, 1.0, math.inf, -math.inf, 0.0, 3.0, 0.5)


def close_ulps(got, want, dtype):
    """Equal within two units in the last place of dtype (the sums run
    in another order than NumPy's); inf only equals inf."""
    if not (math.isfinite(got) and math.isfinite(want)):
        return got == want
    return abs(got - want) <= 2 * ref.EPS[dtype] * abs(want)


@pytest.mark.parametrize("dtype", FLOATS + ("mixed",))
def test_grad_norm_matches_reference(cpu_level, dtype):
    rng = np.random.default_rng(11)
    sizes = [1, 7, 16, 17, 33, 1000, 70001]
    dtypes = [FLOATS[i % 3] if dtype == "mixed" else dtype
              for i in range(len(sizes))]
    values = [ref.round_to(rng.uniform(-3, 3, n), d)
              for n, d in zip(sizes, dtypes)]
    for p in NORMS:
        ts = [from_values(v, d) for v, d in zip(values, dtypes)]
        got = C._grad_norm(ts, p)
        want = ref.total_norm(values, dtypes, p)
        out_dt = got.dtype.name
        assert out_dt == ("float32" if dtype == "mixed" else dtype)
        assert close_ulps(got.item(), want, out_dt), (p, got, want)


def test_grad_norm_big_and_nonfinite(cpu_level):
    rng = np.random.default_rng(12)
    v = ref.round_to(rng.uniform(-1, 1, BIG), "float32")
    t = from_values(v, "float32")
    for p in (2.0, 1.0, math.inf):
        want = ref.total_norm([v], ["float32"], p)
        assert close_ulps(C._grad_norm([t], p).item(), want, "float32"), p
    v[777] = np.inf
    assert C._grad_norm([from_values(v, "float32")], 2.0).item() == math.inf
    v[778] = np.nan
    for p in (2.0, 1.0, math.inf, -math.inf, 3.0):
        assert math.isnan(C._grad_norm([from_values(v, "float32")],
                                       p).item()), p


def test_grad_norm_empty_cases(cpu_level):
    assert C._grad_norm([], 2.0).item() == 0.0
    z = from_values(np.zeros(0), "float32")
    assert C._grad_norm([z, from_values([3.0, 4.0], "float32")],
                        2.0).item() == 5.0
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on "
                                           "an empty tensor"):
        C._grad_norm([z], math.inf)


def test_variants_report_the_level(cpu_level):
    assert C.kernel_variant("amp_unscale") == cpu_level
    assert C.kernel_variant("grad_norm") == cpu_level
