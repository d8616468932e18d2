"""ampc.bmm / Tensor.bmm: the batched matrix product on matmul, with
torch's shape checks (no broadcasting), gradients and autocast."""
import numpy as np
import pytest

import ampc
from helpers import FLOAT_NAMES, assert_close, from_values, gradcheck, to64


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_bmm_values_every_float_dtype_and_non_contiguous(dtype, rng):
    a = rng.uniform(-2, 2, size=(5, 3, 7))
    b = rng.uniform(-2, 2, size=(5, 4, 7))
    x = from_values(a, dtype)
    y = from_values(b, dtype).transpose(1, 2)        # (5, 7, 4), strided
    out = ampc.bmm(x, y)
    assert out.dtype.name == dtype and out.shape == (5, 3, 4)
    assert_close(out, np.matmul(to64(x), to64(y)), dtype, k=7)
    assert ampc.equal(x.bmm(y), out)


def test_bmm_gradients(rng):
    gradcheck(lambda a, b: ampc.bmm(a, b), np.matmul,
              [(3, 2, 5), (3, 5, 4)], rng=rng)


def test_bmm_autocast_lowers_on_the_cpu():
    a, b = ampc.randn(2, 3, 4), ampc.randn(2, 4, 5)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert ampc.bmm(a, b).dtype is ampc.bfloat16


def test_bmm_matches_torch(rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((4, 3, 6)).astype(np.float32)
    b = rng.standard_normal((4, 6, 2)).astype(np.float32)
    np.testing.assert_allclose(to64(ampc.bmm(ampc.tensor(a), ampc.tensor(b))),
                               torch.bmm(torch.tensor(a), torch.tensor(b)),
                               rtol=1e-5, atol=1e-6)


def test_bmm_shape_errors():
    a = ampc.randn(4, 2, 3)
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        ampc.bmm(ampc.randn(2, 3), a)
    with pytest.raises(RuntimeError, match="batch2 must be a 3D tensor"):
        a.bmm(ampc.randn(3, 5))
    with pytest.raises(RuntimeError, match="Expected size for first two "
                       "dimensions of batch2 tensor to be: \\[4, 3\\] but "
                       "got: \\[1, 3\\]."):
        a.bmm(ampc.randn(1, 3, 5))       # no broadcasting
    with pytest.raises(TypeError):
        a.bmm([[1.0]])
