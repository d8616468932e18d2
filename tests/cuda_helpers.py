"""Shared helpers for the CUDA tests (tests/test_cuda_*.py).

Every CUDA test runs an op on the GPU and on the CPU with the same inputs
and compares (the CPU results are themselves checked against NumPy by the
CPU suite), and, where torch with CUDA is importable, against torch on the
GPU.  Without a GPU the tests skip cleanly.

    import pytest
    from cuda_helpers import requires_cuda, assert_close_to_cpu, device

    pytestmark = [pytest.mark.cuda, requires_cuda]

    def test_relu():
        x = np.random.default_rng(0).normal(size=(7, 33))
        assert_close_to_cpu(ampc.relu, x, dtype="float16", grad=True)

    def test_add(device):          # runs once on "cpu", once on "cuda"
        t = ampc.ones(3, device=device)
        ...

NOTE: a test module that uses the ``device`` fixture must import it
(``from cuda_helpers import device``): pytest finds fixtures in the
module's namespace.
"""
import numpy as np
import pytest

import ampc
import reference as ref
from helpers import DTYPES, from_values, to64

__all__ = [
    "cuda_available", "requires_cuda", "torch_cuda", "to_device",
    "make_pair", "assert_close_to_cpu", "assert_same", "device",
    "cuda_tolerance",
]


# ----------------------------------------------------------------------------
# is there a GPU?


def cuda_available():
    """True when this ampc was built with CUDA and sees a GPU.

    >>> cuda_available() in (True, False)
    True
    """
    cuda = getattr(ampc, "cuda", None)
    if cuda is None:
        return False
    try:
        return bool(cuda.is_available())
    except RuntimeError:
        return False


requires_cuda = pytest.mark.skipif(not cuda_available(),
                                   reason="needs a CUDA GPU")


def torch_cuda():
    """torch, when torch with CUDA is importable and sees a GPU; otherwise
    skip the calling test cleanly.

    >>> torch = torch_cuda()                     # doctest: +SKIP
    >>> torch.ones(2, device="cuda").sum().item()  # doctest: +SKIP
    2.0
    """
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch is installed without CUDA (or sees no GPU)")
    return torch


@pytest.fixture(params=[
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.cuda, requires_cuda]),
])
def device(request):
    """The device a test runs on: "cpu", then "cuda" (marked ``cuda`` and
    skipped without a GPU)."""
    return request.param


# ----------------------------------------------------------------------------
# making tensors on both devices


def to_device(t, device):
    """``t`` (an ampc tensor) on ``device``, autograd leaf flags kept off:
    a plain copy.

    >>> to_device(ampc.ones(2), "cpu").device.type
    'cpu'
    """
    return t.detach().to(device)


def make_pair(values, dtype="float32", layout="contig", requires_grad=False):
    """(cpu tensor, cuda tensor) holding the same float64 ``values``
    rounded to ``dtype``.

    layout: "contig"; "step" (every other element of a bigger tensor, so
    the last dimension has stride 2); "t" (the transpose of a contiguous
    tensor, ndim >= 2); "expand" (a broadcast view: ``values`` of shape
    (1, *s) expanded to (3, *s), stride 0 in dimension 0); "offset"
    (contiguous, but one element into its storage, so its data pointer is
    off the 16-byte alignment that the vectorised kernels need).  The view
    is made on each device from a base tensor on that device, so the GPU
    kernel really sees the strides (or the offset).
    """
    values = np.asarray(values, dtype=np.float64)
    values = ref.round_to(values, dtype) if dtype in (
        "float32", "float16", "bfloat16") else values
    if layout == "contig":
        base = from_values(values, dtype)
        pair = [base, base.to("cuda")]
    elif layout == "step":
        if values.ndim == 0:
            raise ValueError("make_pair(): layout 'step' needs ndim >= 1")
        shape = list(values.shape)
        shape[-1] *= 2
        big = np.zeros(shape)
        big[..., ::2] = values
        base = from_values(big, dtype)
        pair = [b[..., ::2] for b in (base, base.to("cuda"))]
    elif layout == "t":
        if values.ndim < 2:
            raise ValueError("make_pair(): layout 't' needs ndim >= 2")
        base = from_values(np.swapaxes(values, -1, -2).copy(), dtype)
        pair = [b.transpose(-1, -2) for b in (base, base.to("cuda"))]
    elif layout == "expand":
        if values.ndim == 0 or values.shape[0] != 1:
            raise ValueError(
                "make_pair(): layout 'expand' needs shape (1, ...)")
        base = from_values(values, dtype)
        shape = (3,) + tuple(values.shape[1:])
        pair = [b.expand(*shape) for b in (base, base.to("cuda"))]
    elif layout == "offset":
        base = from_values(np.concatenate([[0.0], values.reshape(-1)]),
                           dtype)
        pair = [b[1:].reshape(values.shape)
                for b in (base, base.to("cuda"))]
    else:
        raise ValueError(f"make_pair(): unknown layout {layout!r}")
    if requires_grad:
        pair = [p.detach().requires_grad_(True) for p in pair]
    return pair[0], pair[1]


# ----------------------------------------------------------------------------
# comparing


def cuda_tolerance(dtype, k=1):
    """(rtol, atol) between a CPU and a GPU result of a k-term float32
    computation rounded to ``dtype``.  Both sides accumulate in float32
    but in different orders (the GPU's tree reduction, the CPU's blocked
    loops), so each is a few ulps from the exact value and they may be
    twice that apart: one extra ulp of the dtype at the final rounding, and
    float32 error growing like sqrt(k)."""
    if dtype in ("int64", "bool"):
        return 0.0, 0.0
    r, a = ref.tolerance(dtype, k)
    return 2.0 * r, 2.0 * a


def _as_list(out):
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def assert_same(cuda_t, cpu_t, dtype=None, rtol=None, atol=None, k=1,
                msg=""):
    """A CUDA tensor equals a CPU tensor within ``dtype``'s tolerance:
    same shape, same dtype, device type cuda, NaN where NaN, inf where
    inf of the same sign."""
    assert cuda_t.device.type == "cuda", \
        f"{msg}result is on {cuda_t.device}, expected cuda"
    assert cuda_t.dtype is cpu_t.dtype, \
        f"{msg}dtype {cuda_t.dtype} on cuda, {cpu_t.dtype} on cpu"
    assert tuple(cuda_t.shape) == tuple(cpu_t.shape), \
        f"{msg}shape {tuple(cuda_t.shape)} on cuda, {tuple(cpu_t.shape)} " \
        "on cpu"
    dtype = dtype or cpu_t.dtype.name
    r, a = cuda_tolerance(dtype, k)
    rtol = r if rtol is None else rtol
    atol = a if atol is None else atol
    got = to64(cuda_t.detach().cpu())
    want = to64(cpu_t.detach())
    if dtype in ("int64", "bool") and rtol == 0 and atol == 0:
        ok = (got == want) | (np.isnan(got) & np.isnan(want))
    else:
        ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        bad = np.argwhere(~ok)[:5]
        lines = [f"  at {tuple(i)}: cuda {got[tuple(i)]!r}, cpu "
                 f"{want[tuple(i)]!r}" for i in bad]
        raise AssertionError(
            f"{msg}{(~ok).sum()} of {ok.size} elements differ between cuda "
            f"and cpu (dtype {dtype}, rtol={rtol}, atol={atol}):\n"
            + "\n".join(lines))


def assert_close_to_cpu(fn, *arrays, dtype="float32", layout="contig",
                        grad=False, rtol=None, atol=None, k=1,
                        grad_k=None, seed=0):
    """Run ``fn`` on CPU tensors and on CUDA tensors made from the same
    NumPy ``arrays`` (rounded to ``dtype``) and compare every output, and
    with grad=True every input's gradient after backward() from the same
    random upstream gradient.  Returns (cuda outputs, cpu outputs) as
    lists.

    >>> assert_close_to_cpu(ampc.relu, np.ones((3, 5)),
    ...                     dtype="float16")    # doctest: +SKIP

    dtype: the inputs' dtype name ("float32", "float16", "bfloat16",
    "int64", "bool").  k: the number of terms each output sums, for the
    tolerance (e.g. the reduced length, or IN for linear); grad_k: the
    same for the gradients (default k).  layout: see make_pair().
    """
    if dtype not in DTYPES:
        raise ValueError(f"assert_close_to_cpu(): unknown dtype {dtype!r}")
    floating = dtype in ("float32", "float16", "bfloat16")
    want_grad = grad and floating
    pairs = [make_pair(a, dtype, layout, requires_grad=want_grad)
             for a in arrays]
    cpu_in = [p[0] for p in pairs]
    cuda_in = [p[1] for p in pairs]
    cpu_out = _as_list(fn(*cpu_in))
    cuda_out = _as_list(fn(*cuda_in))
    assert len(cpu_out) == len(cuda_out), \
        f"{len(cuda_out)} outputs on cuda, {len(cpu_out)} on cpu"
    for i, (g, c) in enumerate(zip(cuda_out, cpu_out)):
        assert_same(g, c, rtol=rtol, atol=atol, k=k, msg=f"output {i}: ")
    if not want_grad:
        return cuda_out, cpu_out
    # One scalar loss per device, sum(out * w), with the same w: backward
    # then starts from the same upstream gradient on both devices.
    losses = []
    for outs in (cpu_out, cuda_out):
        loss = None
        for j, o in enumerate(outs):
            if not getattr(o, "requires_grad", False):
                continue
            w = ref.round_to(
                np.random.default_rng(seed + j).uniform(
                    0.5, 1.5, size=tuple(o.shape)), o.dtype.name)
            wt = from_values(w, o.dtype.name)
            if o.device.type == "cuda":
                wt = wt.to("cuda")
            term = (o * wt).sum()
            loss = term if loss is None else loss + term
        losses.append(loss)
    if losses[0] is None:
        return cuda_out, cpu_out
    for loss in losses:
        loss.backward()
    gk = k if grad_k is None else grad_k
    for i, (c, g) in enumerate(zip(cpu_in, cuda_in)):
        if c.grad is None:
            assert g.grad is None, \
                f"input {i} has a gradient on cuda but not on cpu"
            continue
        assert g.grad is not None, \
            f"input {i} has a gradient on cpu but not on cuda"
        assert_same(g.grad, c.grad, rtol=rtol, atol=atol, k=gk,
                    msg=f"grad of input {i}: ")
    return cuda_out, cpu_out
