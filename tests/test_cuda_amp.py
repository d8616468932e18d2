"""AMP on CUDA: the fused multi-tensor unscale-and-check, the scale update
and the gradient norm on the device against the CPU kernels (which the CPU
suite checks against NumPy) and against torch on the GPU where it is
importable; GradScaler("cuda") scenario sequences against
GradScaler("cpu") and torch.amp.GradScaler("cuda"); the number of host
syncs per training step; autocast("cuda")'s policy against torch.

Each GPU test is marked ``cuda`` and skips without a GPU; the few that
need none (the host-read counter, the CUDA table's AMP slots in a CUDA
build, the shared clip arithmetic of csrc/amp_reduce.h through the CPU op)
are unmarked and run everywhere.
"""
import math
import pickle
import random
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
import reference as ref
from helpers import from_values, to64

try:
    from cuda_helpers import cuda_available, requires_cuda, torch_cuda
except ImportError:                 # the shared helpers are not there yet
    def cuda_available():
        return ampc.cuda.is_available()

    requires_cuda = pytest.mark.skipif(not ampc.cuda.is_available(),
                                       reason="needs a CUDA GPU")

    def torch_cuda():
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch is installed without CUDA")
        return torch

C = ampc._C
FLOATS = ("float32", "float16", "bfloat16")
# the largest binade the random values reach, per dtype (no overflow)
TOP = {"float32": 60, "float16": 13, "bfloat16": 60}
# one launch of the CUDA kernel takes this many tensors (cuda/amp.cu)
TENSORS_PER_LAUNCH = 384
# and one block this many elements
CHUNK = 16384


@pytest.fixture(autouse=True)
def _quiet():
    """GradScaler's diagnostics warn once per scaler; tests that check
    them use pytest.warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


# ----------------------------------------------------------------------------
# helpers


def grad_values(rng, n, dtype):
    """Values exact in dtype over a wide range of magnitudes, with zeros,
    so that unscaling makes subnormals and zeros to count."""
    v = rng.standard_normal(n) * 2.0 ** rng.integers(-30, TOP[dtype], n)
    v[rng.random(n) < 0.1] = 0.0
    return ref.round_to(v, dtype)


def scalar(v, device="cpu"):
    return ampc.full((), v, dtype=ampc.float32, device=device)


def raw_bits(t):
    """The bit patterns of a tensor (any device) as unsigned integers."""
    t = t.detach().cpu().contiguous()
    if t.dtype is ampc.float32:
        return t.numpy().view(np.uint32).copy()
    return np.asarray(C.to_bits(t))


def assert_bits_equal(got, want, msg=""):
    """Same bits, except that any NaN matches any NaN (the GPU's multiply
    returns the canonical NaN, the CPU keeps the payload)."""
    a, b = to64(got.detach().cpu()), to64(want.detach().cpu())
    nan = np.isnan(a) & np.isnan(b)
    ok = (raw_bits(got) == raw_bits(want)) | nan
    if not ok.all():
        i = tuple(np.argwhere(~ok)[0])
        raise AssertionError(f"{msg}: {(~ok).sum()} elements differ, first "
                             f"at {i}: cuda {a[i]!r}, cpu {b[i]!r}")


def unscale_both(values, dtypes, inv_scale, found=0.0, counts=True):
    """The fused unscale of the same values on the CPU and on CUDA ->
    (cpu tensors, cuda tensors, cpu found, cuda found, cpu counts, cuda
    counts)."""
    cpu = [from_values(v, d) for v, d in zip(values, dtypes)]
    gpu_ = [t.to("cuda") for t in cpu]
    fc, fg = scalar(found), scalar(found, "cuda")
    if counts:
        cc = C._amp_unscale_counts_(cpu, fc, scalar(inv_scale))
        cg = C._amp_unscale_counts_(gpu_, fg, scalar(inv_scale, "cuda"))
    else:
        ampc._amp_foreach_non_finite_check_and_unscale_(
            cpu, fc, scalar(inv_scale))
        ampc._amp_foreach_non_finite_check_and_unscale_(
            gpu_, fg, scalar(inv_scale, "cuda"))
        cc = cg = None
    return cpu, gpu_, fc.item(), fg.item(), cc, cg


def check_unscale(values, dtypes, inv_scale, msg=""):
    cpu, gpu_, fc, fg, cc, cg = unscale_both(values, dtypes, inv_scale)
    for i, (a, b) in enumerate(zip(gpu_, cpu)):
        assert a.device.type == "cuda"
        assert_bits_equal(a, b, f"{msg} tensor {i} ({dtypes[i]}, "
                                f"{a.numel()} elements)")
    assert fg == fc, msg
    assert [tuple(c) for c in cg] == [tuple(c) for c in cc], msg


# ----------------------------------------------------------------------------
# no GPU needed


def test_host_read_counter_exists_and_cpu_never_counts():
    before = C._cuda_host_reads()
    w = ampc.nn.Parameter(ampc.ones(3))
    opt = ampc.optim.SGD([w], lr=0.1)
    s = ampc.amp.GradScaler("cpu", init_scale=4.0)
    s.scale((w * w).sum()).backward()
    s.step(opt)
    s.update()
    assert s.get_scale() == 4.0
    assert w.tolist() == pytest.approx([0.8] * 3)
    assert C._cuda_host_reads() == before


def test_cuda_build_fills_the_amp_slots():
    if not ampc.cuda.is_built():
        pytest.skip("a CPU-only build has no CUDA table")
    slots = C.cuda_slots()
    for name in ("amp_unscale", "amp_update_scale", "grad_norm",
                 "clip_coef"):
        assert slots.get(name) is True, name


@pytest.mark.parametrize("dtype", FLOATS)
def test_clip_coefficient_rounds_like_pytorch(dtype):
    """amp_reduce.h ampc_clip_coef (the device runs the same code): in
    total_norm's dtype, (1 / (norm + 1e-6)) * max_norm, each op rounded."""
    rng = np.random.default_rng(3)
    for norm in ref.round_to(rng.uniform(0.01, 50.0, 40), dtype):
        for max_norm in (0.5, 1.0, 3.3):
            g = ampc.tensor([1.0, -2.0, 0.25])
            C._clip_grads_with_norm_([g], max_norm, from_values(norm, dtype))
            x = ref.round_to(np.float32(norm) + np.float32(1e-6), dtype)
            r = ref.round_to(np.float32(1.0) / np.float32(x), dtype)
            coef = ref.round_to(np.float32(r) * np.float32(max_norm), dtype)
            coef = np.float32(min(float(coef), 1.0))
            want = (np.float32([1.0, -2.0, 0.25]) * coef).astype(np.float32)
            np.testing.assert_array_equal(g.numpy(), want,
                                          err_msg=f"{norm} {max_norm}")


def test_cpu_scale_state_tensor_message_names_both_devices():
    s = ampc.amp.GradScaler("cpu")
    with pytest.raises(TypeError, match="1-element float32 CPU tensor "
                                        r"\(or a CUDA one\)"):
        s._scale = 5.0


# ----------------------------------------------------------------------------
# the fused unscale-and-check on CUDA against the CPU kernel


PLANTS = ("nowhere", "first", "last", "alone")
SIZES = [0, 1, 7, 8, 9, 31, 1023, CHUNK - 1, CHUNK, CHUNK + 1, 100003]


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("plant", PLANTS)
@pytest.mark.parametrize("inv_scale", [2.0 ** -16, 0.375, 1.0, 4.0])
def test_unscale_matches_cpu_mixed_dtypes(plant, inv_scale):
    rng = np.random.default_rng(11)
    dtypes = [FLOATS[i % 3] for i in range(len(SIZES))]
    values = [grad_values(rng, n, d) for n, d in zip(SIZES, dtypes)]
    if plant == "first":
        values[1][0] = np.inf
    elif plant == "last":
        values[-1][-1] = np.nan         # the very last element of the list
    elif plant == "alone":
        values.append(np.array([-np.inf]))
        dtypes = dtypes + ["bfloat16"]
    check_unscale(values, dtypes, inv_scale, f"{plant} {inv_scale}")
    if plant != "nowhere":
        assert unscale_both(values, dtypes, inv_scale)[3] == 1.0


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 5, 8, 16, CHUNK + 3, 3 * CHUNK + 17])
def test_unscale_each_dtype_and_size_with_inf_in_the_last_element(dtype, n):
    rng = np.random.default_rng(n)
    v = grad_values(rng, n, dtype)
    v[-1] = -np.inf
    check_unscale([v], [dtype], 2.0 ** -10, f"{dtype} {n}")
    v[-1] = 1.5
    cpu, gpu_, fc, fg, cc, cg = unscale_both([v], [dtype], 2.0 ** -10)
    assert fg == fc == 0.0


@pytest.mark.cuda
@requires_cuda
def test_unscale_more_tensors_than_one_launch():
    """Three launches' worth of tensors: the metadata is chunked, the
    counts land on the right tensors, an inf in the very last one is
    found."""
    rng = np.random.default_rng(5)
    n = 2 * TENSORS_PER_LAUNCH + 77
    sizes = rng.integers(0, 300, n)
    sizes[TENSORS_PER_LAUNCH - 1] = CHUNK + 5   # a multi-block tensor at
    sizes[TENSORS_PER_LAUNCH] = 0               # the launch boundary
    dtypes = [FLOATS[i % 3] for i in range(n)]
    values = [grad_values(rng, int(s), d) for s, d in zip(sizes, dtypes)]
    values[-1] = np.append(values[-1], np.nan)
    check_unscale(values, dtypes, 2.0 ** -7, "many")
    assert unscale_both(values, dtypes, 2.0 ** -7)[3] == 1.0
    values[-1][-1] = 0.0
    assert unscale_both(values, dtypes, 2.0 ** -7)[3] == 0.0


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
def test_unscale_every_16bit_pattern_and_float32_specials(dtype):
    if dtype == "float32":
        pats = np.array([0, 1, 0x7fffff, 0x800000, 0x7f7fffff, 0x7f800000,
                         0x7fc00000, 0x7f800001, 0x80000001, 0xff800000,
                         0x3f800000, 0x00400000], dtype=np.uint32)
        vals = pats.view(np.float32).astype(np.float64)
    else:
        pats = np.arange(65536, dtype=np.uint32)
        if dtype == "float16":
            vals = pats.astype(np.uint16).view(np.float16).astype(np.float64)
        else:
            vals = (pats << 16).view(np.float32).astype(np.float64)
    for inv in (2.0 ** -3, 0.7, 1.0, 3.0):
        check_unscale([vals], [dtype], inv, f"{dtype} {inv}")


@pytest.mark.cuda
@requires_cuda
def test_unscale_inv_one_keeps_every_bit_nan_payloads_too():
    """inv_scale == 1 is the check alone: nothing is written."""
    pats = np.array([0x7fc00001, 0xffa00000, 0x7f800001, 0x3f800000,
                     0x00000001], dtype=np.uint32)
    t = from_values(pats.view(np.float32).astype(np.float64), "float32")
    g = t.to("cuda")
    f = scalar(0.0, "cuda")
    ampc._amp_foreach_non_finite_check_and_unscale_([g], f,
                                                    scalar(1.0, "cuda"))
    assert f.item() == 1.0
    np.testing.assert_array_equal(raw_bits(g), raw_bits(t))


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("layout", ["offset", "transposed", "step",
                                    "permuted"])
def test_unscale_views(layout):
    """Misaligned data (128-bit loads impossible), dense permuted views
    (run over their memory) and non-dense views (through a copy)."""
    rng = np.random.default_rng(9)
    for dtype in FLOATS:
        base = grad_values(rng, 6 * 35 * 7, dtype).reshape(6, 35, 7)
        base[5, 34, 6] = np.inf
        views = []
        for dev in ("cpu", "cuda"):
            b = from_values(base, dtype).to(dev)
            v = {"offset": lambda: b.reshape(-1)[1:],
                 "transposed": lambda: b.transpose(0, 2),
                 "step": lambda: b[:, ::2, :],
                 "permuted": lambda: b.permute(2, 0, 1)}[layout]()
            f = scalar(0.0, dev)
            ampc._amp_foreach_non_finite_check_and_unscale_(
                [v], f, scalar(2.0 ** -5, dev))
            views.append((b, v, f.item()))
        (bc, vc, fc), (bg, vg, fg) = views
        assert_bits_equal(bg, bc, f"{layout} {dtype} base")
        assert_bits_equal(vg, vc, f"{layout} {dtype} view")
        assert fg == fc


@pytest.mark.cuda
@requires_cuda
def test_unscale_same_tensor_twice_and_overlapping_views():
    rng = np.random.default_rng(2)
    v = grad_values(rng, 1000, "float32")
    out = []
    for dev in ("cpu", "cuda"):
        t = from_values(v, "float32").to(dev)
        a, b = t[:600], t[400:]
        ampc._amp_foreach_non_finite_check_and_unscale_(
            [t, a, t, b], scalar(0.0, dev), scalar(0.5, dev))
        out.append(t)
    assert_bits_equal(out[1], out[0], "aliasing")


@pytest.mark.cuda
@requires_cuda
def test_found_inf_is_never_cleared_and_versions_move_on():
    g = ampc.ones(10, device="cuda")
    f = scalar(1.0, "cuda")
    v0 = g._version if hasattr(g, "_version") else None
    ampc._amp_foreach_non_finite_check_and_unscale_([g], f,
                                                    scalar(0.5, "cuda"))
    assert f.item() == 1.0
    assert g.cpu().tolist() == [0.5] * 10
    if v0 is not None:
        assert g._version > v0


@pytest.mark.cuda
@requires_cuda
def test_unscale_errors_name_the_device():
    fn = ampc._amp_foreach_non_finite_check_and_unscale_
    g = ampc.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"^found_inf must be a CUDA "
                                           r"tensor\.$"):
        fn([g], scalar(0.0), scalar(1.0, "cuda"))
    with pytest.raises(RuntimeError, match=r"^inv_scale must be a CUDA "
                                           r"tensor\.$"):
        fn([g], scalar(0.0, "cuda"), scalar(1.0))
    with pytest.raises(RuntimeError, match="one of scaled_grads was not a "
                                           "CUDA tensor"):
        fn([g, ampc.ones(3)], scalar(0.0, "cuda"), scalar(1.0, "cuda"))
    with pytest.raises(RuntimeError, match="1-element"):
        fn([g], ampc.zeros(2, device="cuda"), scalar(1.0, "cuda"))
    with pytest.raises(NotImplementedError, match="_cuda\" not implemented "
                                                  "for 'Long'"):
        fn([ampc.ones(3, dtype=ampc.int64, device="cuda")],
           scalar(0.0, "cuda"), scalar(1.0, "cuda"))
    # an empty list returns before any check, as PyTorch
    assert fn([], scalar(0.0), scalar(1.0, "cuda")) is None
    if ampc.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="Expected all tensors to be "
                                               "on the same device"):
            fn([g], scalar(0.0, "cuda:1"), scalar(1.0, "cuda"))


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_unscale_matches_torch_cuda(dtype):
    """torch's CUDA kernel has float32 and float16 (no bfloat16)."""
    torch = torch_cuda()
    rng = np.random.default_rng(21)
    sizes = [1, 7, 1000, CHUNK + 9, 300]
    values = [grad_values(rng, n, dtype) for n in sizes]
    values[-1][-1] = np.inf
    for inv in (2.0 ** -12, 0.3, 1.0):
        ours = [from_values(v, dtype).to("cuda") for v in values]
        theirs = [torch.tensor(v, dtype=getattr(torch, dtype),
                               device="cuda") for v in values]
        fo, ft = scalar(0.0, "cuda"), torch.zeros((), device="cuda")
        ampc._amp_foreach_non_finite_check_and_unscale_(
            ours, fo, scalar(inv, "cuda"))
        torch._amp_foreach_non_finite_check_and_unscale_(
            theirs, ft, torch.full((), inv, device="cuda"))
        assert fo.item() == ft.item()
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(
                to64(a.cpu()), b.double().cpu().numpy())


# ----------------------------------------------------------------------------
# the scale update on the device


@pytest.mark.cuda
@requires_cuda
def test_update_scale_sequences_match_cpu_and_torch():
    rng = random.Random(7)
    try:
        torch = torch_cuda()
    except pytest.skip.Exception:
        torch = None
    for seq in range(40):
        growth = rng.choice([2.0, 1.5, 4.0, 2.0 ** 10])
        backoff = rng.choice([0.5, 0.25, 0.9])
        interval = rng.choice([1, 2, 3, 7, 0, -1])
        init = rng.choice([1.0, 2.0 ** 16, 3e38, 1e-40])
        sc, tc = scalar(init), ampc.full((), 0, dtype=ampc.int64)
        sg, tg = scalar(init, "cuda"), ampc.full((), 0, dtype=ampc.int64,
                                                 device="cuda")
        if torch is not None:
            st = torch.full((), init, device="cuda")
            tt = torch.zeros((), dtype=torch.int32, device="cuda")
        for step in range(30):
            found = rng.choice([0.0, 0.0, 0.0, 1.0, 2.0, float("nan")])
            C._amp_update_scale_(sc, tc, scalar(found), growth, backoff,
                                 interval)
            out = C._amp_update_scale_(sg, tg, scalar(found, "cuda"),
                                       growth, backoff, interval)
            assert out is sg
            what = f"seq {seq} step {step}"
            assert raw_bits(sg) == raw_bits(sc), what
            assert tg.item() == tc.item(), what
            if torch is not None:
                torch._amp_update_scale_(st, tt, torch.full(
                    (), found, device="cuda"), growth, backoff, interval)
                assert sg.item() == st.item() or (
                    math.isnan(st.item()) and math.isnan(sg.item())), what
                assert tg.item() == tt.item(), what


@pytest.mark.cuda
@requires_cuda
def test_update_scale_errors_name_the_device():
    s = scalar(1.0, "cuda")
    t = ampc.full((), 0, dtype=ampc.int64, device="cuda")
    f = scalar(0.0, "cuda")
    with pytest.raises(RuntimeError, match=r"^growth_tracker must be a CUDA "
                                           r"tensor\.$"):
        C._amp_update_scale_(s, ampc.full((), 0, dtype=ampc.int64), f,
                             2.0, 0.5, 1)
    with pytest.raises(RuntimeError, match=r"^found_inf must be a CUDA "
                                           r"tensor\.$"):
        C._amp_update_scale_(s, t, scalar(0.0), 2.0, 0.5, 1)
    with pytest.raises(RuntimeError, match="growth_tracker must be an int "
                                           "tensor"):
        C._amp_update_scale_(s, scalar(0.0, "cuda"), f, 2.0, 0.5, 1)


# ----------------------------------------------------------------------------
# clip_grad_norm_ on the device


NORMS = [2.0, 1.0, math.inf, -math.inf, 0.0, 3.5, 0.5]


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("p", NORMS)
@pytest.mark.parametrize("mix", ["float32", "float16", "bfloat16", "mixed"])
def test_grad_norm_matches_cpu(p, mix):
    rng = np.random.default_rng(int(abs(p) * 10) % 97 if math.isfinite(p)
                                else 3)
    sizes = [1, 7, CHUNK + 1, 1000, 3 * CHUNK + 5]
    dtypes = [mix] * len(sizes) if mix != "mixed" else \
        [FLOATS[i % 3] for i in range(len(sizes))]
    values = [ref.round_to(rng.standard_normal(n) * 3, d)
              for n, d in zip(sizes, dtypes)]
    cpu = [from_values(v, d) for v, d in zip(values, dtypes)]
    got = C._grad_norm([t.to("cuda") for t in cpu], p)
    want = C._grad_norm(cpu, p)
    assert got.device.type == "cuda" and got.dtype is want.dtype
    # double sums in another order, then one rounding to the dtype
    eps = {"float32": 2.0 ** -22, "float16": 2.0 ** -9,
           "bfloat16": 2.0 ** -6}[want.dtype.name]
    np.testing.assert_allclose(to64(got.cpu()), to64(want), rtol=eps)


@pytest.mark.cuda
@requires_cuda
def test_grad_norm_many_tensors_and_nonfinite():
    rng = np.random.default_rng(4)
    n = TENSORS_PER_LAUNCH + 50
    # no empty tensor: the inf norms refuse them (as torch)
    values = [rng.standard_normal(int(s)) for s in rng.integers(1, 50, n)]
    cpu = [from_values(v, "float32") for v in values]
    gpu_ = [t.to("cuda") for t in cpu]
    for p in (2.0, math.inf):
        np.testing.assert_allclose(C._grad_norm(gpu_, p).item(),
                                   C._grad_norm(cpu, p).item(), rtol=1e-6)
    values[-3] = np.append(values[-3], np.nan)
    values[5] = np.append(values[5], np.inf)
    cpu = [from_values(v, "float32") for v in values]
    gpu_ = [t.to("cuda") for t in cpu]
    for p in NORMS:
        a, b = C._grad_norm(gpu_, p).item(), C._grad_norm(cpu, p).item()
        assert (math.isnan(a) and math.isnan(b)) or a == b or \
            math.isclose(a, b, rel_tol=1e-6), p


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("max_norm", [0.1, 1.0, 1e9])
def test_clip_grad_norm_matches_cpu_and_torch(max_norm):
    rng = np.random.default_rng(8)
    shapes = [(3, 4), (17,), (1,), (CHUNK + 3,)]
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = {}
    for dev in ("cpu", "cuda"):
        ps = [ampc.nn.Parameter(ampc.zeros(*s, device=dev)) for s in shapes]
        for p, v in zip(ps, values):
            p.grad = ampc.tensor(v).to(dev)
        total = ampc.nn.utils.clip_grad_norm_(ps, max_norm)
        results[dev] = (total, [p.grad for p in ps])
    (tc, gc), (tg, gg) = results["cpu"], results["cuda"]
    assert tg.device.type == "cuda"
    np.testing.assert_allclose(tg.item(), tc.item(), rtol=2.0 ** -22)
    for a, b in zip(gg, gc):
        np.testing.assert_allclose(to64(a.cpu()), to64(b), rtol=2.0 ** -21)
    try:
        torch = torch_cuda()
    except pytest.skip.Exception:
        return
    tp = [torch.nn.Parameter(torch.zeros(s, device="cuda")) for s in shapes]
    for p, v in zip(tp, values):
        p.grad = torch.tensor(v, device="cuda")
    tt = torch.nn.utils.clip_grad_norm_(tp, max_norm)
    # torch sums each tensor's squares in float32, ampc in double
    np.testing.assert_allclose(tg.item(), tt.item(), rtol=1e-5)
    for a, b in zip(gg, tp):
        np.testing.assert_allclose(to64(a.cpu()), b.grad.double().cpu(),
                                   rtol=1e-5, atol=1e-12)


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("p", NORMS)
def test_clip_grad_norm_with_grads_on_two_devices(p):
    """Gradients on the CPU and on the GPU (as torch allows): the total
    norm, on the first gradient's device, and the clipped gradients equal
    an all-CPU run's."""
    rng = np.random.default_rng(9)
    shapes = [(3, 4), (17,), (CHUNK + 3,), (5,)]
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = []
    for devs in (["cpu"] * 4, ["cpu", "cuda", "cuda", "cpu"]):
        ps = [ampc.nn.Parameter(ampc.zeros(*s, device=d))
              for s, d in zip(shapes, devs)]
        for q, v, d in zip(ps, values, devs):
            q.grad = ampc.tensor(v).to(d)
        total = ampc.nn.utils.clip_grad_norm_(ps, 0.5, norm_type=p)
        results.append((total, [q.grad for q in ps]))
    (tc, gc), (tm, gm) = results
    assert tm.device.type == "cpu"
    np.testing.assert_allclose(tm.item(), tc.item(), rtol=2.0 ** -21)
    for a, b in zip(gm, gc):
        np.testing.assert_allclose(to64(a.cpu()), to64(b), rtol=2.0 ** -20)


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("norm", [float("nan"), float("inf"), 0.0])
def test_clip_with_nonfinite_or_zero_norm_matches_cpu(norm):
    out = []
    for dev in ("cpu", "cuda"):
        g = ampc.tensor([1.0, -2.0, 3.0]).to(dev)
        C._clip_grads_with_norm_([g], 1.0, ampc.tensor(norm).to(dev))
        out.append(to64(g.cpu()))
    np.testing.assert_array_equal(out[1], out[0])


# ----------------------------------------------------------------------------
# GradScaler("cuda")


def _make_world(kind, init, momentum, hp, torch=None):
    """(params, optimizer, scaler, tensor factory) of one side of a
    comparison: "cpu" and "cuda" are ampc, "torch" is torch on the GPU."""
    if kind == "torch":
        ps = [torch.nn.Parameter(torch.tensor(v, device="cuda"))
              for v in init]
        opt = torch.optim.SGD(ps, lr=0.01, momentum=momentum)
        sc = torch.amp.GradScaler("cuda", **hp)

        def mk(a):
            return torch.tensor(a, dtype=torch.float32, device="cuda")
        return ps, opt, sc, mk, torch
    ps = [ampc.nn.Parameter(ampc.tensor(v).to(kind)) for v in init]
    opt = ampc.optim.SGD(ps, lr=0.01, momentum=momentum)
    sc = ampc.amp.GradScaler(kind if kind == "cpu" else "cuda", **hp)

    def mk(a):
        return ampc.tensor(a, dtype=ampc.float32).to(kind)
    return ps, opt, sc, mk, ampc


def _call(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:          # noqa: BLE001 (compared by type/text)
        return None, e


def _arr(t):
    t = t.detach()
    return np.asarray(t.cpu().numpy(), dtype=np.float64)


SHAPES = [(3, 4), (5,), (1,), (2, 3, 2)]
OPS = ("iteration", "scale", "backward", "unscale_", "step", "update",
       "zero_grad", "new_scale", "reload")
WEIGHTS = (6, 2, 3, 1, 3, 3, 2, 0.4, 0.6)
ITERATION = (("zero_grad", "scale", "backward", "step", "update"),
             ("zero_grad", "scale", "backward", "unscale_", "step",
              "update"))


@pytest.mark.cuda
@requires_cuda
def test_grad_scaler_cuda_random_sequences_match_cpu_and_torch():
    """tests/test_grad_scaler.py's 300 random scenario sequences, run by
    GradScaler("cuda") beside GradScaler("cpu") (itself checked against
    torch there) and torch.amp.GradScaler("cuda") where importable."""
    try:
        torch = torch_cuda()
    except pytest.skip.Exception:
        torch = None
    kinds = ["cpu", "cuda"] + (["torch"] if torch is not None else [])
    rng = random.Random(1234)
    nprng = np.random.default_rng(1234)
    for seq in range(300):
        hp = dict(init_scale=2.0 ** rng.randint(-2, 20),
                  growth_factor=rng.choice([2.0, 1.5, 4.0]),
                  backoff_factor=rng.choice([0.5, 0.25, 0.9]),
                  growth_interval=rng.choice([1, 2, 3, 5]))
        momentum = rng.choice([0.0, 0.9])
        init = [nprng.standard_normal(s).astype(np.float32) for s in SHAPES]
        worlds = {k: list(_make_world(k, init, momentum, hp, torch))
                  for k in kinds}
        ops = ["scale"]
        for _ in range(rng.randint(4, 12)):
            op = rng.choices(OPS, WEIGHTS)[0]
            ops += rng.choice(ITERATION) if op == "iteration" else [op]
        for step, op in enumerate(ops):
            what = f"sequence {seq} step {step} {op}"
            outcome = {}
            if op == "backward":
                scale = worlds["cpu"][2].get_scale() \
                    if worlds["cpu"][2]._scale is not None else 1.0
                grads = []
                for p in worlds["cpu"][0]:
                    if rng.random() < 0.15:
                        grads.append(None)
                        continue
                    g = (nprng.standard_normal(p.shape) *
                         np.float32(scale)).astype(np.float32)
                    if rng.random() < 0.15:
                        g.reshape(-1)[rng.randrange(g.size)] = rng.choice(
                            [np.inf, -np.inf, np.nan])
                    grads.append(g)
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    for p, g in zip(ps, grads):
                        if g is None:
                            continue
                        if p.grad is None:
                            p.grad = mk(g)
                        else:
                            with lib.no_grad():
                                p.grad.add_(mk(g))
            elif op == "scale":
                loss = float(nprng.standard_normal())
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(sc.scale, mk(loss))
            elif op in ("unscale_", "step"):
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(getattr(sc, op), opt)
            elif op == "update":
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(sc.update)
            elif op == "new_scale":
                ns = float(2.0 ** rng.randint(-3, 12))
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(sc.update, ns)
            elif op == "zero_grad":
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    opt.zero_grad()
            elif op == "reload" and \
                    len(worlds["cpu"][2]._per_optimizer_states) == 0:
                for k, w in worlds.items():
                    cls = torch.amp.GradScaler if k == "torch" else \
                        ampc.amp.GradScaler
                    s2 = cls("cpu" if k == "cpu" else "cuda")
                    s2.load_state_dict(w[2].state_dict())
                    w[2] = pickle.loads(pickle.dumps(s2))
            if outcome:
                ra, ea = outcome["cpu"]
                for k, (r, e) in outcome.items():
                    assert type(e) is type(ea), f"{what}: {k} {e!r} vs {ea!r}"
                    if e is not None:
                        assert str(e).startswith(str(ea)) or \
                            str(ea).startswith(str(e)), f"{what}: {k} {e}"
                    if op == "scale" and e is None:
                        assert r.item() == ra.item(), f"{what}: {k}"
                        if k == "cuda":
                            assert r.device.type == "cuda", what
                    if op in ("unscale_", "step"):
                        assert (r is None) == (ra is None), f"{what}: {k}"
            ref_sc = worlds["cpu"][2]
            for k, (ps, opt, sc, mk, lib) in worlds.items():
                assert sc.get_scale() == ref_sc.get_scale(), f"{what}: {k}"
                assert sc._get_growth_tracker() == \
                    ref_sc._get_growth_tracker(), f"{what}: {k}"
                assert sc.state_dict() == ref_sc.state_dict(), f"{what}: {k}"
                for p, pc in zip(ps, worlds["cpu"][0]):
                    np.testing.assert_allclose(
                        _arr(p), _arr(pc), rtol=1e-6, atol=1e-7,
                        err_msg=f"{what}: {k}")
                    if pc.grad is None:
                        assert p.grad is None, f"{what}: {k}"
                    else:
                        np.testing.assert_array_equal(
                            _arr(p.grad), _arr(pc.grad),
                            err_msg=f"{what}: {k}")
            cuda_sc = worlds["cuda"][2]
            if cuda_sc._scale is not None:
                assert cuda_sc._scale.device.type == "cuda", what
                assert cuda_sc._growth_tracker.device.type == "cuda", what


def _tiny_model(dev, seed=0):
    ampc.manual_seed(seed)
    model = ampc.nn.Sequential(ampc.nn.Linear(16, 32), ampc.nn.ReLU(),
                               ampc.nn.Linear(32, 4)).to(dev)
    rng = np.random.default_rng(seed)
    x = ampc.tensor(rng.standard_normal((8, 16)).astype(np.float32)).to(dev)
    y = ampc.tensor(rng.standard_normal((8, 4)).astype(np.float32)).to(dev)
    return model, x, y


def _train(dev, steps, fused=False, poison=(), reads=None):
    """SGD with a GradScaler on dev; the gradient of the first parameter
    is poisoned with inf at the steps in `poison`; reads: a list that gets
    each step's host-read count."""
    model, x, y = _tiny_model(dev)
    kw = {"fused": True} if fused else {}
    opt = ampc.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **kw)
    scaler = ampc.amp.GradScaler("cuda" if dev == "cuda" else "cpu",
                                 init_scale=2.0 ** 10, growth_interval=2)
    first = next(iter(model.parameters()))
    for i in range(steps):
        before = C._cuda_host_reads()
        opt.zero_grad()
        out = model(x)
        loss = ((out - y) * (out - y)).mean()
        scaler.scale(loss).backward()
        if i in poison:
            with ampc.no_grad():
                first.grad.mul_(float("inf"))
        scaler.step(opt)
        scaler.update()
        if reads is not None:
            reads.append(C._cuda_host_reads() - before)
    return model, scaler


@pytest.mark.cuda
@requires_cuda
def test_grad_scaler_training_on_cuda_matches_cpu():
    poison = (2, 5)
    mc, sc = _train("cpu", 8, poison=poison)
    mg, sg = _train("cuda", 8, poison=poison)
    assert sg.get_scale() == sc.get_scale()
    assert sg._get_growth_tracker() == sc._get_growth_tracker()
    for a, b in zip(mg.parameters(), mc.parameters()):
        np.testing.assert_allclose(_arr(a), _arr(b), rtol=1e-4, atol=1e-5)
    st_g, st_c = sg.stats(), sc.stats()
    for key in ("steps", "skipped_steps", "last_step_skipped", "scale",
                "growth_tracker"):
        assert st_g[key] == st_c[key], key
    assert st_g["skipped_steps"] == len(poison)


@pytest.mark.cuda
@requires_cuda
def test_one_host_sync_per_step_and_none_with_a_fused_optimizer():
    reads = []
    _train("cuda", 6, reads=reads)
    # the first step creates the scale on the device (no read either)
    assert reads[1:] == [1] * 5, reads
    try:
        ampc.optim.SGD([ampc.nn.Parameter(ampc.ones(1))], lr=0.1,
                       fused=True)
    except TypeError:
        pytest.skip("ampc.optim.SGD has no fused=True yet")
    reads = []
    _, scaler = _train("cuda", 6, fused=True, poison=(3,), reads=reads)
    assert reads[1:] == [0] * 5, reads
    before = C._cuda_host_reads()
    st = scaler.stats()
    assert C._cuda_host_reads() > before       # stats() reads on demand
    assert st["skipped_steps"] == 1 and st["steps"] == 6


@pytest.mark.cuda
@requires_cuda
def test_fused_optimizer_matches_the_synced_path():
    try:
        ampc.optim.SGD([ampc.nn.Parameter(ampc.ones(1))], lr=0.1,
                       fused=True)
    except TypeError:
        pytest.skip("ampc.optim.SGD has no fused=True yet")
    poison = (1, 4)
    ma, sa = _train("cuda", 7, poison=poison)
    mb, sb = _train("cuda", 7, fused=True, poison=poison)
    assert sa.get_scale() == sb.get_scale()
    assert sa._get_growth_tracker() == sb._get_growth_tracker()
    for a, b in zip(ma.parameters(), mb.parameters()):
        np.testing.assert_allclose(_arr(a), _arr(b), rtol=1e-5, atol=1e-6)
    assert sb.stats()["skipped_steps"] == sa.stats()["skipped_steps"] == 2


def test_fused_optimizer_stats_on_the_cpu():
    # The device-side skip path on the CPU: same scale, tracker, weights
    # and skip counts as the synced path.
    poison = (1, 4)
    ma, sa = _train("cpu", 7, poison=poison)
    mb, sb = _train("cpu", 7, fused=True, poison=poison)
    assert sa.get_scale() == sb.get_scale()
    assert sa._get_growth_tracker() == sb._get_growth_tracker()
    for a, b in zip(ma.parameters(), mb.parameters()):
        np.testing.assert_allclose(_arr(a), _arr(b), rtol=1e-5, atol=1e-6)
    for key in ("steps", "skipped_steps", "last_step_skipped"):
        assert sb.stats()[key] == sa.stats()[key], key
    assert sb.stats()["skipped_steps"] == 2


@pytest.mark.cuda
@requires_cuda
def test_stats_counts_on_cuda_match_cpu():
    rng = np.random.default_rng(12)
    shapes = [(40, 3), (7,), (CHUNK + 2,)]
    vals = [ref.round_to(rng.standard_normal(s) * 2.0 ** rng.integers(
        -40, 10, s), "float32") for s in shapes]
    vals[1][3] = np.inf
    vals[2][-1] = np.nan
    stats = []
    for dev in ("cpu", "cuda"):
        ps = [ampc.nn.Parameter(ampc.zeros(*s, device=dev)) for s in shapes]
        opt = ampc.optim.SGD(ps, lr=0.1)
        s = ampc.amp.GradScaler(dev, init_scale=2.0 ** 20)
        s.scale(ps[0].sum() * 0.0)
        for p, v in zip(ps, vals):
            p.grad = ampc.tensor(v).to(dev)
        s.step(opt)
        s.update()
        stats.append(s.stats())
    assert stats[1] == stats[0]
    assert set(stats[1]["overflow"]) == {"param_group[0][1]",
                                         "param_group[0][2]"}


@pytest.mark.cuda
@requires_cuda
def test_scaler_state_lives_on_the_device():
    s = ampc.amp.GradScaler("cuda", init_scale=8.0)
    w = ampc.nn.Parameter(ampc.ones(3, device="cuda"))
    opt = ampc.optim.SGD([w], lr=0.5)
    out = s.scale((w * w).sum())
    assert out.device.type == "cuda" and out.item() == 24.0
    assert s._scale.device.type == "cuda"
    assert s._growth_tracker.device.type == "cuda"
    out.backward()
    s.unscale_(opt)
    found = s._found_inf_per_device(opt)
    assert [k.type for k in found] == ["cuda"]
    assert all(v.device.type == "cuda" for v in found.values())
    assert w.grad.cpu().tolist() == [2.0, 2.0, 2.0]
    s.step(opt)
    s.update(new_scale=ampc.tensor(4.0, device="cuda"))
    assert s.get_scale() == 4.0
    s.update(new_scale=2.0)
    assert s.get_scale() == 2.0
    s.load_state_dict({"scale": 16.0, "growth_factor": 2.0,
                       "backoff_factor": 0.5, "growth_interval": 5,
                       "_growth_tracker": 3})
    assert s.get_scale() == 16.0 and s._get_growth_tracker() == 3
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.get_scale() == 16.0 and s2._scale is None


# ----------------------------------------------------------------------------
# autocast("cuda")


def _inputs(dev, seed=0):
    rng = np.random.default_rng(seed)
    arrays = dict(
        x=rng.standard_normal((4, 3, 6, 6)).astype(np.float32),
        w=rng.standard_normal((5, 3, 3, 3)).astype(np.float32),
        a=rng.standard_normal((4, 7)).astype(np.float32),
        lw=rng.standard_normal((5, 7)).astype(np.float32),
        target=rng.integers(0, 5, 4))
    return {k: ampc.tensor(v).to(dev) for k, v in arrays.items()}, arrays


def _op_cases():
    """(name, fn(module, functional, tensors)) per op."""
    return [
        ("conv2d", lambda m, f, t: f.conv2d(t["x"], t["w"], padding=1)),
        ("linear", lambda m, f, t: f.linear(t["a"], t["lw"])),
        ("matmul", lambda m, f, t: m.matmul(t["a"], t["lw"].t())),
        ("@", lambda m, f, t: t["a"] @ t["lw"].t()),
        ("relu after linear",
         lambda m, f, t: f.relu(f.linear(t["a"], t["lw"]))),
        ("cross_entropy", lambda m, f, t: f.cross_entropy(
            f.linear(t["a"], t["lw"]), t["target"])),
        ("mse_loss", lambda m, f, t: f.mse_loss(
            f.linear(t["a"], t["lw"]), t["a"][:, :5])),
        ("softmax", lambda m, f, t: f.softmax(f.linear(t["a"], t["lw"]), 1)),
        ("log_softmax", lambda m, f, t: f.log_softmax(t["a"].half(), 1)),
        ("sum", lambda m, f, t: t["a"].half().sum()),
        ("exp", lambda m, f, t: t["a"].half().exp()),
        ("cat", lambda m, f, t: m.cat([t["a"], t["a"].half()])),
        ("stack", lambda m, f, t: m.stack([t["a"], t["a"]])),
        ("add mixed", lambda m, f, t: t["a"].half() + t["a"]),
        ("max_pool2d", lambda m, f, t: f.max_pool2d(
            f.conv2d(t["x"], t["w"], padding=1), 2)),
    ]


# amp_semantics.md section 3.8: softmax, log_softmax, sum, exp in float32
# on CUDA (in the input dtype on the CPU); cat/stack by built-in promotion
EXPECTED_CUDA_DTYPES = {
    "conv2d": "low", "linear": "low", "matmul": "low", "@": "low",
    "relu after linear": "low", "cross_entropy": "float32",
    "mse_loss": "float32", "softmax": "float32", "log_softmax": "float32",
    "sum": "float32", "exp": "float32", "cat": "float32",
    "stack": "float32", "add mixed": "float32", "max_pool2d": "low",
}


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,fn", _op_cases(),
                         ids=[name for name, _ in _op_cases()])
def test_cuda_output_dtypes(name, fn, low):
    t, _ = _inputs("cuda")
    with ampc.autocast("cuda", dtype=getattr(ampc, low)):
        out = fn(ampc, F, t)
    want = EXPECTED_CUDA_DTYPES[name]
    assert out.device.type == "cuda"
    assert out.dtype is getattr(ampc, low if want == "low" else want)


@pytest.mark.cuda
@requires_cuda
def test_cuda_default_dtype_is_float16():
    t, _ = _inputs("cuda")
    with ampc.autocast("cuda"):
        assert ampc.get_autocast_dtype("cuda") is ampc.float16
        assert F.linear(t["a"], t["lw"]).dtype is ampc.float16


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,fn", _op_cases(),
                         ids=[name for name, _ in _op_cases()])
def test_cuda_output_dtypes_and_values_match_torch(name, fn, low):
    torch = torch_cuda()
    import torch.nn.functional as TF
    ours, arrays = _inputs("cuda")
    theirs = {k: torch.tensor(v, device="cuda") for k, v in arrays.items()}
    with ampc.autocast("cuda", dtype=getattr(ampc, low)):
        out = fn(ampc, F, ours)
    with torch.autocast("cuda", dtype=getattr(torch, low)):
        want = fn(torch, TF, theirs)
    assert str(out.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    tol = {"float16": 1e-2, "bfloat16": 6e-2}[low]
    np.testing.assert_allclose(
        to64(out.detach().cpu()), want.detach().double().cpu().numpy(),
        rtol=tol, atol=tol)


@pytest.mark.cuda
@requires_cuda
def test_autocast_result_equals_manual_cast_on_cuda():
    t, _ = _inputs("cuda", 3)
    with ampc.autocast("cuda"):
        auto = F.linear(t["a"], t["lw"])
    manual = F.linear(t["a"].half(), t["lw"].half())
    np.testing.assert_array_equal(to64(auto.cpu()), to64(manual.cpu()))


@pytest.mark.cuda
@requires_cuda
def test_each_device_type_autocasts_only_its_own_tensors():
    tg, _ = _inputs("cuda", 1)
    tc, _ = _inputs("cpu", 1)
    with ampc.autocast("cpu"):
        assert F.linear(tg["a"], tg["lw"]).dtype is ampc.float32
        assert F.linear(tc["a"], tc["lw"]).dtype is ampc.bfloat16
    with ampc.autocast("cuda"):
        assert F.linear(tc["a"], tc["lw"]).dtype is ampc.float32
        assert F.linear(tg["a"], tg["lw"]).dtype is ampc.float16
        assert F.softmax(tc["a"].half(), 1).dtype is ampc.float16
    with ampc.autocast("cuda"), ampc.autocast("cpu"):
        assert F.linear(tg["a"], tg["lw"]).dtype is ampc.float16
        assert F.linear(tc["a"], tc["lw"]).dtype is ampc.bfloat16


@pytest.mark.cuda
@requires_cuda
def test_weight_cast_cache_on_cuda():
    t, _ = _inputs("cuda", 4)
    lw = t["lw"].requires_grad_()
    with ampc.autocast("cuda"):
        y1 = F.linear(t["a"], lw)
        assert C._autocast_cache_size() == 1
        y2 = F.linear(t["a"], lw)
        assert C._autocast_cache_size() == 1
        assert y1.device.type == y2.device.type == "cuda"
    assert C._autocast_cache_size() == 0
    (y1.float().sum() + y2.float().sum()).backward()
    assert lw.grad.dtype is ampc.float32 and lw.grad.device.type == "cuda"
    with ampc.autocast("cuda"):
        ref_out = F.linear(t["a"], lw.detach())
    np.testing.assert_array_equal(to64(y1.detach().cpu()),
                                  to64(ref_out.cpu()))


@pytest.mark.cuda
@requires_cuda
def test_amp_training_step_on_cuda_with_autocast_and_scaler():
    """A few fp16 autocast steps with GradScaler("cuda"): the loss falls,
    nothing is NaN, the master weights stay float32 on the device."""
    model, x, y = _tiny_model("cuda", 3)
    opt = ampc.optim.SGD(model.parameters(), lr=0.05)
    scaler = ampc.amp.GradScaler("cuda")
    losses = []
    for _ in range(20):
        opt.zero_grad()
        with ampc.autocast("cuda"):
            out = model(x)
            loss = F.mse_loss(out, y)
        assert out.dtype is ampc.float16 and loss.dtype is ampc.float32
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]
    for p in model.parameters():
        assert p.dtype is ampc.float32 and p.device.type == "cuda"


@pytest.mark.cuda
@requires_cuda
def test_testing_helpers_on_cuda_gradients():
    w = ampc.nn.Parameter(ampc.zeros(2, 3, device="cuda"))
    v = ampc.nn.Parameter(ampc.zeros(4))
    (w.sum() + v.sum()).backward()
    assert ampc.testing.plant_nonfinite(w, (1, 2), value=math.nan) == 5
    ampc.testing.plant_nonfinite(v, -1)
    assert ampc.testing.count_nonfinite([w, v]) == {"inf": 1, "nan": 1}
    assert w.grad.device.type == "cuda"
    with pytest.raises(AssertionError, match="1 inf and 1 NaN"):
        ampc.testing.assert_all_finite([w, v])
