"""torch.lerp as one fused pass (_C.lerp; Tensor.lerp / lerp_, ampc.lerp):
the float32 rule bit for bit against a NumPy float32 transcription on
every CPU level, for float32, float16 and bfloat16, tensor and number
weights on both sides of 0.5, odd sizes, broadcast, strided and aliased
operands; closeness to float64 NumPy and to torch; gradients against finite
differences with second derivatives; errors; and on a GPU (marked
``cuda``) the CPU's bits.  test_tensor_more.py has the older value tests.
"""
import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import requires_cuda
from helpers import (FLOAT_NAMES, assert_close, bits, from_values, gradcheck,
                     rand_values, to64, torch_or_skip)

C = ampc._C
SIZES = (1, 7, 33, 1003, 70001)         # the last is split over threads


def lerp32(s, e, w):
    """torch's rule in float32 arithmetic (NumPy rounds each float32 op,
    no fused multiply-add): what every ampc kernel computes."""
    s, e = np.float32(s), np.float32(e)
    w = np.asarray(w, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        d = e - s
        lo = s + w * d
        hi = e - d * (np.float32(1) - w)
    return np.where(np.abs(w) < np.float32(0.5), lo, hi)


def lerp64(s, e, w):
    return np.where(np.abs(w) < 0.5, s + w * (e - s), e - (e - s) * (1 - w))


def exact(got, want, dtype):
    """got (a tensor) holds want (float32 values) rounded once to dtype."""
    x = to64(got)
    y = ref.round_to(np.asarray(want, dtype=np.float64), dtype)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    assert same.all(), f"{(~same).sum()} of {same.size} differ: " \
        f"{x[~same][:4]} vs {y[~same][:4]}"


def weights(shape, rng):
    """Weights on both sides of the rule's switch, beyond [0, 1], and its
    exact points."""
    w = rng.uniform(-0.75, 1.75, size=shape)
    flat = w.reshape(-1)
    for k, v in enumerate((0.0, 0.5, -0.5, 1.0, 0.25, 0.75)):
        if k < flat.size:
            flat[k] = v
    return w


# ----------------------------------------------------------------------------
# values


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_tensor_weight_exact(cpu_level, dtype, n, rng):
    s, e = (rand_values((n,), dtype, rng) for _ in range(2))
    w = ref.round_to(weights((n,), rng), dtype)
    got = C.lerp(from_values(s, dtype), from_values(e, dtype),
                 from_values(w, dtype))
    assert C.kernel_variant("lerp") == cpu_level
    exact(got, lerp32(s, e, w), dtype)
    assert_close(got, lerp64(s, e, w), dtype, k=4)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("w", [0.0, 0.3, -0.2, 0.5, 0.7, 1.0, 1.5, 1 / 3])
def test_number_weight_exact(cpu_level, dtype, n, w, rng):
    """A number weight is kept in float32 for every dtype (PyTorch's
    opmath), not rounded to a 16-bit dtype."""
    s, e = (rand_values((n,), dtype, rng) for _ in range(2))
    got = C.lerp(from_values(s, dtype), from_values(e, dtype), w)
    exact(got, lerp32(s, e, w), dtype)
    if w == 1.0:
        exact(got, e, dtype)
    if w == 0.0:
        exact(got, s, dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shapes", [
    ((3, 1, 5), (1, 4, 5), (5,)),
    ((4, 5), (1,), ()),
    ((), (6, 7), (6, 1)),
    ((2, 1, 9), (9,), (2, 3, 1)),
])
def test_broadcast(dtype, shapes, rng):
    vals = [rand_values(shapes[0], dtype, rng),
            rand_values(shapes[1], dtype, rng),
            ref.round_to(weights(shapes[2], rng), dtype)]
    got = C.lerp(*(from_values(v, dtype) for v in vals))
    want = lerp32(*np.broadcast_arrays(*vals))
    assert tuple(got.shape) == want.shape
    exact(got, want, dtype)
    # a number weight, and the weight tensor broadcast over start and end
    got = C.lerp(from_values(vals[0], dtype), from_values(vals[1], dtype),
                 0.625)
    exact(got, lerp32(*np.broadcast_arrays(vals[0], vals[1]), 0.625), dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_strided_operands_and_out(dtype, rng):
    """Transposed, sliced and stepped operands, and a strided out."""
    s = rand_values((33, 20), dtype, rng)
    e = rand_values((20, 33), dtype, rng)
    w = ref.round_to(weights((33, 40), rng), dtype)
    ts = from_values(s, dtype)
    te = from_values(e, dtype).t()
    tw = from_values(w, dtype)[:, ::2]
    want = lerp32(s, e.T, w[:, ::2])
    exact(C.lerp(ts, te, tw), want, dtype)
    big = C.full((33, 60), 7.0, getattr(ampc, dtype), "cpu")
    out = big[:, 1::3]
    assert C.lerp(ts, te, tw, out) is out
    exact(out, want, dtype)
    rest = np.delete(to64(big), np.s_[1::3], axis=1)
    assert (rest == 7.0).all()


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_in_place_and_aliases(dtype, rng):
    """lerp_ writes into self (its version advances); an operand that
    overlaps self without being it is read before any write."""
    s, e = (rand_values((101,), dtype, rng) for _ in range(2))
    a = from_values(s, dtype)
    v = a._version
    assert a.lerp_(from_values(e, dtype), 0.3) is a
    assert a._version > v
    exact(a, lerp32(s, e, 0.3), dtype)
    # end is self shifted by one: the old values are the ones used
    b = from_values(s, dtype)
    b[1:].lerp_(b[:-1], from_values(e[1:], dtype))
    want = np.concatenate([s[:1], lerp32(s[1:], s[:-1], e[1:])])
    exact(b, want, dtype)
    # lerp_(self, self, w) is self
    c = from_values(s, dtype)
    c.lerp_(c, c)
    exact(c, lerp32(s, s, s), dtype)


def test_levels_agree():
    rng = np.random.default_rng(3)
    s, e = (rand_values((5003,), "bfloat16", rng) for _ in range(2))
    w = ref.round_to(weights((5003,), rng), "bfloat16")
    results = []
    for level in ampc.backends.cpu.levels():
        C._set_cpu_level(level)
        try:
            out = [C.lerp(from_values(s, dt), from_values(e, dt),
                          from_values(w, dt) if k else 0.4)
                   for dt in FLOAT_NAMES for k in (0, 1)]
            results.append([bits(t) if t.dtype is not ampc.float32
                            else to64(t) for t in out])
        finally:
            C._set_cpu_level(ampc.backends.cpu.best_level())
    for r in results[1:]:
        for x, y in zip(r, results[0]):
            assert np.array_equal(x, y)


def test_special_values():
    inf, nan = float("inf"), float("nan")
    s = ampc.tensor([0.0, 1.0, inf, 1.0, -inf, nan, 1.0, 2.0])
    e = ampc.tensor([1.0, inf, inf, 2.0, inf, 0.0, 3.0, 2.0])
    w = ampc.tensor([0.25, 0.25, 0.5, nan, 0.5, 0.0, 1.0, 1e30])
    want = lerp32(to64(s), to64(e), to64(w))
    exact(s.lerp(e, w), want, "float32")


def test_matches_torch(rng):
    torch = torch_or_skip()
    for dtype in FLOAT_NAMES:
        tdt = getattr(torch, dtype)
        s = torch.randn(7, 1, 1003).to(tdt)
        e = torch.randn(5, 1003).to(tdt)
        w = (torch.rand(1, 1003) * 2 - 0.5).to(tdt)

        def a(t):
            return from_values(t.double().numpy(), dtype)

        ulp = ref.EPS[dtype]
        for weight, tweight in ((a(w), w), (0.375, 0.375), (0.8, 0.8)):
            got = C.lerp(a(s), a(e), weight)
            want = torch.lerp(s, e, tweight)
            assert tuple(got.shape) == tuple(want.shape)
            # torch's vector loops fuse a multiply-add: an ulp apart at most
            assert_close(got, want.double().numpy(), dtype, rtol=2 * ulp,
                         atol=2 * ulp)
        assert torch.lerp(s, e, 1.0).equal(e.expand(7, 5, 1003))
        exact(C.lerp(a(s), a(e), 1.0), np.broadcast_to(
            e.double().numpy(), (7, 5, 1003)), dtype)


# ----------------------------------------------------------------------------
# autograd


def test_gradients():
    gradcheck(lambda s, e, w: s.lerp(e, w), lerp64,
              [(3, 4), (4,), (3, 1)], low=-1, high=1)
    gradcheck(lambda s, e: s.lerp(e, 0.7), lambda s, e: lerp64(s, e, .7),
              [(5,), (2, 5)])
    gradcheck(lambda s, e, w: ampc.lerp(s, e, w), lerp64,
              [(2, 3), (2, 3), ()], low=-1, high=1)


def test_node_names_and_only_needed_grads():
    s = ampc.tensor([1.0, 2.0], requires_grad=True)
    e = ampc.tensor([3.0, 5.0])
    w = ampc.tensor([0.25, 0.75], requires_grad=True)
    assert s.lerp(e, 0.5).grad_fn.name() == "LerpBackward0"
    out = s.lerp(e, w)
    assert out.grad_fn.name() == "LerpBackward1"
    out.sum().backward()
    assert s.grad.tolist() == [0.75, 0.25] and e.grad is None
    assert w.grad.tolist() == [2.0, 3.0]
    with ampc.no_grad():
        assert s.lerp(e, w).grad_fn is None


def test_second_derivatives():
    """create_graph: d/dw of (d out / d start) = -g, and the weight's
    gradient g * (end - start) differentiates again."""
    s = ampc.tensor([1.0, -2.0], requires_grad=True)
    e = ampc.tensor([4.0, 3.0], requires_grad=True)
    w = ampc.tensor([0.25, 0.8], requires_grad=True)
    gs, gw = ampc.autograd.grad(s.lerp(e, w).sum(), (s, w),
                                create_graph=True)
    assert gs.tolist() == [0.75, pytest.approx(0.2)]
    assert gw.tolist() == [3.0, 5.0]
    dw, = ampc.autograd.grad(gs.sum(), (w,), retain_graph=True)
    assert dw.tolist() == [-1.0, -1.0]
    de, ds = ampc.autograd.grad(gw.sum(), (e, s))
    assert de.tolist() == [1.0, 1.0] and ds.tolist() == [-1.0, -1.0]
    x = ampc.tensor([2.0], requires_grad=True)
    g, = ampc.autograd.grad(x.lerp(x * x, 0.5).sum(), x, create_graph=True)
    assert g.tolist() == [2.5]       # d/dx (x + x^2) / 2 = (1 + 2x) / 2
    g2, = ampc.autograd.grad(g.sum(), x)
    assert g2.tolist() == [1.0]


def test_in_place_autograd():
    """lerp_ on a non-leaf is recorded (torch's semantics); on a leaf that
    requires grad it is refused."""
    s = ampc.tensor([1.0, 2.0], requires_grad=True)
    w = ampc.tensor([0.5, 0.25], requires_grad=True)
    y = s * 1.0
    y.lerp_(ampc.tensor([3.0, 6.0]), w)
    y.sum().backward()
    assert s.grad.tolist() == [0.5, 0.75]
    assert w.grad.tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="leaf Variable"):
        s.lerp_(ampc.tensor([0.0, 0.0]), 0.5)


# ----------------------------------------------------------------------------
# errors


def f32(*shape):
    return ampc.zeros(*shape)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: C.lerp(f32(2), f32(2).half(), 0.5), RuntimeError,
     r"lerp\(\): expected dtype float32 for `end` but got dtype float16"),
    (lambda: C.lerp(f32(2), f32(2), f32(2).bfloat16()), RuntimeError,
     r"expected dtype float32 for `weight` but got dtype bfloat16"),
    (lambda: C.lerp(ampc.zeros(2, dtype=ampc.int64),
                    ampc.zeros(2, dtype=ampc.int64), 1), RuntimeError,
     r"lerp\(\): not implemented for int64 tensors"),
    (lambda: C.lerp(f32(2), 1.0, 0.5), TypeError,
     r"lerp\(\): argument 'end' must be a Tensor, not float"),
    (lambda: C.lerp([1.0], f32(2), 0.5), TypeError,
     r"argument 'input' must be a Tensor"),
    (lambda: C.lerp(f32(2), f32(2), "a"), TypeError,
     r"argument 'weight' must be a Tensor or a number, not str"),
    (lambda: C.lerp(f32(2, 3), f32(4), 0.5), RuntimeError,
     r"lerp\(\): The size of tensor a \(3\) must match the size of tensor "
     r"b \(4\)"),
    (lambda: C.lerp(f32(2), f32(2), 0.5, f32(3)), RuntimeError,
     r"lerp\(\): output with shape \[3\] doesn't match the broadcast shape "
     r"\[2\]"),
    (lambda: C.lerp(f32(2), f32(2), 0.5, f32(2).half()), RuntimeError,
     r"expected out to have dtype float32"),
    (lambda: f32(2).lerp_(f32(3, 2), 0.5), RuntimeError,
     r"lerp_\(\): output with shape \[2\] doesn't match the broadcast "
     r"shape \[3, 2\]"),
    (lambda: f32(2).lerp(f32(2), None), TypeError,
     r"lerp\(\): argument 'weight' must be a number"),
    (lambda: C.lerp(f32(2), f32(2), 0.5, f32(1).expand(2)), RuntimeError,
     r"single memory location"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ----------------------------------------------------------------------------
# on a GPU: the CPU's bits


def _cuda(t):
    return t.to("cuda")


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", (1, 7, 33, 4099, 70001))
def test_cuda_matches_cpu(dtype, n):
    rng = np.random.default_rng(9)
    s, e = (from_values(rand_values((n,), dtype, rng), dtype)
            for _ in range(2))
    w = from_values(ref.round_to(weights((n,), rng), dtype), dtype)
    for weight in (w, 0.3, 0.9):
        cw = _cuda(weight) if isinstance(weight, ampc.Tensor) else weight
        got = C.lerp(_cuda(s), _cuda(e), cw)
        want = C.lerp(s, e, weight)
        assert np.array_equal(to64(got.cpu()), to64(want))
    # misaligned (odd offsets) and in place
    got = _cuda(s)[1:]
    got.lerp_(_cuda(e)[:-1], _cuda(w)[1:])
    want = s[1:].clone()
    want.lerp_(e[:-1], w[1:])
    assert np.array_equal(to64(got.cpu()), to64(want))


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cuda_broadcast_strided_and_grad(dtype):
    rng = np.random.default_rng(10)
    s = from_values(rand_values((33, 20), dtype, rng), dtype)
    e = from_values(rand_values((20, 33), dtype, rng), dtype).t()
    w = from_values(ref.round_to(weights((1, 20), rng), dtype), dtype)
    got = C.lerp(_cuda(s), _cuda(e), _cuda(w))
    assert np.array_equal(to64(got.cpu()), to64(C.lerp(s, e, w)))
    with pytest.raises(RuntimeError, match="same device"):
        C.lerp(_cuda(s), e, 0.5)
    x = ampc.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    x.lerp(ampc.tensor([3.0, 4.0], device="cuda"), 0.25).sum().backward()
    assert x.grad.cpu().tolist() == [0.75, 0.75]
