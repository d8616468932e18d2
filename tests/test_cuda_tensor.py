"""CUDA tensors: moving data between the CPU and a GPU, casts between
every pair of dtypes on the GPU (the copy kernel), fill/full/arange on the
GPU, the Tensor's device API (to, cuda, cpu, item, tolist, repr, numpy's
refusal), ampc.tensor(device=), *_like, save/load and autograd through
device moves and casts.

The GPU results are compared with the CPU's bit for bit: a copy or a cast
computes one value per element with the same rules on both devices (see
cuda/copy.cu and csrc/cpu/loops.h ampc_cast_loop), so nothing may differ.
Where torch with CUDA is importable, float rounding is also compared with
torch on the GPU.  Tests that need no GPU (errors on a CPU-only machine)
are at the end and run everywhere.
"""
import io

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import torch_cuda
from cuda_helpers import requires_cuda as _requires_cuda
from helpers import ALL_NAMES, DTYPES, from_values


def requires_cuda(fn):
    """A GPU test: marked ``cuda`` (selected by ``-m cuda``) and skipped
    without a GPU.  Not a module-wide ``cuda`` mark: this file's GPU-less
    tests must stay out of ``-m cuda`` and in ``-m "not cuda"``."""
    return pytest.mark.cuda(_requires_cuda(fn))

# Sizes that hit every path of the copy kernel: empty, one element, less
# than one vector, odd tails, and more than one grid-stride sweep.
SIZES = (0, 1, 3, 7, 17, 1023, 4097, (1 << 20) + 3)


def raw(t):
    """t's exact values as a NumPy array: bit patterns for float16 and
    bfloat16 (so NaN payloads and -0 count), int64 exactly, bool as bool."""
    t = t.detach()
    if t.device_type != "cpu":
        t = t.cpu()
    if t.dtype in (ampc.float16, ampc.bfloat16):
        return ampc._C.to_bits(t.contiguous())
    return np.array(t.numpy())


def assert_identical(got, want, msg=""):
    """Same shape, dtype and bits (got may be on any device)."""
    assert got.dtype is want.dtype, f"{msg}dtype {got.dtype} != {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), \
        f"{msg}shape {tuple(got.shape)} != {tuple(want.shape)}"
    a, b = raw(got), raw(want)
    if a.dtype.kind == "f":
        same = (a.view(np.uint32) == b.view(np.uint32))
    else:
        same = a == b
    if not np.all(same):
        bad = np.argwhere(~np.asarray(same))[:5]
        raise AssertionError(
            f"{msg}{int((~np.asarray(same)).sum())} elements differ, e.g. "
            + ", ".join(f"{tuple(i)}: {a[tuple(i)]!r} vs {b[tuple(i)]!r}"
                        for i in bad))


def special_values(dtype, n=None):
    """Values that exercise every conversion rule: signed zeros, inf, NaN,
    float16 overflow and subnormals, ties, int64 range limits."""
    if dtype == "bool":
        v = np.array([0, 1, 1, 0, 1], dtype=np.float64)
    elif dtype == "int64":
        v = np.array([0, 1, -1, 2, -7, 65504, 65520, 70000, 2 ** 24 + 1,
                      2 ** 53 + 1, -(2 ** 62), 2 ** 62, 123456789],
                     dtype=np.float64)
    else:
        v = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.7, -3.7,
                      np.inf, -np.inf, np.nan, 65504.0, 65519.0, 65520.0,
                      1e5, -1e5, 6e-8, 3e-8, 1e-40, 2.0 ** -24, 1e20,
                      -1e20, 9.2e18, -9.3e18, 1.0 + 2.0 ** -9,
                      1.0 + 3 * 2.0 ** -9, 255.5, 1e-3],
                     dtype=np.float64)
    if n is not None:
        v = np.resize(v, n)
    return v


def cpu_tensor(dtype, n, seed=0):
    """A 1-D CPU tensor of n elements: special values first, then random
    ones over a wide range (so casts to int64 and float16 see big and tiny
    values)."""
    rng = np.random.default_rng(seed)
    sp = special_values(dtype)
    if dtype == "bool":
        v = rng.integers(0, 2, size=n).astype(np.float64)
    elif dtype == "int64":
        v = rng.integers(-(2 ** 40), 2 ** 40, size=n).astype(np.float64)
    else:
        v = rng.normal(size=n) * np.exp(rng.uniform(-12, 12, size=n))
    k = min(n, sp.size)
    v[:k] = sp[:k]
    if dtype == "int64":
        # float64 cannot hold every int64: build those exactly
        ints = rng.integers(-(2 ** 62), 2 ** 62, size=n)
        ints[:k] = sp[:k].astype(np.int64)
        return ampc._C.tensor_from_array(ints, ampc.int64, "cpu")
    if dtype in ("float32", "float16", "bfloat16"):
        v = ref.round_to(v, dtype)
    return from_values(v, dtype)


# ----------------------------------------------------------------------------
# round trips


@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_roundtrip_every_dtype(dtype, n):
    x = cpu_tensor(dtype, n)
    g = x.cuda()
    assert g.is_cuda and g.device == ampc.device("cuda", 0)
    assert g.dtype is x.dtype and tuple(g.shape) == (n,)
    assert g.is_contiguous()
    assert_identical(g.cpu(), x, f"{dtype}[{n}] ")
    # the GPU copy is independent of the source
    assert g.data_ptr() != x.data_ptr()


@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("layout", ["step", "t", "expand", "zero_d",
                                    "empty2d", "offset"])
def test_roundtrip_layouts(dtype, layout):
    base = cpu_tensor(dtype, 2 * 5 * 9 * 2 + 1, seed=1)
    if layout == "step":
        x = base[1:].reshape(10, 18)[:, ::2]             # stride (18, 2)
    elif layout == "t":
        x = base[1:].reshape(10, 18).transpose(0, 1)     # stride (1, 18)
    elif layout == "expand":
        x = base[:7].reshape(1, 7).expand(5, 7)          # stride (0, 1)
    elif layout == "zero_d":
        x = base[3].reshape(())
    elif layout == "empty2d":
        x = base[:0].reshape(0, 4)
    else:
        x = base[1:8]                                    # misaligned start
    g = x.to("cuda")
    assert g.is_contiguous() and tuple(g.shape) == tuple(x.shape)
    assert_identical(g.cpu(), x.contiguous(), f"{dtype}/{layout} ")
    # and a non-contiguous view made on the GPU comes back right too
    gb = base.cuda()
    if layout == "step":
        gv = gb[1:].reshape(10, 18)[:, ::2]
    elif layout == "t":
        gv = gb[1:].reshape(10, 18).transpose(0, 1)
    elif layout == "expand":
        gv = gb[:7].reshape(1, 7).expand(5, 7)
    elif layout == "zero_d":
        gv = gb[3].reshape(())
    elif layout == "empty2d":
        gv = gb[:0].reshape(0, 4)
    else:
        gv = gb[1:8]
    assert not gv.is_contiguous() or layout in ("zero_d", "empty2d",
                                                "offset")
    assert_identical(gv.cpu(), x.contiguous(), f"{dtype}/{layout} back ")
    assert_identical(gv.contiguous().cpu(), x.contiguous(),
                     f"{dtype}/{layout} contiguous() ")


# ----------------------------------------------------------------------------
# casts: all 25 pairs, on the GPU and across devices


@requires_cuda
@pytest.mark.parametrize("src", ALL_NAMES)
@pytest.mark.parametrize("dst", ALL_NAMES)
@pytest.mark.parametrize("n", [0, 1, 30, 1027, (1 << 18) + 5])
def test_cast_every_pair_matches_cpu(src, dst, n):
    x = cpu_tensor(src, n, seed=n)
    want = x.to(DTYPES[dst])
    g = x.cuda()
    # on the GPU (the copy kernel, contiguous path)
    assert_identical(g.to(DTYPES[dst]), want, f"{src}->{dst} cuda ")
    # across devices, both ways
    assert_identical(x.to("cuda", DTYPES[dst]), want, f"{src}->{dst} h2d ")
    assert_identical(g.to("cpu", DTYPES[dst]), want, f"{src}->{dst} d2h ")


@requires_cuda
@pytest.mark.parametrize("src", ALL_NAMES)
@pytest.mark.parametrize("dst", ALL_NAMES)
def test_cast_strided_and_misaligned(src, dst):
    base = cpu_tensor(src, 3 * 64 * 33 + 1, seed=7)
    gb = base.cuda()
    views = [
        lambda b: b[1:].reshape(3, 64, 33)[:, ::3, 1:],         # strided
        lambda b: b[1:].reshape(3, 64, 33).permute(2, 0, 1),    # permuted
        lambda b: b[1:1 + 33].reshape(1, 33).expand(9, 33),     # broadcast
        lambda b: b[1:1 + 4097],                                # misaligned
        lambda b: b[5],                                         # 0-d
    ]
    for i, view in enumerate(views):
        want = view(base).to(DTYPES[dst])
        got = view(gb).to(DTYPES[dst])
        assert_identical(got, want, f"{src}->{dst} view {i} ")


@requires_cuda
@pytest.mark.parametrize("src", ALL_NAMES)
@pytest.mark.parametrize("dst", ALL_NAMES)
def test_copy_into_strided_destination(src, dst):
    # copy_ writes through the destination's strides, broadcasting src
    s = cpu_tensor(src, 17, seed=3).reshape(1, 17)
    d_cpu = ampc.zeros(6, 40, dtype=DTYPES[dst])
    d_gpu = d_cpu.cuda()
    d_cpu.transpose(0, 1)[3:20].copy_(s.transpose(0, 1))
    d_gpu.transpose(0, 1)[3:20].copy_(s.cuda().transpose(0, 1))
    assert_identical(d_gpu, d_cpu, f"{src}->{dst} ")
    # a CPU source into a GPU view and a GPU source into a CPU view
    d2 = ampc.zeros(6, 40, dtype=DTYPES[dst]).cuda()
    d2[:, ::2][:, 1:18].copy_(s)
    d3 = ampc.zeros(6, 40, dtype=DTYPES[dst])
    d3[:, ::2][:, 1:18].copy_(s.cuda())
    assert_identical(d2, d3, f"{src}->{dst} cross ")


@requires_cuda
def test_float_rounding_matches_torch():
    torch = torch_cuda()
    v = ref.round_to(special_values("float32", 4096) * np.linspace(
        0.5, 3.0, 4096), "float32").astype(np.float32)
    v[np.isnan(v)] = np.nan
    t = torch.from_numpy(v).cuda()
    g = ampc.tensor(v, device="cuda")
    for name, tdt in (("float16", torch.float16),
                      ("bfloat16", torch.bfloat16)):
        want = t.to(tdt).view(torch.int16).cpu().numpy().view(np.uint16)
        got = raw(g.to(DTYPES[name]))
        nan = np.isnan(v)
        assert np.array_equal(got[~nan], want[~nan]), name
        # NaN stays NaN (the payload may differ from torch's)
        exp_mask = 0x7c00 if name == "float16" else 0x7f80
        assert np.all((got[nan] & exp_mask) == exp_mask), name
    # float -> int64 truncates toward zero for values in range
    fin = np.isfinite(v) & (np.abs(v) < 9e18)
    want = t[torch.from_numpy(fin).cuda()].to(torch.int64).cpu().numpy()
    got = raw(g.to(ampc.int64))[fin]
    assert np.array_equal(got, want)


# ----------------------------------------------------------------------------
# fill, full, zeros, ones, arange


@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("value", [0, 1, -2.5, 3.14159, 70000.0, True])
def test_full_and_fill(dtype, value):
    if dtype in ("int64", "bool") and isinstance(value, float):
        value = int(value)
    for shape in [(), (0,), (5,), (3, 1025), (1 << 20) + 1]:
        want = ampc.full(shape if isinstance(shape, tuple) else (shape,),
                         value, dtype=DTYPES[dtype])
        got = ampc.full(shape if isinstance(shape, tuple) else (shape,),
                        value, dtype=DTYPES[dtype], device="cuda")
        assert got.is_cuda
        assert_identical(got, want, f"full {dtype} {shape} ")
    g = ampc.zeros(4, 33, dtype=DTYPES[dtype], device="cuda")
    c = ampc.zeros(4, 33, dtype=DTYPES[dtype])
    g[:, 1::2].fill_(value)
    c[:, 1::2].fill_(value)
    assert_identical(g, c, f"fill_ strided {dtype} ")
    g[1:].fill_(ampc.tensor(value, device="cuda"))  # a 0-d tensor value
    c[1:].fill_(ampc.tensor(value))
    assert_identical(g, c, f"fill_ tensor {dtype} ")


@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_zeros_ones_empty_on_cuda(dtype):
    dt = DTYPES[dtype]
    for fn in (ampc.zeros, ampc.ones):
        got = fn(3, 7, dtype=dt, device="cuda")
        assert_identical(got, fn(3, 7, dtype=dt))
    e = ampc.empty(5, 2, dtype=dt, device="cuda:0")
    assert e.is_cuda and tuple(e.shape) == (5, 2) and e.dtype is dt
    for like in (ampc.zeros_like, ampc.ones_like, ampc.empty_like):
        out = like(e)
        assert out.device == e.device and out.dtype is dt


@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16",
                                   "int64"])
@pytest.mark.parametrize("args", [(10,), (1, 11, 3), (5.0, -3.0, -0.75),
                                  (0,), (0.1, 1000.3, 0.7)])
def test_arange(dtype, args):
    if dtype == "int64" and any(isinstance(a, float) for a in args):
        args = tuple(int(a) for a in args)
        if len(args) == 3 and args[2] == 0:
            return
    want = ampc.arange(*args, dtype=DTYPES[dtype])
    got = ampc.arange(*args, dtype=DTYPES[dtype], device="cuda")
    assert got.is_cuda
    assert_identical(got, want)


# ----------------------------------------------------------------------------
# the device API


@requires_cuda
def test_to_cuda_cpu_api():
    x = ampc.arange(6, dtype=ampc.float32).reshape(2, 3)
    g = x.to("cuda")
    assert g.is_cuda and not g.is_cpu
    assert g.device == ampc.device("cuda:0")
    assert str(g.device) == "cuda:0" and g.device.index == 0
    assert g.to("cuda") is g and g.to("cuda:0") is g and g.cuda() is g
    assert g.to(ampc.device("cuda", 0)) is g
    assert x.cpu() is x
    h = x.to("cuda:0", ampc.float16)
    assert h.is_cuda and h.dtype is ampc.float16
    assert x.to(device="cuda", dtype=ampc.bfloat16).dtype is ampc.bfloat16
    assert x.to(g).is_cuda                       # to(other tensor)
    assert g.to(x).is_cpu
    assert x.cuda(0).is_cuda and x.cuda("cuda:0").is_cuda
    assert x.to("cuda", non_blocking=True).is_cuda
    with pytest.raises(RuntimeError, match="cuda"):
        x.cuda("cpu")
    c = g.to("cuda", copy=True)
    assert c is not g and c.data_ptr() != g.data_ptr()
    assert_identical(c, x)


@requires_cuda
def test_item_tolist_bool_float_int():
    g = ampc.tensor([[1.5, -2.0], [3.25, 0.0]], device="cuda")
    assert g.tolist() == [[1.5, -2.0], [3.25, 0.0]]
    assert g[1, 0].item() == 3.25
    assert float(g[0, 0]) == 1.5
    assert int(g[0, 1]) == -2
    assert bool(g[1, 1]) is False and bool(g[0, 0]) is True
    i = ampc.tensor([2 ** 62 + 1, -5], device="cuda")
    assert i.tolist() == [2 ** 62 + 1, -5] and i[0].item() == 2 ** 62 + 1
    b = ampc.tensor([True, False], device="cuda")
    assert b.tolist() == [True, False] and b[0].item() is True
    h = ampc.tensor([0.1, 65504.0], dtype=ampc.bfloat16, device="cuda")
    assert h.tolist() == ampc.tensor([0.1, 65504.0],
                                     dtype=ampc.bfloat16).tolist()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(g)
    with pytest.raises(RuntimeError, match="4 elements"):
        g.item()


@requires_cuda
def test_numpy_refuses_and_repr():
    g = ampc.tensor([1.0, 2.5], device="cuda")
    with pytest.raises(TypeError) as e:
        g.numpy()
    assert "can't convert cuda:0 device type tensor to numpy. Use " \
           "Tensor.cpu() to copy the tensor to host memory first." \
           in str(e.value)
    with pytest.raises(TypeError, match="cuda:0"):
        np.asarray(g)
    assert np.array_equal(g.numpy(force=True), [1.0, 2.5])
    assert repr(g) == "tensor([1.0000, 2.5000], device='cuda:0')"
    assert repr(ampc.tensor([1, 2], device="cuda")) == \
        "tensor([1, 2], device='cuda:0')"
    assert repr(ampc.tensor([1.0], dtype=ampc.float16, device="cuda")) == \
        "tensor([1.], device='cuda:0', dtype=ampc.float16)"
    assert "device='cuda:0'" in repr(
        ampc.ones(2, device="cuda", requires_grad=True))


@requires_cuda
def test_tensor_constructor_and_like():
    a = ampc.tensor(np.arange(5, dtype=np.float32), device="cuda")
    assert a.is_cuda and a.tolist() == [0, 1, 2, 3, 4]
    b = ampc.tensor(a)                       # stays on the GPU
    assert b.is_cuda and b.data_ptr() != a.data_ptr()
    c = ampc.tensor(a, device="cpu", dtype=ampc.int64)
    assert c.is_cpu and c.tolist() == [0, 1, 2, 3, 4]
    for fn in (ampc.zeros_like, ampc.ones_like, ampc.empty_like):
        assert fn(a).is_cuda
    assert ampc.full_like(a, 7).tolist() == [7.0] * 5
    assert ampc.zeros_like(a, device="cpu").is_cpu


@requires_cuda
def test_cross_device_copy_into_broadcast_and_cast():
    src = ampc.tensor([[1.0, 2.0, 3.0]])
    dst = ampc.zeros(4, 3, dtype=ampc.float16, device="cuda")
    dst.copy_(src)
    assert dst.tolist() == [[1.0, 2.0, 3.0]] * 4
    back = ampc.zeros(4, 3, dtype=ampc.int64)
    back.copy_(dst.transpose(0, 1).transpose(0, 1))
    assert back.tolist() == [[1, 2, 3]] * 4
    with pytest.raises(RuntimeError, match="must match the size"):
        dst.copy_(ampc.ones(5))
    v0 = dst._version
    dst.copy_(ampc.ones(3, device="cuda"))
    assert dst._version == v0 + 1


@requires_cuda
def test_pageable_source_can_change_right_after_the_copy():
    # a pageable H2D copy must have consumed the host bytes on return
    for n in (1000, (64 << 20) // 4 + 17):        # staged, then direct
        x = cpu_tensor("float32", n, seed=n)
        want = x.clone()
        g = x.cuda()
        x.fill_(-1.0)
        assert_identical(g, want, f"n={n} ")


@requires_cuda
def test_save_and_load_cuda_tensors(tmp_path):
    g = ampc.tensor([[1.0, -2.0]], dtype=ampc.bfloat16, device="cuda")
    state = {"w": g, "n": ampc.arange(3, device="cuda")}
    path = tmp_path / "x.pt"
    ampc.save(state, path)
    loaded = ampc.load(path)
    assert loaded["w"].is_cuda and loaded["w"].dtype is ampc.bfloat16
    assert_identical(loaded["w"], g)
    assert loaded["n"].is_cuda and loaded["n"].tolist() == [0, 1, 2]
    on_cpu = ampc.load(path, map_location="cpu")
    assert on_cpu["w"].is_cpu and on_cpu["n"].is_cpu
    assert_identical(on_cpu["w"], g)
    buf = io.BytesIO()
    ampc.save(ampc.ones(2), buf)
    buf.seek(0)
    assert ampc.load(buf, map_location="cuda:0").is_cuda


@requires_cuda
def test_autograd_through_device_moves_and_casts():
    x = ampc.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)
    y = x.to("cpu")                     # ToCopyBackward moves grad back
    y.sum().backward()
    assert x.grad.is_cuda and x.grad.tolist() == [1.0, 1.0, 1.0]
    x.grad = None
    h = x.half().float().cpu()          # casts on the GPU, then a move
    h.sum().backward()
    assert x.grad.is_cuda and x.grad.dtype is ampc.float32
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    c = ampc.ones(3, requires_grad=True)
    c.to("cuda").to("cpu").sum().backward()
    assert c.grad.is_cpu and c.grad.tolist() == [1.0, 1.0, 1.0]


@requires_cuda
def test_module_to_cuda_and_back():
    lin = ampc.nn.Linear(3, 2)
    w = lin.weight.detach().clone()
    p = lin.weight
    lin.cuda()
    assert lin.weight is p and p.is_cuda and lin.bias.is_cuda
    assert_identical(lin.weight.detach(), w)
    lin.to("cpu", ampc.float16)
    assert p.is_cpu and p.dtype is ampc.float16
    lin.to("cuda:0")
    assert p.is_cuda and p.requires_grad


# ----------------------------------------------------------------------------
# without a GPU (these run everywhere)


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
@pytest.mark.parametrize("make", [
    lambda: ampc.zeros(2, device="cuda"),
    lambda: ampc.ones(2, device="cuda:0"),
    lambda: ampc.empty(2, device=ampc.device("cuda")),
    lambda: ampc.full((2,), 1.0, device="cuda"),
    lambda: ampc.arange(3, device="cuda"),
    lambda: ampc.tensor([1.0], device="cuda"),
    lambda: ampc.rand(2, device="cuda"),
    lambda: ampc.ones(2).cuda(),
    lambda: ampc.ones(2).to("cuda"),
    lambda: ampc.ones(2).to("cuda:0", ampc.float16),
    lambda: ampc.zeros_like(ampc.ones(2), device="cuda"),
])
def test_cuda_device_without_gpu_is_clear(make):
    with pytest.raises(RuntimeError, match=r"cuda.*not available: (no "
                                           r"CUDA GPU|ampc was built)"):
        make()


def test_bad_device_strings_are_clear():
    with pytest.raises((RuntimeError, ValueError), match="device"):
        ampc.zeros(2, device="gpu")
    with pytest.raises((RuntimeError, ValueError)):
        ampc.zeros(2, device="cuda:x")
    with pytest.raises(TypeError, match="device"):
        ampc.zeros(2, device=1.5)


def test_cpu_tensor_api_without_moving():
    x = ampc.ones(3)
    assert x.cpu() is x and x.is_cpu and not x.is_cuda
    assert x.to("cpu") is x and x.to(ampc.device("cpu")) is x
    assert not x.is_pinned()
