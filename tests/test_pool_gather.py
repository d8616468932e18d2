"""_C.max_pool2d_gather: an input read at a max_pool2d's indices (0 at a
relu_masked index), the adjoint of max_pool2d_backward that second
derivatives through pooling use.  Against NumPy on odd sizes and every
dtype (the elements are copied: NaN payloads and signed zeros too), the
adjoint identity with the backward, bad indices, and on the GPU against
the CPU."""
import numpy as np
import pytest

import ampc
from cuda_helpers import requires_cuda
from helpers import FLOAT_NAMES, from_values, rand_values, to64

C = ampc._C


def gather_reference(x, idx):
    """x (.., H, W), idx (.., OH, OW) -> x at idx in each plane; 0 where
    idx < 0 (a relu_masked index)."""
    planes = x.reshape(-1, x.shape[-2] * x.shape[-1])
    flat = idx.reshape(planes.shape[0], -1)
    out = np.where(flat >= 0,
                   np.take_along_axis(planes, np.maximum(flat, 0), 1), 0.0)
    return out.reshape(idx.shape)


CASES = [((2, 3, 7, 9), 2, 2, 0), ((1, 5, 5, 5), 3, 2, 1),
         ((3, 4, 6), (2, 3), 1, 0), ((2, 1, 1, 1), 1, 1, 0)]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("relu_masked", [False, True])
def test_gather_matches_numpy(cpu_level, dtype, case, relu_masked):
    shape, k, st, pad = case
    rng = np.random.default_rng(len(shape) + st)
    x = from_values(rand_values(shape, dtype, rng), dtype)
    _, idx = C.max_pool2d(x, k, st, pad, relu_masked=relu_masked)
    other = from_values(rand_values(shape, dtype, rng), dtype)
    got = C.max_pool2d_gather(other, idx, relu_masked=relu_masked)
    assert got.dtype.name == dtype and tuple(got.shape) == tuple(idx.shape)
    want = gather_reference(to64(other), to64(idx).astype(np.int64))
    np.testing.assert_array_equal(to64(got), want)


def test_gather_is_the_adjoint_of_the_backward():
    """<gather(a), b> == <a, scatter(b)> for the same indices."""
    rng = np.random.default_rng(3)
    x = from_values(rng.normal(size=(2, 3, 9, 8)), "float32")
    _, idx = C.max_pool2d(x, 3, 2, 1)
    a = from_values(rng.normal(size=(2, 3, 9, 8)), "float32")
    b = from_values(rng.normal(size=tuple(idx.shape)), "float32")
    lhs = np.sum(to64(C.max_pool2d_gather(a, idx)) * to64(b))
    rhs = np.sum(to64(a) * to64(C.max_pool2d_backward(b, idx,
                                                      tuple(a.shape))))
    assert lhs == pytest.approx(rhs, rel=1e-6)


def test_gather_copies_the_bits():
    bits = np.array([[0x7e01, 0x8000], [0xfc00, 0x0001]], dtype=np.uint16)
    x = C.from_bits(bits.reshape(1, 1, 2, 2), ampc.float16)
    idx = ampc.tensor([[[[3, 0], [1, 2]]]])
    got = np.asarray(C.to_bits(C.max_pool2d_gather(x, idx))).reshape(-1)
    np.testing.assert_array_equal(got, [0x0001, 0x7e01, 0x8000, 0xfc00])


def test_gather_errors_name_the_op():
    x = ampc.ones(1, 2, 4, 4)
    idx = ampc.tensor([[[[0, 16]], [[3, 2]]]])
    with pytest.raises(IndexError, match=r"max_pool2d_gather\(\): indices "
                       r"must lie in \[0, 16\)"):
        C.max_pool2d_gather(x, idx)
    with pytest.raises(IndexError):
        C.max_pool2d_gather(x, idx * 0 - 1)         # -1 is not relu_masked
    with pytest.raises(RuntimeError, match="dtype int64"):
        C.max_pool2d_gather(x, ampc.zeros(1, 2, 1, 2))
    with pytest.raises(RuntimeError, match=r"same leading \(N, C\) dims"):
        C.max_pool2d_gather(x, ampc.zeros(1, 3, 1, 2, dtype=ampc.int64))
    with pytest.raises(RuntimeError, match="expected input to have a "
                       "floating-point dtype"):
        C.max_pool2d_gather(ampc.tensor([[[[1, 2]]]]),
                            ampc.zeros(1, 1, 1, 1, dtype=ampc.int64))


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("relu_masked", [False, True])
def test_gather_on_the_gpu_matches_the_cpu(dtype, relu_masked):
    rng = np.random.default_rng(5)
    x = from_values(rand_values((3, 5, 33, 17), dtype, rng), dtype)
    _, idx = C.max_pool2d(x, 3, 2, 1, relu_masked=relu_masked)
    a = from_values(rand_values((3, 5, 33, 17), dtype, rng), dtype)
    want = C.max_pool2d_gather(a, idx, relu_masked=relu_masked)
    got = C.max_pool2d_gather(a.to("cuda"), idx.to("cuda"),
                              relu_masked=relu_masked)
    np.testing.assert_array_equal(to64(got.cpu()), to64(want))
