"""split/chunk/unbind (views), repeat/tile/flip (copies), linspace and eye
(ampc/_tensor_shape.py): against torch, with gradients through them, the
errors; on the CPU and (cuda-marked) the GPU."""
import numpy as np
import pytest

import ampc
from cuda_helpers import device  # noqa: F401 (a fixture)
from helpers import torch_or_skip


def _same(a, b):
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.detach().cpu().numpy(),
                                  b.detach().numpy())


CASES = [
    lambda x: x.split(2, 1), lambda x: x.split([1, 4, 0], 1),
    lambda x: x.chunk(3, -1), lambda x: x.chunk(2, 0), lambda x: x.unbind(0),
    lambda x: (x.repeat(2, 1, 3),), lambda x: (x.repeat(2, 3, 1, 2),),
    lambda x: (x.tile((2,)),), lambda x: (x.flip(0, 2),),
    lambda x: (x.flip(-1),),
]


def test_match_torch_with_gradients(device):
    torch = torch_or_skip()
    v = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    for case in CASES:
        a = ampc.tensor(v).to(device).requires_grad_()
        t = torch.tensor(v, requires_grad=True)
        got, want = case(a), case(t)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        k = [np.random.default_rng(i).normal(size=tuple(w.shape))
             .astype(np.float32) for i, w in enumerate(want)]
        sum((g * ampc.tensor(c).to(device)).sum()
            for g, c in zip(got, k)).backward()
        sum((w * torch.tensor(c)).sum() for w, c in zip(want, k)).backward()
        np.testing.assert_allclose(a.grad.cpu().numpy(), t.grad.numpy(),
                                   rtol=1e-5, atol=1e-5)


def test_linspace_and_eye_match_torch(device):
    torch = torch_or_skip()
    for a, b, n in [(-1, 1, 7), (0.1, 3.3, 11), (5, -2, 100), (0, 1, 1),
                    (2, 3, 0)]:
        got = ampc.linspace(a, b, n, device=device)
        want = torch.linspace(a, b, n)
        assert got.dtype is ampc.float32 and tuple(got.shape) == (n,)
        # (torch's vector loop may fuse the multiply-add: 1 ulp)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(),
                                   rtol=2e-7, atol=1e-7)
        if n > 1:                   # both ends exact (in float32)
            assert got[0].item() == np.float32(a)
            assert got[-1].item() == np.float32(b)
    for n, m in [(3, None), (2, 4), (4, 2), (0, 3)]:
        _same(ampc.eye(n, m, device=device), torch.eye(n, m or n))
    assert ampc.eye(2, dtype=ampc.int64).dtype is ampc.int64


def test_errors_follow_torch():
    x = ampc.arange(10.0)
    with pytest.raises(RuntimeError, match="split_with_sizes expects "
                                           "split_sizes to sum exactly to "
                                           "10"):
        x.split([2, 7])
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be "
                                           "greater than 0, got: 0"):
        x.chunk(0)
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat "
                                           "dims can not be smaller"):
        ampc.ones(2, 3).repeat(2)
    with pytest.raises(RuntimeError, match="number of steps must be "
                                           "non-negative"):
        ampc.linspace(0, 1, -1)
