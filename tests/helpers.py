"""Test helpers: making tensors from NumPy data (contiguous or as strided
views), reading them back in float64, comparing against the oracle in
``reference.py`` with dtype-aware tolerances, finite-difference gradient
checks, and optional torch.

The shape follows tinygrad's ``helper_test_op``: a test is one line,
``check_op(shapes, ref_fn, ampc_fn, dtype=...)``.
"""
import numpy as np
import pytest

import ampc
import reference as ref

DTYPES = {
    "float32": ampc.float32, "float16": ampc.float16,
    "bfloat16": ampc.bfloat16, "int64": ampc.int64, "bool": ampc.bool,
}
FLOAT_NAMES = ("float32", "float16", "bfloat16")
ALL_NAMES = tuple(DTYPES)
SIZES = (1, 3, 7, 33)
BIG = 1000003


def levels():
    """Every CPU dispatch level this machine can run, lowest first."""
    return ampc.backends.cpu.levels()


def dtype_name(t):
    return t.dtype.name


# ----------------------------------------------------------------------------
# making and reading tensors


def rand_values(shape, dtype, rng, low=-3.0, high=3.0):
    """float64 values that ``dtype`` holds exactly."""
    if dtype == "bool":
        return (rng.random(shape) < 0.5).astype(np.float64)
    if dtype == "int64":
        return rng.integers(int(low), int(high) + 1, size=shape) \
            .astype(np.float64)
    return ref.round_to(rng.uniform(low, high, size=shape), dtype)


def from_values(values, dtype):
    """An ampc tensor of ``dtype`` holding float64 ``values`` exactly."""
    values = np.asarray(values, dtype=np.float64)
    if dtype == "bool":
        return ampc._C.tensor_from_array(_c(values != 0), ampc.bool, "cpu")
    if dtype == "int64":
        return ampc._C.tensor_from_array(_c(values.astype(np.int64)),
                                         ampc.int64, "cpu")
    if dtype == "bfloat16":
        return ampc._C.from_bits(
            _c(ref.bf16_bits(values.astype(np.float32))), ampc.bfloat16)
    npdt = np.float16 if dtype == "float16" else np.float32
    return ampc._C.tensor_from_array(_c(values.astype(npdt)), DTYPES[dtype],
                                     "cpu")


def _c(a):
    return np.require(a, requirements="C")


def strided(values, dtype, kind="step"):
    """A non-contiguous ampc view holding ``values``: every other element
    of a bigger tensor ("step"), or a transposed copy ("t", ndim >= 2)."""
    values = np.asarray(values, dtype=np.float64)
    if kind == "t" and values.ndim >= 2:
        base = from_values(np.swapaxes(values, -1, -2).copy(),
                           dtype)
        v = base.transpose(-1, -2)
        assert not v.is_contiguous() or min(values.shape[-2:]) == 1
        return v
    if values.ndim == 0:
        return from_values(values, dtype)
    shape = list(values.shape)
    shape[-1] *= 2
    big = np.zeros(shape)
    big[..., ::2] = values
    return from_values(big, dtype)[..., ::2]


def make(values, dtype, layout="contig"):
    if layout == "contig":
        return from_values(values, dtype)
    return strided(values, dtype, layout)


def to64(t):
    """An ampc tensor's values as a float64 NumPy array (bool -> 0/1)."""
    t = t.detach()
    if t.dtype is ampc.bfloat16:
        t = ampc._C.cast(t, ampc.float32)
    return np.array(t.numpy(), dtype=np.float64)


def bits(t):
    """The raw bit patterns of a float16/bfloat16 tensor (uint16)."""
    return ampc._C.to_bits(t.contiguous())


# ----------------------------------------------------------------------------
# comparing


def assert_close(actual, expected, dtype=None, rtol=None, atol=None,
                 k=1, equal_nan=True, msg=""):
    """Compare an ampc tensor (or array) with float64 expected values,
    rounded to ``dtype`` first.  NaN matches NaN, inf matches inf of the
    same sign."""
    if isinstance(actual, ampc.Tensor):
        if dtype is None:
            dtype = actual.dtype.name
        actual = to64(actual)
    expected = np.asarray(expected, dtype=np.float64)
    if dtype is not None:
        expected = ref.round_to(expected, dtype)
    if rtol is None or atol is None:
        r, a = ref.tolerance(dtype or "float32", k)
        rtol = r if rtol is None else rtol
        atol = a if atol is None else atol
    assert actual.shape == expected.shape, \
        f"{msg}shape {actual.shape} != expected {expected.shape}"
    ok = np.isclose(actual, expected, rtol=rtol, atol=atol,
                    equal_nan=equal_nan)
    if not ok.all():
        bad = np.argwhere(~ok)[:5]
        lines = [f"  at {tuple(i)}: got {actual[tuple(i)]!r}, expected "
                 f"{expected[tuple(i)]!r}" for i in bad]
        raise AssertionError(
            f"{msg}{(~ok).sum()} of {ok.size} elements differ "
            f"(rtol={rtol}, atol={atol}):\n" + "\n".join(lines))


def check_op(shapes, ref_fn, ampc_fn, dtype="float32", layout="contig",
             rng=None, low=-3.0, high=3.0, rtol=None, atol=None, k=1,
             out_dtype=None):
    """Run ampc_fn on tensors of ``shapes`` (values exact in dtype) and
    compare with ref_fn on the same float64 values."""
    rng = rng or np.random.default_rng(0)
    vals = [rand_values(s, dtype, rng, low, high) for s in shapes]
    ts = [make(v, dtype, layout) for v in vals]
    out = ampc_fn(*ts)
    expected = ref_fn(*vals)
    assert_close(out, expected, out_dtype or out.dtype.name, rtol, atol, k)
    return out, expected


# ----------------------------------------------------------------------------
# gradients by finite differences


def numeric_grad(ref_fn, inputs, weights, eps=1e-6):
    """d(sum(ref_fn(*inputs) * weights))/d(inputs) by central differences
    in float64."""
    grads = []
    for i, x in enumerate(inputs):
        g = np.zeros_like(x)
        it = np.nditer(x, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            plus = [a.copy() for a in inputs]
            minus = [a.copy() for a in inputs]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            fp = np.sum(ref_fn(*plus) * weights)
            fm = np.sum(ref_fn(*minus) * weights)
            g[idx] = (fp - fm) / (2 * eps)
        grads.append(g)
    return grads


def gradcheck(ampc_fn, ref_fn, shapes, rng=None, low=-2.0, high=2.0,
              rtol=1e-3, atol=1e-4, values=None):
    """Check ampc's backward of ampc_fn (float32 leaves) against central
    differences of the float64 reference ref_fn."""
    rng = rng or np.random.default_rng(1)
    if values is None:
        values = [ref.round_to(rng.uniform(low, high, size=s), "float32")
                  for s in shapes]
    leaves = [ampc.tensor(v.astype(np.float32), requires_grad=True)
              for v in values]
    out = ampc_fn(*leaves)
    w = ref.round_to(rng.uniform(0.5, 1.5, size=tuple(out.shape)),
                     "float32")
    loss = (out * ampc.tensor(w.astype(np.float32))).sum()
    loss.backward()
    expected = numeric_grad(ref_fn, values, w)
    for i, (leaf, e) in enumerate(zip(leaves, expected)):
        assert leaf.grad is not None, f"input {i} got no gradient"
        assert leaf.grad.shape == leaf.shape
        assert leaf.grad.dtype is leaf.dtype
        assert_close(leaf.grad, e, "float32", rtol=rtol, atol=atol,
                     msg=f"grad of input {i}: ")
    return leaves


# ----------------------------------------------------------------------------
# torch, when installed


def torch_or_skip():
    """torch, or skip the calling test cleanly when it is not installed."""
    return pytest.importorskip("torch")


def torch_dtype(torch, name):
    return getattr(torch, name)


def to_torch(torch, t):
    """An ampc tensor as a torch tensor with the same dtype and values."""
    name = t.dtype.name
    if name == "bfloat16":
        b = bits(t).astype(np.int16)
        return torch.from_numpy(b.copy()).view(torch.bfloat16)
    return torch.from_numpy(t.detach().contiguous().numpy().copy())


def torch_bits_equal(torch, ampc_t, torch_t):
    """True when the two tensors hold the same bits (NaN payloads aside)."""
    a = to64(ampc_t)
    b = torch_t.detach().to(torch.float64).numpy() \
        if torch_t.dtype != torch.bool else torch_t.numpy().astype(
            np.float64)
    return np.array_equal(a, b, equal_nan=True)
