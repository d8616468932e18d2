"""Bool logic (& | ^ ~, in place too, logical_*) and isclose / allclose /
equal (ampc/_tensor_logic.py, ampc/_tensor_close.py): against NumPy with
broadcasting, against torch's tolerance rules (infinities, NaN, equal_nan,
integer dtypes), the errors; once on the CPU and once on CUDA."""
import numpy as np
import pytest

import ampc
from cuda_helpers import device  # noqa: F401 (a fixture)
from helpers import torch_or_skip


def test_bool_operators_match_numpy(device):
    rng = np.random.default_rng(0)
    a = rng.random((4, 1, 7)) < 0.5
    b = rng.random((3, 7)) < 0.5
    ta, tb = ampc.tensor(a).to(device), ampc.tensor(b).to(device)
    for got, want in [(ta & tb, a & b), (ta | tb, a | b), (ta ^ tb, a ^ b),
                      (~ta, ~a), (ta & True, a & True), (False | tb, b)]:
        assert got.dtype is ampc.bool
        np.testing.assert_array_equal(got.cpu().numpy(), want)
    c = ampc.tensor(b).to(device)
    c &= ampc.tensor(b[0]).to(device)
    c |= ampc.tensor(~b[1]).to(device)
    np.testing.assert_array_equal(c.cpu().numpy(), (b & b[0]) | ~b[1])
    x = ampc.tensor([0.5, 0.0, -2.0]).to(device)
    y = ampc.tensor([0, 3, 1]).to(device)
    for got, want in [(ampc.logical_and(x, y), [False, False, True]),
                      (x.logical_or(y), [True, True, True]),
                      (ampc.logical_xor(x, y), [True, True, False]),
                      (ampc.logical_not(x), [False, True, False])]:
        np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_bitwise_operators_refuse_other_dtypes():
    with pytest.raises(TypeError, match=r"__and__: ampc supports &, \|, \^ "
                                        "and ~ on bool tensors.*int64"):
        ampc.tensor([1, 2]) & ampc.tensor([1, 0])
    with pytest.raises(TypeError, match="__invert__.*float32"):
        ~ampc.tensor([1.0])


def test_isclose_allclose_equal_match_torch(device):
    torch = torch_or_skip()
    a = [1.0, float("inf"), float("-inf"), float("nan"), 1e10, 0.0, -3.0]
    b = [1.0 + 1e-6, float("inf"), float("inf"), float("nan"), 1.00001e10,
         1e-9, -3.1]
    cases = [dict(), dict(equal_nan=True), dict(rtol=0.05),
             dict(rtol=0.0, atol=0.0), dict(atol=0.2)]
    for dtype in ("float32", "float16", "bfloat16"):
        x = ampc.tensor(a).to(getattr(ampc, dtype)).to(device)
        y = ampc.tensor(b).to(getattr(ampc, dtype)).to(device)
        tx = torch.tensor(a).to(getattr(torch, dtype))
        ty = torch.tensor(b).to(getattr(torch, dtype))
        for kw in cases:
            np.testing.assert_array_equal(
                ampc.isclose(x, y, **kw).cpu().numpy(),
                torch.isclose(tx, ty, **kw).numpy(), err_msg=str(kw))
            assert ampc.allclose(x[:2], y[:2], **kw) == \
                torch.allclose(tx[:2], ty[:2], **kw)
    i, j = ampc.tensor([1, 2, 30]), ampc.tensor([1, 3, 31])
    ti, tj = torch.tensor([1, 2, 30]), torch.tensor([1, 3, 31])
    np.testing.assert_array_equal(
        i.to(device).isclose(j.to(device), rtol=0.05).cpu().numpy(),
        ti.isclose(tj, rtol=0.05).numpy())
    assert not ampc.equal(x, x)                 # NaN is not equal to itself
    assert ampc.equal(i, ampc.tensor([1, 2, 30]))
    assert not ampc.equal(i, ampc.tensor([[1, 2, 30]]))


def test_isclose_errors():
    x = ampc.ones(2)
    with pytest.raises(RuntimeError, match="float16 did not match float32"):
        ampc.isclose(x.half(), x)
    with pytest.raises(RuntimeError, match="rtol must be greater than or "
                                           "equal to zero, but got -1"):
        ampc.isclose(x, x, rtol=-1)
    with pytest.raises(TypeError, match="argument 'other' must be a Tensor"):
        ampc.allclose(x, 1.0)


def test_in_place_xor_and_numbers_in_logical_ops():
    x = ampc.tensor([True, False])
    x ^= True
    np.testing.assert_array_equal(x.numpy(), [False, True])
    x ^= ampc.tensor([True, True])
    np.testing.assert_array_equal(x.numpy(), [True, False])
    np.testing.assert_array_equal(
        ampc.logical_and(ampc.tensor([1.0, 0.0]), 1).numpy(), [True, False])
    with pytest.raises(TypeError, match="__iand__"):
        f = ampc.ones(2)
        f &= ampc.tensor([True, False])
