"""ampc.linalg.vector_norm, matrix_norm, norm and Tensor.norm /
ampc.norm (ampc/linalg.py, ampc/_tensor_stats.py): against float64 NumPy
(odd sizes, dims, keepdim, every float dtype computed in float32 and
rounded once), gradients by finite differences, torch's results and
errors where torch is installed, the CUDA autocast policy, and the same
tests on a GPU (marked cuda)."""
import math

import numpy as np
import pytest

import ampc
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import FLOAT_NAMES, assert_close, from_values, gradcheck, \
    rand_values

INF = math.inf
LA = ampc.linalg


def ref_vector_norm(x, ord, dim=None, keepdim=False):
    a = np.abs(x)
    axis = None if dim is None else (dim if isinstance(dim, tuple)
                                     else (dim,))
    if ord == INF:
        return a.max(axis=axis, keepdims=keepdim)
    if ord == -INF:
        return a.min(axis=axis, keepdims=keepdim)
    if ord == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdim).astype(np.float64)
    with np.errstate(divide="ignore"):     # 0 ** negative: inf, norm 0
        return (a ** ord).sum(axis=axis, keepdims=keepdim) ** (1.0 / ord)


def ref_matrix_norm(x, ord, dim=(-2, -1), keepdim=False):
    if ord == "fro":
        return np.sqrt((x * x).sum(axis=dim, keepdims=keepdim))
    d0, d1 = dim
    if ord in (INF, -INF):
        d0, d1 = d1, d0
    sums = np.abs(x).sum(axis=d0, keepdims=True)
    out = sums.max(axis=d1, keepdims=True) if ord > 0 else \
        sums.min(axis=d1, keepdims=True)
    return out if keepdim else out.squeeze(axis=(d0 % x.ndim, d1 % x.ndim))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("ord", [2, 1, INF, -INF, 0, 3, 0.5, -1.5])
@pytest.mark.parametrize("shape,dim", [((1000 + 3,), None), ((7, 33), 1),
                                       ((5, 4, 3), (0, 2)), ((3, 5), None)])
def test_vector_norm_matches_numpy(device, dtype, ord, shape, dim):
    vals = rand_values(shape, dtype, np.random.default_rng(1))
    vals.reshape(-1)[::9] = 0.0
    x = from_values(vals, dtype).to(device)
    for keepdim in (False, True):
        out = LA.vector_norm(x, ord, dim, keepdim)
        assert out.dtype is x.dtype
        assert_close(out.cpu(), ref_vector_norm(vals, ord, dim, keepdim),
                     dtype, k=8)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("ord", ["fro", 1, -1, INF, -INF])
@pytest.mark.parametrize("shape,dim", [((7, 33), (-2, -1)),
                                       ((3, 5, 4), (2, 0)),
                                       ((2, 9, 3, 5), (1, 3))])
def test_matrix_norm_matches_numpy(device, dtype, ord, shape, dim):
    vals = rand_values(shape, dtype, np.random.default_rng(2))
    x = from_values(vals, dtype).to(device)
    for keepdim in (False, True):
        out = LA.matrix_norm(x, ord, dim, keepdim)
        assert out.dtype is x.dtype
        assert_close(out.cpu(), ref_matrix_norm(vals, ord, dim, keepdim),
                     dtype, k=8)


def test_linalg_norm_dispatch(device):
    vals = np.random.default_rng(3).normal(size=(4, 5))
    x = ampc.tensor(vals.astype(np.float32), device=device)
    v32 = vals.astype(np.float32).astype(np.float64)
    assert_close(LA.norm(x).cpu(), np.sqrt((v32 ** 2).sum()), "float32")
    assert_close(LA.norm(x, INF).cpu(), ref_matrix_norm(v32, INF),
                 "float32")
    assert_close(LA.norm(x, 3, dim=1).cpu(), ref_vector_norm(v32, 3, 1),
                 "float32")
    assert_close(LA.norm(x, -1, dim=(1, 0)).cpu(),
                 ref_matrix_norm(v32, -1, (1, 0)), "float32")
    assert_close(LA.norm(x[0], 1).cpu(), ref_vector_norm(v32[0], 1),
                 "float32")
    assert_close(ampc.norm(x, "fro", dim=(0, 1)).cpu(),
                 np.sqrt((v32 ** 2).sum()), "float32")


def test_dtype_argument():
    x = ampc.tensor([3.0, 4.0]).half()
    out = LA.vector_norm(x, dtype=ampc.float32)
    assert out.dtype is ampc.float32 and out.item() == 5.0
    with pytest.raises(RuntimeError, match="without narrowing"):
        LA.vector_norm(ampc.tensor([3.0, 4.0]), dtype=ampc.float16)


@pytest.mark.parametrize("ord", [2, 1, INF, 3])
def test_vector_norm_gradient(ord):
    gradcheck(lambda x: LA.vector_norm(x, ord, 1),
              lambda x: ref_vector_norm(x, ord, 1), [(3, 7)])


@pytest.mark.parametrize("ord", ["fro", 1, -1, INF, -INF])
def test_matrix_norm_gradient(ord):
    gradcheck(lambda x: LA.matrix_norm(x, ord),
              lambda x: ref_matrix_norm(x, ord), [(2, 4, 5)])


def test_cuda_autocast_policy_is_float32():
    for op in ("linalg_vector_norm", "linalg_matrix_norm", "norm"):
        assert ampc._C.autocast_policy(op, "cuda") == "fp32"
        assert ampc._C.autocast_policy(op, "cpu") is None
    assert ampc._C.autocast_policy("cross", "cuda") == "promote"
    x = ampc.randn(4, 5).bfloat16()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert LA.vector_norm(x).dtype is ampc.bfloat16
        assert x.norm().dtype is ampc.bfloat16


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_autocast_computes_norms_in_float32():
    x = ampc.randn(4, 5, device="cuda").half()
    y = ampc.randn(4, 3, device="cuda")
    with ampc.autocast("cuda"):
        assert LA.vector_norm(x).dtype is ampc.float32
        assert LA.matrix_norm(x).dtype is ampc.float32
        assert x.norm(dim=1).dtype is ampc.float32
        assert LA.cross(y.half(), y, dim=1).dtype is ampc.float32
        assert LA.vector_norm(x, dtype=ampc.float16).dtype is ampc.float16


@pytest.mark.parametrize("call,exc,match", [
    (lambda: LA.vector_norm(ampc.tensor([3, 4])), RuntimeError,
     "Expected a floating point"),
    (lambda: LA.vector_norm(ampc.ones(2), "fro"), TypeError,
     "must be Number"),
    (lambda: LA.vector_norm(ampc.zeros(0), INF), RuntimeError,
     "does not have an identity"),
    (lambda: LA.vector_norm(ampc.zeros(0, 3), -1, 0), RuntimeError,
     "this dimension is empty"),
    (lambda: LA.matrix_norm(ampc.ones(3, 3), "nuc"), RuntimeError,
     "no SVD"),
    (lambda: LA.matrix_norm(ampc.ones(3, 3), 2), RuntimeError, "no SVD"),
    (lambda: LA.matrix_norm(ampc.ones(3, 3), 3), RuntimeError,
     "Order 3 not supported"),
    (lambda: LA.matrix_norm(ampc.ones(3), 1), RuntimeError,
     "at least 2 dimensions"),
    (lambda: LA.matrix_norm(ampc.ones(3, 3), 1, dim=(0, 0)), RuntimeError,
     "dims must be different"),
    (lambda: LA.norm(ampc.ones(3, 3, 3), 1), RuntimeError,
     "must be 1D or 2D"),
    (lambda: LA.norm(ampc.ones(3, 3), "fro", dim=0), RuntimeError,
     "dim must be a 2-tuple"),
    (lambda: ampc.ones(3, 3).norm("nuc"), RuntimeError, "no SVD"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    for name in FLOAT_NAMES:
        vals = rand_values((3, 7, 5), name, rng)
        x = from_values(vals, name)
        t = torch.tensor(vals).to(getattr(torch, name))
        for ord in (2, 1, INF, -INF, 0, 3.5):
            assert_close(LA.vector_norm(x, ord, (0, 2)),
                         torch.linalg.vector_norm(t, ord, (0, 2)).double()
                         .numpy(), name, k=4)
        for ord in ("fro", 1, -1, INF, -INF):
            assert_close(LA.matrix_norm(x, ord, (2, 1), True),
                         torch.linalg.matrix_norm(t, ord, (2, 1), True)
                         .double().numpy(), name, k=4)
        assert_close(LA.norm(x), torch.linalg.norm(t).double().numpy(),
                     name, k=4)
    g = rng.normal(size=(4, 6)).astype(np.float32)
    a = ampc.tensor(g, requires_grad=True)
    ta = torch.tensor(g, requires_grad=True)
    LA.matrix_norm(a, 1).backward()
    torch.linalg.matrix_norm(ta, 1).backward()
    assert_close(a.grad, ta.grad.double().numpy(), "float32")
