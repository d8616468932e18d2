"""Advanced indexing and nonzero on the GPU (cuda/index.cu), against the
CPU (which tests/test_indexing.py checks against NumPy and torch) and,
where torch has CUDA, against torch on the GPU.  Skipped without a GPU."""
import numpy as np
import pytest

import ampc
from cuda_helpers import make_pair, requires_cuda, torch_cuda
from helpers import ALL_NAMES, FLOAT_NAMES, from_values, rand_values, to64
from test_indexing import np_index, numpy_cases, source

pytestmark = [pytest.mark.cuda, requires_cuda]
C = ampc._C


def on_gpu(index):
    conv = (lambda i: i.to("cuda") if isinstance(i, ampc.Tensor) else i)
    if isinstance(index, tuple):
        return tuple(conv(i) for i in index)
    return conv(index)


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("layout", ["contig", "step", "t"])
def test_getitem_matches_cpu(dtype, layout):
    _, vals = source(dtype)
    x, xg = make_pair(vals, dtype, layout)     # the view made on each device
    for index in numpy_cases(vals):
        for idx in (index, on_gpu(index)):      # CPU index tensors move
            got = xg[idx]
            assert got.device.type == "cuda"
            np.testing.assert_array_equal(to64(got.cpu()), to64(x[index]),
                                          err_msg=str(index))


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_setitem_matches_cpu(dtype):
    _, vals = source(dtype)
    rng = np.random.default_rng(2)
    for index in numpy_cases(vals):
        x = from_values(vals, dtype)
        xg = x.to("cuda")
        shape = vals[np_index(index)].shape
        v = rand_values(shape[1:], dtype, rng)
        if dtype == "bool":
            v = (v > 0).astype(np.float64)
        x[index] = from_values(v, dtype)
        xg[on_gpu(index)] = from_values(v, dtype).to("cuda")
        np.testing.assert_array_equal(to64(xg.cpu()), to64(x),
                                      err_msg=str(index))


@pytest.mark.parametrize("n", [0, 1, 4095, 4096, 4097, (1 << 20) + 3])
def test_nonzero_across_tiles(n):
    mask = np.random.default_rng(n).random(n) < 0.4
    got = C.nonzero(ampc.tensor(mask).to("cuda"))
    assert got.device.type == "cuda"
    np.testing.assert_array_equal(got.cpu().numpy(), np.argwhere(mask))
    shaped = mask[: (n // 12) * 12].reshape(3, 4, -1)
    np.testing.assert_array_equal(
        ampc.tensor(shaped).to("cuda").nonzero().cpu().numpy(),
        np.argwhere(shaped))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_gradients_match_cpu(dtype):
    rng = np.random.default_rng(3)
    vals = rand_values((50, 9), dtype, rng)
    rows = rng.integers(-50, 50, size=400)          # many repeats
    w = rand_values((400, 9), "float32", rng)
    grads = []
    for dev in ("cpu", "cuda"):
        x = from_values(vals, dtype).to(dev).requires_grad_()
        out = x[ampc.tensor(rows).to(dev)]
        (out.float() * ampc.tensor(w.astype(np.float32)).to(dev)).sum() \
            .backward()
        grads.append(to64(x.grad.cpu()))
    # the GPU adds repeated rows atomically, in float32, in any order
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-2 if
                               dtype != "float32" else 1e-5, atol=1e-5)


def test_index_put_accumulate_int64_and_float32():
    for dtype in (ampc.int64, ampc.float32):
        x = ampc.zeros(6, dtype=dtype).to("cuda")
        idx = (ampc.tensor([5, 0, 5, 5]).to("cuda"),)
        x.index_put_(idx, ampc.tensor([1, 2, 3, 4], dtype=dtype).to("cuda"),
                     accumulate=True)
        np.testing.assert_array_equal(to64(x.cpu()), [2, 0, 0, 0, 0, 8])


def test_bad_index_is_reported_at_the_next_call():
    """No host sync: the GPU flags the bad index (and reads 0 there); the
    next CUDA indexing call raises IndexError, and the one after works."""
    x = ampc.arange(5.0).to("cuda")
    got = x[ampc.tensor([1, 9]).to("cuda")]
    ampc.cuda.synchronize()
    np.testing.assert_array_equal(got.cpu().numpy(), [1, 0])
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        x[ampc.tensor([0]).to("cuda")]
    np.testing.assert_array_equal(x[ampc.tensor([4])].cpu().numpy(), [4])


def test_matches_torch_on_the_gpu():
    torch = torch_cuda()
    rng = np.random.default_rng(4)
    vals = rng.normal(size=(64, 33, 5)).astype(np.float32)
    mask = vals[:, :, 0] > 0
    rows = rng.integers(0, 64, size=100)
    x = ampc.tensor(vals).to("cuda")
    t = torch.from_numpy(vals).cuda()
    np.testing.assert_array_equal(
        x[ampc.tensor(mask).to("cuda")].cpu().numpy(),
        t[torch.from_numpy(mask).cuda()].cpu().numpy())
    np.testing.assert_array_equal(
        x[ampc.tensor(rows).to("cuda"), 3:].cpu().numpy(),
        t[torch.from_numpy(rows).cuda(), 3:].cpu().numpy())
    index = rng.integers(0, 33, size=(64, 7, 5))
    np.testing.assert_array_equal(
        x.gather(1, ampc.tensor(index).to("cuda")).cpu().numpy(),
        t.gather(1, torch.from_numpy(index).cuda()).cpu().numpy())


def test_scatter_index_add_take_one_hot_match_cpu():
    rng = np.random.default_rng(6)
    base = rng.normal(size=(6, 7)).astype(np.float32)
    index = rng.integers(0, 6, size=(9, 7))
    src = rng.normal(size=(9, 7)).astype(np.float32)
    labels = rng.integers(0, 10, size=(5, 3))
    outs = []
    for dev in ("cpu", "cuda"):
        x = ampc.tensor(base).to(dev)
        i, s = ampc.tensor(index).to(dev), ampc.tensor(src).to(dev)
        outs.append([x.scatter_add(0, i, s),
                     x.index_add(1, ampc.tensor([6, 0, 6]).to(dev),
                                 ampc.ones(6, 3).to(dev)),
                     x.take(ampc.tensor([[41, 0], [-1, 3]]).to(dev)),
                     ampc.nn.functional.one_hot(
                         ampc.tensor(labels).to(dev), 10)])
    for cpu, gpu in zip(*outs):
        assert gpu.device.type == "cuda"
        # (atomic adds on the GPU: the order of a repeated index's adds)
        np.testing.assert_allclose(to64(gpu.cpu()), to64(cpu), rtol=1e-6,
                                   atol=1e-6)
