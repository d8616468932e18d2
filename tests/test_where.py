"""where, masked_fill and masked_fill_: against NumPy's np.where (the
float64 oracle, and the raw bit patterns: a select must move every bit,
NaN payloads included), on every CPU level and dtype, with broadcasting,
strided views and Python numbers; gradients by finite differences, second
derivatives, torch where importable, the error messages, and CUDA against
the CPU (skipped without a GPU).
"""
import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import (assert_same, make_pair, requires_cuda,
                          torch_cuda)
from helpers import (ALL_NAMES, BIG, assert_close, bits,
                     from_values, gradcheck, to64, to_torch, torch_or_skip)

SIZES = (1, 7, 33, BIG)
cuda = [pytest.mark.cuda, requires_cuda]
DEVICES = ["cpu", pytest.param("cuda", marks=cuda)]
_UINT = {"float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16,
         "int64": np.int64, "bool": np.bool_}


# ----------------------------------------------------------------------------
# tensors from raw bit patterns, and back


def random_raw(shape, dtype, rng):
    """Random bit patterns of dtype as a NumPy array: for the float dtypes
    every pattern is possible (NaN payloads, infs, subnormals, -0)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "int64":
        return rng.integers(-2**63, 2**63 - 1, size=shape, dtype=np.int64)
    top = 2**32 if dtype == "float32" else 2**16
    return rng.integers(0, top, size=shape, dtype=np.uint64) \
        .astype(_UINT[dtype])


def from_raw(raw, dtype):
    """A contiguous ampc tensor holding the bit patterns ``raw``."""
    raw = np.ascontiguousarray(raw)
    if dtype == "bfloat16":
        return ampc._C.from_bits(raw, ampc.bfloat16)
    if dtype == "float32":
        raw = raw.view(np.float32)
    elif dtype == "float16":
        raw = raw.view(np.float16)
    return ampc.from_numpy(raw.copy())


def view_raw(raw, dtype, layout, device="cpu"):
    """``raw`` as an ampc tensor on device: contiguous, every other element
    of a wider one ("step"), or a transposed copy ("t"); the view is made
    on the device, so its kernel sees the strides."""
    if layout == "t" and raw.ndim >= 2:
        base = from_raw(np.swapaxes(raw, -1, -2), dtype).to(device)
        return base.transpose(-1, -2)
    if layout == "step" and raw.ndim >= 1:
        shape = raw.shape[:-1] + (raw.shape[-1] * 2,)
        big = np.zeros(shape, dtype=raw.dtype)
        big[..., ::2] = raw
        return from_raw(big, dtype).to(device)[..., ::2]
    return from_raw(raw, dtype).to(device)


def to_raw(t):
    """An ampc tensor's bit patterns as a NumPy array."""
    t = t.detach().cpu().contiguous()
    if t.dtype in (ampc.float16, ampc.bfloat16):
        return np.asarray(bits(t))
    a = t.numpy()
    return a.view(np.uint32) if t.dtype is ampc.float32 else a.copy()


def check_bits(out, cond, a_raw, b_raw, dtype):
    """out holds np.where's bits, and its values match the float64
    oracle."""
    assert out.dtype.name == dtype
    want = ref.where(cond, a_raw, b_raw)
    assert out.shape == want.shape
    assert np.array_equal(to_raw(out), want), "bit patterns differ"
    with np.errstate(invalid="ignore"):     # signalling NaNs to float64
        assert_close(out, to64(from_raw(want, dtype)), dtype)


# ----------------------------------------------------------------------------
# forward: every level, dtype and size; broadcasting; strided views


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_where_bits_every_level(cpu_level, dtype, n):
    rng = np.random.default_rng(n)
    cond = rng.random(n) < 0.5
    a, b = random_raw(n, dtype, rng), random_raw(n, dtype, rng)
    out = ampc.where(ampc.from_numpy(cond), from_raw(a, dtype),
                     from_raw(b, dtype))
    check_bits(out, cond, a, b, dtype)
    assert ampc.backends.cpu.kernel_variant("where") == "ref"


LAYOUTS = [("contig", "contig", "contig"), ("step", "t", "contig"),
           ("t", "step", "step"), ("contig", "t", "t"),
           ("step", "contig", "t")]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("layouts", LAYOUTS)
def test_where_strided_views(dev, dtype, layouts):
    rng = np.random.default_rng(3)
    shape = (9, 33)
    cond = rng.random(shape) < 0.3
    a, b = random_raw(shape, dtype, rng), random_raw(shape, dtype, rng)
    lc, la, lb = layouts
    out = ampc.where(view_raw(cond, "bool", lc, dev),
                     view_raw(a, dtype, la, dev), view_raw(b, dtype, lb, dev))
    assert out.device.type == dev
    check_bits(out, cond, a, b, dtype)


BROADCASTS = [((7, 1), (1, 33), (33,)), ((33,), (7, 33), ()),
              ((), (5, 1, 3), (4, 1)), ((2, 1, 7), (1,), (3, 1)),
              ((0, 3), (3,), ()), ((1, 1000003), (1,), (1000003,))]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("dtype", ("float32", "float16", "int64", "bool"))
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_where_broadcasts(dev, dtype, shapes):
    rng = np.random.default_rng(5)
    sc, sa, sb = shapes
    cond = np.asarray(rng.random(sc) < 0.5)
    a, b = random_raw(sa, dtype, rng), random_raw(sb, dtype, rng)
    out = ampc.where(from_raw(cond, "bool").to(dev),
                     from_raw(a, dtype).to(dev), from_raw(b, dtype).to(dev))
    assert out.device.type == dev
    check_bits(out, cond, a, b, dtype)


def test_where_results_do_not_depend_on_threads():
    rng = np.random.default_rng(9)
    cond = ampc.from_numpy(rng.random(BIG) < 0.5)
    a = ampc.randn(BIG)
    prev = ampc.get_num_threads()
    try:
        ampc.set_num_threads(1)
        one = ampc.where(cond, a, -1.5)
    finally:
        ampc.set_num_threads(prev)
    assert np.array_equal(to_raw(one), to_raw(ampc.where(cond, a, -1.5)))


# ----------------------------------------------------------------------------
# Python numbers and type promotion (PyTorch's result_type of input, other)

PROMOTIONS = [
    ("float16", 2.5, "float16"), ("bfloat16", 3, "bfloat16"),
    ("int64", 2.5, "float32"), ("int64", 7, "int64"), ("bool", 1, "int64"),
    ("bool", True, "bool"), ("bool", 0.5, "float32"),
    ("float32", False, "float32"),
]


@pytest.mark.parametrize("dtype,scalar,result", PROMOTIONS)
def test_where_with_a_number(dtype, scalar, result):
    rng = np.random.default_rng(2)
    cond = rng.random(33) < 0.5
    v = ref.round_to(rng.uniform(-3, 3, 33), dtype)
    t = from_values(v, dtype)
    c = ampc.from_numpy(cond)
    s = ref.round_to(float(scalar), result)
    for out, want in ((ampc.where(c, t, scalar), ref.where(cond, v, s)),
                      (ampc.where(c, scalar, t), ref.where(cond, s, v)),
                      (t.where(c, scalar), ref.where(cond, v, s))):
        assert out.dtype.name == result
        assert_close(out, ref.round_to(want, result), result, 0.0, 0.0)


@pytest.mark.parametrize("a,b,result", [
    ("float16", "float32", "float32"), ("bfloat16", "float16", "float32"),
    ("int64", "float16", "float16"), ("bool", "int64", "int64")])
def test_where_promotes_two_tensors(a, b, result):
    cond = np.array([True, False, True, False, False])
    va, vb = np.arange(5.0), -np.arange(5.0)
    out = ampc.where(ampc.from_numpy(cond), from_values(va, a),
                     from_values(vb, b))
    assert out.dtype.name == result
    want = ref.where(cond, ref.round_to(va, a), ref.round_to(vb, b))
    assert_close(out, ref.round_to(want, result), result, 0.0, 0.0)


def test_where_zero_dim_operands():
    c = ampc.tensor([True, False])
    # a 0-d tensor does not promote a dimensioned one of its category
    assert ampc.where(c, ampc.ones(2, dtype=ampc.float16),
                      ampc.tensor(2.5)).dtype is ampc.float16
    assert ampc.where(c, 1.0, 0.0).dtype is ampc.float32
    assert ampc.where(c, 1, 0).dtype is ampc.int64
    assert ampc.where(c, True, False).dtype is ampc.bool
    out = ampc.where(ampc.tensor(True), ampc.tensor(1.0), 2.0)
    assert out.shape == () and out.item() == 1.0
    # a number too big for float16 rounds to inf, as a cast would
    assert ampc.where(c, ampc.zeros(2, dtype=ampc.float16),
                      1e6)[1].item() == np.inf


def test_where_accepts_numpy_scalars():
    c = ampc.tensor([True, False])
    out = ampc.where(c, ampc.zeros(2), np.float32(4.0))
    assert out.tolist() == [0.0, 4.0]
    assert ampc.zeros(2).where(c, np.int64(3)).tolist() == [0.0, 3.0]


# ----------------------------------------------------------------------------
# masked_fill and masked_fill_


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_masked_fill_matches_numpy(dtype):
    rng = np.random.default_rng(4)
    v = ref.round_to(rng.uniform(-3, 3, (5, 33)), dtype)
    mask = rng.random(33) < 0.5
    fill = 1.0 if dtype == "bool" else -2.0
    t = from_values(v, dtype)
    m = ampc.from_numpy(mask)
    want = ref.round_to(ref.where(mask, fill, v), dtype)
    out = t.masked_fill(m, fill)
    assert out.dtype.name == dtype
    assert_close(out, want, dtype, 0.0, 0.0)
    assert_close(ampc.masked_fill(t, m, fill), want, dtype, 0.0, 0.0)
    assert_close(t, v, dtype, 0.0, 0.0)             # out of place
    assert t.masked_fill_(m, fill) is t
    assert_close(t, want, dtype, 0.0, 0.0)


def test_masked_fill_keeps_self_dtype():
    m = ampc.tensor([True, False, True])
    assert ampc.zeros(3, dtype=ampc.int64).masked_fill(m, 1.7).tolist() \
        == [1, 0, 1]
    assert ampc.zeros(3, dtype=ampc.bool).masked_fill(m, 2).tolist() \
        == [True, False, True]
    h = ampc.zeros(3, dtype=ampc.float16).masked_fill(m, ampc.tensor(1.7))
    assert h.dtype is ampc.float16
    assert h[0].item() == float(np.float16(1.7))
    x = ampc.zeros(3, dtype=ampc.int64)
    x.masked_fill_(m, ampc.tensor(2.9))
    assert x.tolist() == [2, 0, 2]


def test_masked_fill_broadcasts_out_of_place_only():
    mask = ampc.tensor([[True], [False]])
    out = ampc.zeros(3).masked_fill(mask, 1.0)
    assert out.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    with pytest.raises(RuntimeError, match=r"masked_fill_\(\).*\[2, 1\]"):
        ampc.zeros(3).masked_fill_(mask, 1.0)


def test_masked_fill_in_place_on_views_and_versions():
    base = ampc.zeros(4, 6)
    view = base.t()[::2]                            # (3, 4), strided
    mask = ampc.tensor([True, False, False, True])
    v0 = base._version
    view.masked_fill_(mask, 5.0)
    assert base._version > v0
    want = np.zeros((4, 6))
    want[[0, 3], ::2] = 5.0
    assert_close(base, want, "float32", 0.0, 0.0)
    with pytest.raises(RuntimeError):
        ampc.zeros(1).expand(3).masked_fill_(mask[:3], 1.0)


def test_masked_fill_values_pass_nan_and_inf_bits():
    raw = np.array([0x7FC01234, 0xFF800000, 0x00000001, 0x80000000],
                   dtype=np.uint32)
    t = from_raw(raw, "float32")
    out = t.masked_fill(ampc.tensor([False, False, True, False]), np.inf)
    assert np.array_equal(to_raw(out),
                          [0x7FC01234, 0xFF800000, 0x7F800000, 0x80000000])


# ----------------------------------------------------------------------------
# gradients: finite differences, broadcasting, dtypes, second derivatives


@pytest.mark.parametrize("shapes", [((4, 5), (4, 5), (4, 5)),
                                    ((4, 5), (4, 1), (5,)),
                                    ((3, 1), (1, 5), ())])
def test_where_gradcheck(shapes):
    rng = np.random.default_rng(6)
    sc, sa, sb = shapes
    cond = rng.random(sc) < 0.5
    c = from_raw(np.asarray(cond), "bool")
    gradcheck(lambda a, b: ampc.where(c, a, b),
              lambda a, b: ref.where(cond, a, b), [sa, sb])


def test_where_gradcheck_with_numbers():
    cond = np.array([[True, False, True], [False, False, True]])
    c = ampc.from_numpy(cond)
    gradcheck(lambda a: ampc.where(c, a, 0.5),
              lambda a: ref.where(cond, a, 0.5), [(2, 3)])
    gradcheck(lambda b: ampc.where(c, -1, b),
              lambda b: ref.where(cond, -1.0, b), [(3,)])


def test_masked_fill_gradcheck():
    mask = np.array([True, False, False, True, True])
    m = ampc.from_numpy(mask)
    gradcheck(lambda a, v: a.masked_fill(m, v),
              lambda a, v: ref.where(mask, v, a), [(3, 5), ()])
    gradcheck(lambda a: a.masked_fill(m, 2.0),
              lambda a: ref.where(mask, 2.0, a), [(5,)])


def test_where_gradients_keep_each_inputs_dtype():
    c = ampc.tensor([True, False, True])
    a = ampc.ones(3, dtype=ampc.float16, requires_grad=True)
    b = ampc.ones(1, requires_grad=True)
    out = ampc.where(c, a, b)
    assert out.dtype is ampc.float32
    assert out.grad_fn.name() == "WhereBackward0"
    out.backward(ampc.tensor([1.0, 2.0, 3.0]))
    assert a.grad.dtype is ampc.float16 and b.grad.dtype is ampc.float32
    assert a.grad.tolist() == [1.0, 0.0, 3.0] and b.grad.tolist() == [2.0]


def test_masked_fill_in_place_gradients():
    v = ampc.tensor(2.0, requires_grad=True)
    x = ampc.ones(3, requires_grad=True)
    m = ampc.tensor([True, False, True])
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.masked_fill_(m, 0.0)
    y = x * 3
    y.masked_fill_(m, v)
    assert y.grad_fn.name() == "MaskedFillBackward0"
    (y * ampc.tensor([1.0, 2.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 6.0, 0.0]
    assert v.grad.item() == 5.0


def test_where_second_derivative():
    xv = np.array([-1.5, 2.0, -3.0, 0.5])
    x = ampc.tensor(xv, requires_grad=True)
    y = ampc.where(x > 0, x ** 3, x ** 2).sum()
    g, = ampc.autograd.grad(y, x, create_graph=True)
    assert g.grad_fn is not None
    assert_close(g, np.where(xv > 0, 3 * xv ** 2, 2 * xv), "float32")
    g2, = ampc.autograd.grad((g * g).sum(), x)     # d/dx g^2 = 2 g g'
    want = np.where(xv > 0, 2 * 3 * xv ** 2 * 6 * xv, 2 * 2 * xv * 2)
    assert_close(g2, want, "float32")


def test_masked_fill_second_derivative():
    x = ampc.tensor([1.0, -2.0, 3.0], requires_grad=True)
    v = ampc.tensor(0.5, requires_grad=True)
    m = ampc.tensor([False, True, True])
    y = (x.masked_fill(m, v) ** 3).sum()
    gx, gv = ampc.autograd.grad(y, (x, v), create_graph=True)
    assert_close(gx, [3.0, 0.0, 0.0], "float32")
    assert_close(gv, 2 * 3 * 0.25, "float32")
    hx, hv = ampc.autograd.grad(gx.sum() + gv, (x, v))
    assert_close(hx, [6.0, 0.0, 0.0], "float32")
    assert_close(hv, 2 * 6 * 0.5, "float32")


def test_where_under_autocast_runs_in_the_promoted_dtype():
    lin = ampc.nn.Linear(4, 3)
    x = ampc.randn(2, 4)
    other = ampc.zeros(2, 3, requires_grad=True)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        h = lin(x)
        out = ampc.where(h > 0, h, other)
    assert h.dtype is ampc.bfloat16 and out.dtype is ampc.float32
    out.sum().backward()
    assert lin.weight.grad.dtype is ampc.float32
    assert other.grad is not None


# ----------------------------------------------------------------------------
# torch, when installed


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_where_and_masked_fill_match_torch(dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(8)
    cond = rng.random((6, 7)) < 0.5
    a = from_raw(random_raw((6, 7), dtype, rng), dtype)
    b = from_raw(random_raw((7,), dtype, rng), dtype)
    c = ampc.from_numpy(cond)
    tc = torch.from_numpy(cond)
    ours = ampc.where(c, a, b)
    theirs = torch.where(tc, to_torch(torch, a), to_torch(torch, b))
    assert np.array_equal(to_raw(ours), to_raw(from_torch(torch, theirs)))
    fill = True if dtype == "bool" else 3
    ours = a.masked_fill(c[0], fill)
    theirs = to_torch(torch, a).masked_fill(tc[0], fill)
    assert np.array_equal(to_raw(ours), to_raw(from_torch(torch, theirs)))


def from_torch(torch, t):
    if t.dtype == torch.bfloat16:
        return ampc._C.from_bits(t.view(torch.int16).numpy().view(np.uint16)
                                 .copy(), ampc.bfloat16)
    return ampc.from_numpy(t.numpy().copy())


def test_gradients_match_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(11)
    cond = rng.random((4, 5)) < 0.5
    av, bv = rng.normal(size=(4, 1)), rng.normal(size=(5,))
    w = rng.normal(size=(4, 5))
    grads = []
    for lib, new in ((ampc, ampc.tensor), (torch, torch.tensor)):
        a = new(av, dtype=lib.float32, requires_grad=True)
        b = new(bv, dtype=lib.float32, requires_grad=True)
        v = new(0.25, dtype=lib.float32, requires_grad=True)
        y = lib.where(new(cond), a, b) * new(w, dtype=lib.float32)
        y = y.masked_fill(new(~cond), v)
        ga, gb, gv = lib.autograd.grad((y ** 2).sum(), (a, b, v),
                                       create_graph=True)
        h = lib.autograd.grad((ga ** 2).sum() + gb.sum() + gv, (a, b, v))
        grads.append([t.detach().numpy() for t in (ga, gb, gv) + tuple(h)])
    for mine, theirs in zip(*grads):
        assert_close(mine, theirs, "float32", rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------
# errors


def test_where_errors():
    x = ampc.zeros(3)
    c = ampc.tensor([True, False, True])
    with pytest.raises(RuntimeError,
                       match=r"where\(\): expected condition to be a bool "
                             r"tensor.*float32"):
        ampc.where(x, x, x)
    with pytest.raises(TypeError, match=r"where\(\): argument 'condition'"):
        ampc.where([True], x, x)
    with pytest.raises(TypeError, match=r"where\(\): argument 'input'.*str"):
        ampc.where(c, "a", x)
    with pytest.raises(TypeError, match=r"where\(\): argument 'other'"):
        ampc.where(c, x, None)
    with pytest.raises(RuntimeError,
                       match=r"where\(\): the size of condition \(3\) must "
                             r"match the size of other \(2\)"):
        ampc.where(c, x[:1], ampc.zeros(2))
    with pytest.raises(RuntimeError, match=r"where\(\): output with shape"):
        ampc._C.where(c, x, x, out=ampc.zeros(2))
    with pytest.raises(RuntimeError, match=r"where\(\): expected out to have "
                                           r"dtype float32"):
        ampc._C.where(c, x, x, out=ampc.zeros(3, dtype=ampc.float16))
    with pytest.raises(RuntimeError, match="int64"):
        ampc.where(c, ampc.zeros(3, dtype=ampc.int64), 2 ** 70)


def test_masked_fill_errors():
    x = ampc.zeros(3)
    m = ampc.tensor([True, False, True])
    with pytest.raises(RuntimeError, match=r"masked_fill\(\): only supports "
                                           r"boolean masks.*float32"):
        x.masked_fill(x, 1.0)
    with pytest.raises(TypeError, match=r"masked_fill_\(\): argument 'mask'"):
        x.masked_fill_([True], 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(m, ampc.ones(1))
    with pytest.raises(TypeError, match=r"masked_fill\(\): argument 'value'"):
        x.masked_fill(m, "1")
    with pytest.raises(RuntimeError, match=r"masked_fill\(\): the shapes of "
                                           r"self \[3\] and mask \[2\]"):
        x.masked_fill(m[:2], 1.0)
    with pytest.raises(RuntimeError, match="without overflow"):
        ampc.zeros(3, dtype=ampc.int64).masked_fill(m, float("nan"))


# ----------------------------------------------------------------------------
# CUDA against the CPU (skipped without a GPU): a select moves bits, so the
# GPU must give the CPU's bits exactly.  (Strided views and broadcasting on
# CUDA: test_where_strided_views and test_where_broadcasts above.)


def special_values(n, dtype, seed):
    """float64 values exact in dtype; floats with NaN, +-inf and -0."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return (rng.random(n) < 0.5).astype(np.float64)
    if dtype == "int64":
        return rng.integers(-4, 5, n).astype(np.float64)
    v = ref.round_to(rng.uniform(-4, 4, n), dtype)
    if n >= 8:
        v[rng.choice(n, 4, replace=False)] = [np.nan, np.inf, -np.inf, -0.0]
    return v


def same_bits(gpu, cpu):
    assert_same(gpu, cpu, rtol=0.0, atol=0.0)
    assert np.array_equal(to_raw(gpu), to_raw(cpu)), "bit patterns differ"


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", ("contig", "step", "offset"))
def test_cuda_where_matches_cpu(dtype, n, layout):
    cond = special_values(n, "bool", n)
    c_cpu, c_gpu = make_pair(cond, "bool", layout)
    a_cpu, a_gpu = make_pair(special_values(n, dtype, 1), dtype, layout)
    b_cpu, b_gpu = make_pair(special_values(n, dtype, 2), dtype, layout)
    same_bits(ampc.where(c_gpu, a_gpu, b_gpu),
              ampc.where(c_cpu, a_cpu, b_cpu))
    same_bits(a_gpu.masked_fill(c_gpu, 1), a_cpu.masked_fill(c_cpu, 1))


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_cuda_where_numbers_and_cpu_scalars(dtype):
    n = 1000
    cond = special_values(n, "bool", 3)
    c_cpu, c_gpu = make_pair(cond, "bool")
    a_cpu, a_gpu = make_pair(special_values(n, dtype, 4), dtype)
    num = True if dtype == "bool" else 3
    s_cpu = ampc.tensor(num)                # a CPU 0-d tensor
    for f in (lambda c, a: ampc.where(c, a, num),
              lambda c, a: ampc.where(c, num, a),
              lambda c, a: ampc.where(c, 2.5, a),
              lambda c, a: ampc.where(c, a, s_cpu),
              lambda c, a: ampc.where(c, 1.0, 0.0),
              lambda c, a: ampc.where(ampc.tensor(False), a, s_cpu)):
        same_bits(f(c_gpu, a_gpu), f(c_cpu, a_cpu))
    for value, cpu_value in ((num, num), (s_cpu, s_cpu),
                             (s_cpu.to("cuda"), s_cpu)):
        g = a_gpu.clone()
        g.masked_fill_(c_gpu, value)
        same_bits(g, a_cpu.masked_fill(c_cpu, cpu_value))


@pytest.mark.cuda
@requires_cuda
def test_cuda_where_gradients_match_cpu():
    rng = np.random.default_rng(12)
    cond = rng.random((5, 33)) < 0.5
    av, bv = rng.normal(size=(5, 1)), rng.normal(size=(33,))
    grads = []
    for dev in ("cpu", "cuda"):
        c = from_raw(cond, "bool").to(dev)
        a = ampc.tensor(av, device=dev, requires_grad=True)
        b = ampc.tensor(bv, device=dev, requires_grad=True)
        v = ampc.tensor(0.5, device=dev, requires_grad=True)
        y = ampc.where(c, a, b).masked_fill(c[:, :1], v)
        ga, gb, gv = ampc.autograd.grad((y ** 2).sum(), (a, b, v),
                                        create_graph=True)
        h = ampc.autograd.grad((ga * gb.sum()).sum() + gv, (a, b, v))
        grads.append((ga, gb, gv) + tuple(h))
    for g, c in zip(grads[1], grads[0]):
        assert_same(g, c, k=33)


@pytest.mark.cuda
@requires_cuda
def test_cuda_where_device_errors():
    g = ampc.zeros(3, device="cuda")
    c = ampc.tensor([True, False, True])
    with pytest.raises(RuntimeError, match=r"where\(\): expected condition, "
                                           r"input and other to be on the "
                                           r"same device"):
        ampc.where(c, g, g)
    with pytest.raises(RuntimeError, match="same device"):
        ampc.where(c.to("cuda"), g, ampc.zeros(3))
    with pytest.raises(RuntimeError, match=r"masked_fill\(\): expected mask"):
        g.masked_fill(c, 1.0)
    with pytest.raises(RuntimeError, match=r"masked_fill_\(\): expected "
                                           r"value"):
        ampc.zeros(3).masked_fill_(c, ampc.tensor(1.0, device="cuda"))


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_cuda_where_matches_torch(dtype):
    torch = torch_cuda()
    rng = np.random.default_rng(13)
    cond = rng.random((6, 7)) < 0.5
    a = from_raw(random_raw((6, 7), dtype, rng), dtype)
    b = from_raw(random_raw((7,), dtype, rng), dtype)
    ours = ampc.where(ampc.from_numpy(cond).to("cuda"), a.to("cuda"),
                      b.to("cuda"))
    theirs = torch.where(torch.from_numpy(cond).cuda(),
                         to_torch(torch, a).cuda(), to_torch(torch, b).cuda())
    assert np.array_equal(to_raw(ours),
                          to_raw(from_torch(torch, theirs.cpu())))


def test_masked_fill_overflow_names_the_op():
    x = ampc.arange(4)
    for value in (2 ** 70, float("inf")):
        with pytest.raises(RuntimeError, match=r"masked_fill\(\): value "
                                               "cannot be converted to int64"):
            x.masked_fill(x > 1, value)
