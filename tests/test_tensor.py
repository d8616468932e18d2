"""The Tensor type from Python: creation, shapes and views, indexing, NumPy
interop (shared memory both ways), conversions, devices, repr."""
import copy
import pickle

import numpy as np
import pytest

import ampc
from helpers import DTYPES, assert_close, to64, torch_or_skip

# ----------------------------------------------------------------------------
# creation


def test_tensor_infers_dtype():
    assert ampc.tensor([1.0, 2]).dtype is ampc.float32
    assert ampc.tensor([1, 2]).dtype is ampc.int64
    assert ampc.tensor([True, False]).dtype is ampc.bool
    assert ampc.tensor([True, 2]).dtype is ampc.int64
    assert ampc.tensor(3).dtype is ampc.int64
    assert ampc.tensor(3.0).shape == ()
    assert ampc.tensor([[1, 2], [3, 4]]).shape == (2, 3 - 1)
    assert ampc.tensor([]).shape == (0,)
    assert ampc.tensor(np.float64(2.5)).dtype is ampc.float32


def test_tensor_from_numpy_arrays_copies():
    for npdt, dt in [(np.float32, ampc.float32), (np.float16, ampc.float16),
                     (np.int64, ampc.int64), (np.bool_, ampc.bool),
                     (np.float64, ampc.float32), (np.int32, ampc.int64),
                     (np.uint8, ampc.int64), (np.int16, ampc.int64)]:
        a = np.arange(6).reshape(2, 3).astype(npdt)
        t = ampc.tensor(a)
        assert t.dtype is dt, npdt
        assert_close(t, a.astype(np.float64), dt.name)
        if npdt is np.float32:
            a[0, 0] = 9
            assert t[0, 0].item() == 0         # a copy
    t = ampc.tensor(np.arange(6.0).reshape(2, 3).T)   # non-contiguous
    assert t.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_tensor_with_dtype_and_requires_grad():
    t = ampc.tensor([1, 2], dtype=ampc.float16, requires_grad=True)
    assert t.dtype is ampc.float16 and t.requires_grad and t.is_leaf
    t = ampc.tensor([0.5, 1.5], dtype=ampc.int64)
    assert t.tolist() == [0, 1]
    t = ampc.tensor([[1.5]], dtype=ampc.bfloat16)
    assert t.dtype is ampc.bfloat16 and t.float().item() == 1.5


def test_tensor_from_tensor_copies():
    a = ampc.tensor([1.0, 2.0], requires_grad=True)
    b = ampc.tensor(a)
    assert not b.requires_grad and b.data_ptr() != a.data_ptr()
    assert b.tolist() == [1.0, 2.0]
    assert ampc.tensor(a, dtype=ampc.float16).dtype is ampc.float16
    assert ampc.tensor([ampc.tensor(1.0), ampc.tensor(2.0)]).tolist() == \
        [1.0, 2.0]


def test_legacy_constructor_and_subclass():
    assert ampc.Tensor().shape == (0,)
    t = ampc.Tensor([1, 2])
    assert t.dtype is ampc.float32 and t.tolist() == [1.0, 2.0]
    assert ampc.Tensor(2, 3).shape == (2, 3)

    class Param(ampc.Tensor):
        def __new__(cls, data, requires_grad=True):
            return ampc.Tensor._make_subclass(cls, data, requires_grad)

    data = ampc.ones(2)
    p = Param(data)
    assert type(p) is Param and p.requires_grad and p.is_leaf
    assert p.data_ptr() == data.data_ptr() and not data.requires_grad
    assert type(p * 2) is ampc.Tensor
    (p * 2).sum().backward()
    assert p.grad.tolist() == [2.0, 2.0]
    q = copy.deepcopy(p)
    assert type(q) is Param and q.requires_grad


def test_as_tensor_shares_when_possible():
    a = np.zeros(3, dtype=np.float32)
    t = ampc.as_tensor(a)
    t[0] = 1
    assert a[0] == 1
    x = ampc.ones(2)
    assert ampc.as_tensor(x) is x


@pytest.mark.parametrize("fn,value", [(ampc.zeros, 0), (ampc.ones, 1)])
def test_zeros_ones(fn, value):
    for args in [(2, 3), ((2, 3),), ([2, 3],), (ampc.Size([2, 3]),)]:
        t = fn(*args)
        assert t.shape == (2, 3) and t.dtype is ampc.float32
        assert to64(t).tolist() == [[value] * 3] * 2
    assert fn(()).shape == ()
    assert fn(0).shape == (0,)
    for name, dt in DTYPES.items():
        t = fn(4, dtype=dt)
        assert t.dtype is dt
        assert_close(t, np.full(4, value), name)
    t = fn(2, requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_full_empty():
    assert ampc.full((2,), 7).dtype is ampc.int64
    assert ampc.full((2,), 7.5).tolist() == [7.5, 7.5]
    assert ampc.full((2,), True).dtype is ampc.bool
    assert ampc.full((1,), 3, dtype=ampc.float16).dtype is ampc.float16
    e = ampc.empty(3, 4, dtype=ampc.bfloat16)
    assert e.shape == (3, 4) and e.dtype is ampc.bfloat16


def test_like_functions():
    x = ampc.ones(2, 3, dtype=ampc.float16)
    for fn in (ampc.zeros_like, ampc.ones_like, ampc.empty_like,
               ampc.rand_like, ampc.randn_like):
        y = fn(x)
        assert y.shape == x.shape and y.dtype is ampc.float16
    assert ampc.zeros_like(x, dtype=ampc.int64).dtype is ampc.int64
    assert ampc.full_like(x, 3).float().sum().item() == 18
    assert ampc.zeros_like(x, requires_grad=True).requires_grad
    r = ampc.randint_like(ampc.zeros(100, dtype=ampc.int64), 3)
    assert 0 <= r.min().item() and r.max().item() < 3
    assert x.new_zeros(2).dtype is ampc.float16
    assert x.new_ones((1, 2)).shape == (1, 2)
    assert x.new_full((2,), 5).tolist() == [5.0, 5.0]
    assert x.new_tensor([1, 2]).dtype is ampc.float16
    assert x.new_empty(3).shape == (3,)


def test_arange_forms():
    assert ampc.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert ampc.arange(1, 4).tolist() == [1, 2, 3]
    assert ampc.arange(0, 1, 0.5).tolist() == [0.0, 0.5]
    assert ampc.arange(5.0).dtype is ampc.float32
    assert ampc.arange(3, dtype=ampc.float16).dtype is ampc.float16
    assert ampc.arange(0).shape == (0,)


def test_manual_seed_repeatable():
    ampc.manual_seed(7)
    a = ampc.rand(5)
    b = ampc.randn(3, dtype=ampc.bfloat16)
    ampc.manual_seed(7)
    assert ampc.rand(5).tolist() == a.tolist()
    assert ampc.randn(3, dtype=ampc.bfloat16).float().tolist() == \
        b.float().tolist()
    assert ampc.rand(5).tolist() != a.tolist()   # the stream moved on
    ampc.manual_seed(-1)      # negative seeds wrap like torch's
    ampc.manual_seed(np.int64(3))
    assert ampc.initial_seed() == 3


# ----------------------------------------------------------------------------
# shapes and views


def test_size_and_shape():
    t = ampc.zeros(2, 3, 4)
    assert isinstance(t.shape, ampc.Size) and isinstance(t.shape, tuple)
    assert t.shape == (2, 3, 4) and t.size() == t.shape
    assert t.size(1) == 3 and t.size(-1) == 4
    assert t.shape.numel() == 24 == t.numel() == t.nelement()
    assert t.ndim == 3 == t.dim()
    assert repr(t.shape) == "ampc.Size([2, 3, 4])"
    assert isinstance(t.shape[1:], ampc.Size)
    assert ampc.Size([2]) + (3,) == (2, 3)
    assert t.stride() == (12, 4, 1)
    assert pickle.loads(pickle.dumps(t.shape)) == (2, 3, 4)


def test_view_reshape_share_storage():
    t = ampc.arange(12)
    v = t.view(3, 4)
    assert v.data_ptr() == t.data_ptr()
    assert v.view(-1, 6).shape == (2, 6)
    assert t.view((2, 6)).shape == (2, 6)
    assert t.reshape([4, 3]).shape == (4, 3)
    v[0, 0] = 100
    assert t[0].item() == 100
    tt = v.t()
    assert not tt.is_contiguous()
    r = tt.reshape(12)           # needs a copy
    assert r.tolist() == v.numpy().T.reshape(-1).tolist()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        tt.view(12)
    assert t.view_as(ampc.zeros(2, 6)).shape == (2, 6)
    assert t.reshape_as(ampc.zeros(6, 2)).shape == (6, 2)


def test_transpose_permute_t():
    a = np.arange(24).reshape(2, 3, 4)
    t = ampc.tensor(a)
    assert t.transpose(0, 2).tolist() == np.swapaxes(a, 0, 2).tolist()
    assert t.transpose(-1, 0).shape == (4, 3, 2)
    assert t.permute(1, 2, 0).tolist() == a.transpose(1, 2, 0).tolist()
    assert t.permute((2, 0, 1)).shape == (4, 2, 3)
    m = ampc.tensor([[1, 2, 3]])
    assert m.t().tolist() == [[1], [2], [3]]
    assert ampc.tensor([1, 2]).t().tolist() == [1, 2]
    assert t.T.shape == (4, 3, 2)
    assert ampc.transpose(t, 0, 1).shape == (3, 2, 4)


def test_flatten_unsqueeze_squeeze_expand():
    t = ampc.zeros(2, 3, 4)
    assert t.flatten().shape == (24,)
    assert t.flatten(1).shape == (2, 12)
    assert t.flatten(0, 1).shape == (6, 4)
    assert ampc.flatten(t, start_dim=-2).shape == (2, 12)
    assert t.unsqueeze(0).shape == (1, 2, 3, 4)
    assert t.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert ampc.zeros(1, 3, 1).squeeze().shape == (3,)
    assert ampc.zeros(1, 3, 1).squeeze(0).shape == (3, 1)
    assert ampc.zeros(1, 3, 1).squeeze(1).shape == (1, 3, 1)
    e = ampc.tensor([[1], [2]]).expand(2, 3)
    assert e.tolist() == [[1, 1, 1], [2, 2, 2]]
    assert e.stride()[1] == 0
    assert ampc.tensor([[1], [2]]).expand(-1, 2).shape == (2, 2)
    assert ampc.ones(3).expand_as(ampc.zeros(2, 3)).shape == (2, 3)
    assert ampc.tensor(5.0).flatten().shape == (1,)


def test_contiguous():
    t = ampc.arange(6).view(2, 3)
    assert t.contiguous() is t
    c = t.t().contiguous()
    assert c.is_contiguous() and c.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert c.data_ptr() != t.data_ptr()


# ----------------------------------------------------------------------------
# indexing


def test_getitem_basic():
    a = np.arange(60).reshape(3, 4, 5)
    t = ampc.tensor(a)
    for idx in [0, -1, (1, 2), (1, 2, 3), slice(1, None), (slice(None), 1),
                (Ellipsis, 2), (None, 0), (slice(None, None, 2),),
                (slice(0, 3, 2), slice(1, 4, 2), slice(None, None, 3)),
                (1, Ellipsis, None), (slice(-2, None), -1), slice(5, 9)]:
        got = t[idx]
        assert got.tolist() == a[idx].tolist(), idx
        assert got.shape == a[idx].shape, idx
    assert t[1].data_ptr() == t.data_ptr() + 20 * 8
    assert t[np.int64(2), 0].tolist() == a[2, 0].tolist()
    assert t[ampc.tensor(1)].tolist() == a[1].tolist()


def test_getitem_out_of_range():
    t = ampc.zeros(2, 3)
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, -4]
    with pytest.raises(IndexError):
        t[0, 0, 0]


def test_setitem():
    t = ampc.zeros(3, 4)
    t[0] = 1
    t[1, 1:3] = ampc.tensor([5.0, 6.0])
    t[2, ::2] = 7.5
    t[:, -1] = ampc.tensor([[9.0], [9.0], [9.0]]).view(3)
    t[..., 0] = np.float32(-1)
    t[1, 2:] = [3.0, 4.0]
    expected = np.zeros((3, 4))
    expected[0] = 1
    expected[1, 1:3] = [5, 6]
    expected[2, ::2] = 7.5
    expected[:, -1] = 9
    expected[..., 0] = -1
    expected[1, 2:] = [3, 4]
    assert t.tolist() == expected.tolist()
    h = ampc.zeros(2, dtype=ampc.float16)
    h[0] = ampc.tensor(1.5)         # cast on write
    assert h.float().tolist() == [1.5, 0.0]


# ----------------------------------------------------------------------------
# NumPy interop


def test_from_numpy_shares_memory():
    for npdt in (np.float32, np.float16, np.int64, np.bool_):
        a = np.zeros((2, 3), dtype=npdt)
        t = ampc.from_numpy(a)
        assert t.dtype.name == np.dtype(npdt).name.replace("bool", "bool")
        t[1, 2] = 1
        assert a[1, 2] == 1
        a[0, 0] = 1
        assert t[0, 0].item() == 1


def test_from_numpy_strided_and_keepalive():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)[::2, 1:4]
    t = ampc.from_numpy(a)
    assert t.tolist() == a.tolist()
    b = np.arange(5, dtype=np.float32)
    t = ampc.from_numpy(b)
    del b
    import gc
    gc.collect()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_numpy_shares_memory():
    t = ampc.zeros(2, 3)
    a = t.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a[0, 1] = 5
    assert t[0, 1].item() == 5
    t[1, 0] = 7
    assert a[1, 0] == 7
    v = t.t().numpy()
    assert v.shape == (3, 2) and v[1, 0] == 5
    assert np.shares_memory(v, a)
    h = ampc.ones(2, dtype=ampc.float16).numpy()
    assert h.dtype == np.float16
    assert ampc.ones(2, dtype=ampc.bool).numpy().dtype == np.bool_
    assert ampc.ones(2, dtype=ampc.int64).numpy().dtype == np.int64


def test_numpy_keeps_tensor_alive():
    a = ampc.arange(5).numpy()
    import gc
    gc.collect()
    assert a.tolist() == [0, 1, 2, 3, 4]


def test_asarray_and_array_protocol():
    t = ampc.tensor([[1.0, 2.0]])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (1, 2)
    a[0, 0] = 3
    assert t[0, 0].item() == 3
    assert np.array(t, dtype=np.float64).dtype == np.float64
    assert np.asarray(t).base is not None
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(ampc.ones(1, requires_grad=True))
    with pytest.raises(TypeError, match="BFloat16"):
        np.asarray(ampc.ones(1, dtype=ampc.bfloat16))


def test_numpy_refusals_give_advice():
    with pytest.raises(RuntimeError,
                       match=r"Can't call numpy\(\) on Tensor that requires "
                             r"grad. Use tensor.detach\(\).numpy\(\) instead"):
        ampc.ones(2, requires_grad=True).numpy()
    with pytest.raises(TypeError,
                       match="Got unsupported ScalarType BFloat16"):
        ampc.ones(2, dtype=ampc.bfloat16).numpy()
    t = ampc.ones(2, requires_grad=True)
    assert t.numpy(force=True).tolist() == [1.0, 1.0]
    assert ampc.ones(2, dtype=ampc.bfloat16).numpy(force=True).dtype == \
        np.float32


def test_numpy_binop_defers_to_tensor():
    t = ampc.ones(3)
    r = np.float32(2.0) * t
    assert isinstance(r, ampc.Tensor) and r.tolist() == [2.0] * 3
    r = t + np.int64(1)
    assert isinstance(r, ampc.Tensor) and r.tolist() == [2.0] * 3


# ----------------------------------------------------------------------------
# Python conversions


def test_item_tolist():
    assert ampc.tensor(2.5).item() == 2.5
    assert isinstance(ampc.tensor(2).item(), int)
    assert ampc.tensor(True).item() is True
    assert ampc.tensor([[1.5]]).item() == 1.5
    assert ampc.tensor(1.5, dtype=ampc.bfloat16).item() == 1.5
    assert ampc.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert ampc.tensor([0.5], dtype=ampc.float16).tolist() == [0.5]
    assert ampc.tensor([0.5], dtype=ampc.bfloat16).tolist() == [0.5]
    assert ampc.tensor(3.0).tolist() == 3.0
    assert ampc.tensor([True]).tolist() == [True]
    assert ampc.ones(2, requires_grad=True).tolist() == [1.0, 1.0]
    with pytest.raises((RuntimeError, ValueError)):
        ampc.ones(2).item()


def test_len_iter_bool_float_int_index():
    t = ampc.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and rows[2].tolist() == [5, 6]
    assert bool(ampc.tensor([1.0])) and not bool(ampc.tensor(0))
    assert float(ampc.tensor([2.5])) == 2.5
    assert int(ampc.tensor(3.7)) == 3
    assert [10, 20, 30][ampc.tensor(1)] == 20
    assert f"{ampc.tensor(2.5):.2f}" == "2.50"
    assert ampc.tensor(2.0) in ampc.tensor([1.0, 2.0])
    assert 3 not in ampc.tensor([1.0, 2.0])


def test_hash_and_eq():
    a = ampc.ones(2)
    b = ampc.ones(2)
    d = {a: 1, b: 2}
    assert d[a] == 1 and d[b] == 2
    assert hash(a) != hash(b)
    assert (a == b).tolist() == [True, True]
    assert (a == None) is False       # noqa: E711 (as torch)
    assert a != "x"


def test_pickle_and_deepcopy():
    for name, dt in DTYPES.items():
        t = ampc.tensor([[1.5, -2.0], [0.0, 3.0]]).to(dt)
        u = pickle.loads(pickle.dumps(t))
        assert u.dtype is dt and u.shape == t.shape
        assert to64(u).tolist() == to64(t).tolist()
    p = ampc.ones(3, requires_grad=True)
    p.grad = ampc.full((3,), 2.0)
    q = copy.deepcopy(p)
    assert q.requires_grad and q.is_leaf and q.data_ptr() != p.data_ptr()
    assert q.grad.tolist() == [2.0] * 3
    assert pickle.loads(pickle.dumps(p)).requires_grad
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(p * 2)


# ----------------------------------------------------------------------------
# devices and to()


def test_device_objects():
    d = ampc.device("cuda:1")
    assert d.type == "cuda" and d.index == 1
    assert str(d) == "cuda:1"
    assert repr(ampc.device("cpu")) == "device(type='cpu')"
    assert repr(ampc.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert ampc.device("cpu").index is None
    assert ampc.device("cuda:0") == ampc.device("cuda", 0)
    assert ampc.device("cpu") != ampc.device("cuda")
    assert len({ampc.device("cpu"), ampc.device("cpu")}) == 1
    assert ampc.device(ampc.device("cuda:2")).index == 2
    assert pickle.loads(pickle.dumps(d)) == d


def test_tensor_device():
    t = ampc.ones(2)
    assert t.device == ampc.device("cpu")
    assert t.is_cpu and not t.is_cuda
    assert ampc.ones(2, device="cpu").device.type == "cpu"
    assert ampc.ones(2, device=ampc.device("cpu")).device.type == "cpu"
    assert t.cpu() is t


def test_to_forms():
    t = ampc.ones(2)
    assert t.to(ampc.float32) is t
    assert t.to("cpu") is t
    assert t.to(ampc.device("cpu"), ampc.float16).dtype is ampc.float16
    assert t.to(dtype=ampc.int64).dtype is ampc.int64
    assert t.to(device="cpu", dtype=ampc.bfloat16).dtype is ampc.bfloat16
    other = ampc.zeros(1, dtype=ampc.float16)
    assert t.to(other).dtype is ampc.float16
    c = t.to(ampc.float32, copy=True)
    assert c is not t and c.data_ptr() != t.data_ptr()
    assert t.to("cpu", ampc.float32, False, True).data_ptr() != t.data_ptr()


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
def test_cuda_unavailable_is_clear():
    assert ampc.cuda.device_count() == 0
    assert not ampc.cuda.is_available()
    assert isinstance(ampc.cuda.is_built(), bool)
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        ampc.ones(2, device="cuda")
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        ampc.ones(2).cuda()
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        ampc.ones(2).to("cuda:0")
    with pytest.raises(RuntimeError, match="memory_allocated"):
        ampc.cuda.memory_allocated()
    with pytest.raises(RuntimeError, match="max_memory_allocated"):
        ampc.cuda.max_memory_allocated()
    with pytest.raises(RuntimeError, match="reset_peak_memory_stats"):
        ampc.cuda.reset_peak_memory_stats()


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a GPU")
def test_cuda_roundtrip():
    t = ampc.arange(10, dtype=ampc.float32)
    g = t.cuda()
    assert g.is_cuda and g.device == ampc.device("cuda", 0)
    assert g.dtype is ampc.float32 and g.data_ptr() != t.data_ptr()
    assert "device='cuda:0'" in repr(g)
    back = g.cpu()
    assert back.is_cpu and back.tolist() == t.tolist()
    assert g.to("cuda:0") is g and t.to("cpu") is t
    x = ampc.ones(3, requires_grad=True)
    y = (x.to("cuda") * 2).cpu().sum()
    y.backward()
    # the gradient comes back through both moves, onto x's device
    assert x.grad.is_cpu and x.grad.dtype is ampc.float32
    assert x.grad.tolist() == [2.0] * 3


# ----------------------------------------------------------------------------
# repr


def test_repr_like_torch():
    assert repr(ampc.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(ampc.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(ampc.tensor(3.0)) == "tensor(3.)"
    assert repr(ampc.tensor([1, 2, 3])) == "tensor([1, 2, 3])"
    assert repr(ampc.tensor([True, False])) == "tensor([ True, False])"
    assert repr(ampc.tensor([1.0, 2.5], dtype=ampc.float16)) == \
        "tensor([1.0000, 2.5000], dtype=ampc.float16)"
    assert repr(ampc.tensor([0.1, 0.25], dtype=ampc.bfloat16)) == \
        "tensor([0.1001, 0.2500], dtype=ampc.bfloat16)"
    assert repr(ampc.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(ampc.zeros(0, dtype=ampc.float16)) == \
        "tensor([], dtype=ampc.float16)"
    assert repr(ampc.tensor([1.0, 2.0], requires_grad=True)) == \
        "tensor([1., 2.], requires_grad=True)"
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"
    assert repr(ampc.tensor([float("nan"), float("inf"), 1.5])) == \
        "tensor([   nan,    inf, 1.5000])"
    assert repr(ampc.tensor([1e-5, 1e3])) == "tensor([1.0000e-05, 1.0000e+03])"
    assert repr(ampc.tensor([[1.0, 2.0], [3.0, 4.0]])) == \
        "tensor([[1., 2.],\n        [3., 4.]])"
    assert str(ampc.tensor([-1, 100])) == "tensor([ -1, 100])"


def test_repr_summarizes_large():
    r = repr(ampc.arange(2000.0))
    assert "..." in r and r.count("\n") <= 3
    assert repr(ampc.zeros(100, 100)).count("\n") < 20


def test_repr_vs_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    for a in [rng.normal(size=(3, 4)).astype(np.float32),
              np.arange(2000, dtype=np.float32),
              rng.normal(size=(2, 2, 3)).astype(np.float32) * 1e6,
              np.array([0.5, -1.25, 1e-3], dtype=np.float32),
              np.arange(12).reshape(3, 4)]:
        ours = repr(ampc.tensor(a)).replace("ampc.", "torch.")
        assert ours == repr(torch.tensor(a))
    h = np.array([1.5, 2.25], dtype=np.float32)
    assert repr(ampc.tensor(h).half()).replace("ampc.", "torch.") == \
        repr(torch.tensor(h).half())


@pytest.mark.parametrize("module", [
    "ampc", "ampc.tensor", "ampc._tensor_convert", "ampc.autograd",
    "ampc._creation", "ampc._dtype_device", "ampc.cuda", "ampc.backends.cpu",
])
def test_docstring_examples(module):
    import doctest
    import importlib
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_to_parses_non_blocking_positionally_and_by_keyword():
    from ampc.tensor import _parse_to
    assert _parse_to(("cpu", ampc.float16, True), {}) == \
        ("cpu", ampc.float16, False, True)
    assert _parse_to((), {"non_blocking": True, "copy": True}) == \
        (None, None, True, True)
    x = ampc.ones(3)
    assert x.to("cpu", non_blocking=True) is x
    assert x.to(ampc.float16, non_blocking=True).dtype is ampc.float16


def test_clamp_with_a_tensor_bound_and_a_number_bound_has_gradients():
    x = ampc.tensor([-2.0, 0.5, 3.0], requires_grad=True)
    y = x.clamp(ampc.tensor(0.0), 2.0)
    assert y.tolist() == [0.0, 0.5, 2.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]
    z = x.detach().clamp(min=-1.0, max=ampc.tensor([1.0, 0.0, 5.0]))
    assert z.tolist() == [-1.0, 0.0, 3.0]


def test_as_strided_stays_inside_its_storage():
    """The internal _as_strided view (autograd's view replay) refuses
    elements outside the storage, below the offset with a negative stride
    included; inside it, a negative stride reads backwards."""
    t = ampc.arange(6).float()
    with pytest.raises(RuntimeError, match="storage holds 6"):
        t._as_strided((3,), (-1,), 0)
    with pytest.raises(RuntimeError, match="storage holds 6"):
        t._as_strided((4,), (2,), 0)
    assert t._as_strided((3,), (-2,), 5).tolist() == [5.0, 3.0, 1.0]
    assert t._as_strided((2, 3), (3, 1), 0).tolist() == [[0, 1, 2],
                                                         [3, 4, 5]]
