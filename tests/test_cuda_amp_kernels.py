"""The AMP kernels on CUDA: the fused multi-tensor unscale-and-check, the
scale update and the gradient norm on the device against the CPU kernels
(which the CPU suite checks against NumPy) and against torch on the GPU
where it is importable.  GradScaler("cuda") and autocast("cuda") are
tests/test_cuda_amp.py.

Each GPU test is marked ``cuda`` and skips without a GPU; the few that
need none (the host-read counter, the CUDA table's AMP slots in a CUDA
build, the shared clip arithmetic of csrc/amp_reduce.h through the CPU op)
are unmarked and run everywhere.
"""
import math
import random
import warnings

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import requires_cuda, torch_cuda
from helpers import from_values, to64

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
def test_count_nonfinite_matches_cpu_and_writes_nothing():
    """_amp_count_nonfinite on CUDA: the CPU's counts over mixed dtypes and
    sizes across chunks, a strided view included; no bit or version moves
    (detect_overflow checks outputs that autograd saved)."""
    rng = np.random.default_rng(21)
    dtypes = [FLOATS[i % 3] for i in range(len(SIZES))]
    values = [grad_values(rng, n, d) for n, d in zip(SIZES, dtypes)]
    values[2][1] = np.inf
    values[-1][-1] = np.nan
    cpu = [from_values(v, d) for v, d in zip(values, dtypes)]
    gpu_ = [t.to("cuda") for t in cpu]
    gpu_.append(gpu_[-1][::3])
    cpu.append(cpu[-1][::3])
    before = [(raw_bits(t), t._version) for t in gpu_]
    cg = C._amp_count_nonfinite(gpu_)
    assert [tuple(c) for c in cg] == \
        [tuple(c) for c in C._amp_count_nonfinite(cpu)]
    for t, (b, v) in zip(gpu_, before):
        assert t._version == v
        np.testing.assert_array_equal(raw_bits(t), b)


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
