"""tril/triu, roll, movedim, repeat_interleave, diag, diagonal,
diag_embed, outer, addmm,
hstack/vstack/dstack, meshgrid and broadcast_tensors
(ampc/_tensor_layout.py) against NumPy, finite differences and torch."""
import numpy as np
import pytest

import ampc
from helpers import (ALL_NAMES, assert_close, gradcheck, make, rand_values,
                     to64, to_torch, torch_or_skip)


def _x(shape, dtype="float32", layout="contig", seed=0):
    v = rand_values(shape, dtype, np.random.default_rng(seed))
    return v, make(v, dtype, layout)


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_tril_triu(dtype):
    for shape in ((1, 1), (7, 33), (2, 3, 5, 4)):
        for layout in ("contig", "t"):
            v, x = _x(shape, dtype, layout)
            for k in (-3, -1, 0, 1, 4):
                assert_close(x.tril(k), np.tril(v, k), dtype)
                assert_close(ampc.triu(x, diagonal=k), np.triu(v, k), dtype)
                assert x.tril(k).dtype is x.dtype
    v, x = _x((3, 4), dtype)
    y = x.clone()
    assert y.tril_(1) is y
    assert_close(y, np.tril(v, 1), dtype)
    y = x.clone()
    y.triu_(-1)
    assert_close(y, np.triu(v, -1), dtype)


def test_tril_triu_gradient_and_errors():
    gradcheck(lambda x: x.tril(-1), lambda x: np.tril(x, -1), [(4, 5)])
    gradcheck(lambda x: x.triu(1), lambda x: np.triu(x, 1), [(2, 3, 4)])
    with pytest.raises(RuntimeError, match="tril: input tensor must have "
                       "at least 2 dimensions"):
        ampc.zeros(3).tril()
    with pytest.raises(TypeError, match="triu.*'diagonal'.*int"):
        ampc.zeros(3, 3).triu(1.5)


@pytest.mark.parametrize("n", (1, 7, 33, 1031))
def test_roll(n):
    v, x = _x((3, n), "float32", "step")
    for shifts, dims in ((1, None), (-5, None), (2, 1), (-1, 0),
                         ((1, 3), (0, 1)), ((2, 2), (1, 1)), (n + 2, -1)):
        assert_close(x.roll(shifts, dims), np.roll(v, shifts, dims))
    assert ampc.roll(ampc.tensor(5), 3).item() == 5


def test_roll_gradient_and_errors():
    gradcheck(lambda x: x.roll((1, -2), (0, 1)),
              lambda x: np.roll(x, (1, -2), (0, 1)), [(3, 4)])
    with pytest.raises(RuntimeError, match="roll.*shifts: 2, dims:1"):
        ampc.zeros(3, 4).roll((1, 2), (0,))
    with pytest.raises(IndexError, match="roll"):
        ampc.zeros(3, 4).roll(1, 5)


def test_movedim():
    v, x = _x((2, 3, 4, 5))
    for s, d in ((0, -1), (1, 0), ((0, 1), (2, 3)), ((3, 0), (0, 3)),
                 ([-1, 1], [0, 2])):
        assert_close(x.movedim(s, d), np.moveaxis(v, s, d))
        assert_close(ampc.moveaxis(x, s, d), np.moveaxis(v, s, d))
    assert x.movedim(0, 1).data_ptr() == x.data_ptr()     # a view
    with pytest.raises(RuntimeError, match="movedim: Invalid source"):
        x.movedim((0, 1), (0,))
    with pytest.raises(RuntimeError, match="movedim: repeated dim in "
                       "`source`"):
        x.movedim((0, 0), (0, 1))


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_repeat_interleave(dtype):
    v, x = _x((3, 7), dtype, "step")
    assert_close(x.repeat_interleave(2), np.repeat(v, 2), dtype)
    assert_close(x.repeat_interleave(3, 1), np.repeat(v, 3, 1), dtype)
    r = [1, 0, 2]
    assert_close(x.repeat_interleave(ampc.tensor(r), 0),
                 np.repeat(v, r, 0), dtype)
    assert_close(x.repeat_interleave(ampc.tensor([2]), dim=1),
                 np.repeat(v, 2, 1), dtype)
    assert ampc.repeat_interleave(ampc.tensor([2, 0, 1])).tolist() == \
        [0, 0, 2]


def test_repeat_interleave_gradient_and_errors():
    gradcheck(lambda x: x.repeat_interleave(2, 0),
              lambda x: np.repeat(x, 2, 0), [(3, 2)])
    gradcheck(lambda x: x.repeat_interleave(ampc.tensor([1, 3]), 1),
              lambda x: np.repeat(x, [1, 3], 1), [(2, 2)])
    x = ampc.zeros(3, 4)
    with pytest.raises(RuntimeError, match="repeats must have the same "
                       "size"):
        x.repeat_interleave(ampc.tensor([1, 2]), 0)
    with pytest.raises(RuntimeError, match="non-negative"):
        x.repeat_interleave(-1)
    with pytest.raises(RuntimeError, match="can not be negative"):
        x.repeat_interleave(ampc.tensor([1, -2, 1]), 0)


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_diag(dtype):
    v1, x1 = _x((7,), dtype, "step")
    v2, x2 = _x((5, 8), dtype, "t")
    for k in (-3, -1, 0, 2, 9):
        assert_close(x1.diag(k), np.diag(v1, k), dtype)
        assert_close(ampc.diag(x2, k), np.diag(v2, k), dtype)
    gradcheck(lambda x: x.diag(1), lambda x: np.diag(x, 1), [(4,)])
    gradcheck(lambda x: x.diag(-1), lambda x: np.diag(x, -1), [(3, 4)])
    with pytest.raises(RuntimeError, match="diag.*Got 3D"):
        ampc.zeros(2, 2, 2).diag()


def _embed_ref(v, offset, d1, d2):
    """float64 diag_embed: zeros with v's last dim on the diagonal."""
    n = v.shape[-1] + abs(offset)
    out = np.zeros(v.shape[:-1] + (n, n))
    i = np.arange(v.shape[-1])
    r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
    out[..., r, c] = v
    return np.moveaxis(out, (-2, -1), (d1, d2))


DIAGONALS = [(0, 0, 1), (2, 0, 1), (-1, 2, 0), (1, -1, -3), (-9, 0, 2),
             (6, 1, 2)]


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_diagonal_is_a_strided_view(dtype):
    v, x = _x((5, 7, 6), dtype, "t")
    for offset, d1, d2 in DIAGONALS:
        d = x.diagonal(offset, d1, d2)
        assert_close(d, np.diagonal(v, offset, d1, d2), dtype)
        assert d._base is not None
    d = ampc.diagonal(x.clone(), 1, 0, 2)
    d.fill_(1)                       # writes reach the base
    assert (to64(d._base).diagonal(1, 0, 2) == 1).all()


def test_diagonal_gradients_and_higher_order():
    for offset, d1, d2 in DIAGONALS:
        gradcheck(lambda x: x.diagonal(offset, d1, d2),
                  lambda x: np.diagonal(x, offset, d1, d2), [(3, 5, 4)])
    x = ampc.randn(4, 4, requires_grad=True)
    g, = ampc.autograd.grad((x.diagonal(1) ** 3).sum(), x,
                            create_graph=True)
    g.sum().backward()
    want = np.zeros((4, 4))
    want[np.arange(3), np.arange(1, 4)] = 6 * to64(x).diagonal(1)
    assert_close(x.grad, want, "float32")


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_diag_embed(dtype):
    v, x = _x((3, 5), dtype, "t")
    for offset, d1, d2 in [(0, -2, -1), (2, 0, 2), (-1, 2, 1), (1, -3, 1)]:
        assert_close(x.diag_embed(offset, d1, d2),
                     _embed_ref(v, offset, d1 % 3, d2 % 3), dtype)
        if dtype == "float32":
            gradcheck(lambda t: ampc.diag_embed(t, offset, d1, d2),
                      lambda t: _embed_ref(t, offset, d1 % 3, d2 % 3),
                      [(3, 5)])


def test_diagonal_and_diag_embed_match_torch_and_errors():
    torch = torch_or_skip()
    v, x = _x((4, 3, 5))
    tx = to_torch(torch, x)
    for offset, d1, d2 in DIAGONALS:
        assert np.array_equal(to64(x.diagonal(offset, d1, d2)),
                              tx.diagonal(offset, d1, d2).double())
        e, te = x.diag_embed(offset, d1, d2), tx.diag_embed(offset, d1, d2)
        assert np.array_equal(to64(e), te.double())
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be "
                       "identical 1, -2"):
        x.diagonal(0, 1, -2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.diagonal(0, 0, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        ampc.tensor(2.0).diag_embed()
    with pytest.raises(TypeError, match="offset"):
        x.diagonal(0.5)


def test_outer():
    a, x = _x((7,), "float32", "step")
    b, y = _x((33,), "int64")
    out = ampc.outer(x, y)
    assert out.dtype is ampc.float32
    assert_close(out, np.outer(a, b))
    assert ampc.ones(2, dtype=ampc.int64).outer(
        ampc.ones(3, dtype=ampc.int64)).dtype is ampc.int64
    gradcheck(lambda a, b: a.outer(b), np.outer, [(3,), (4,)])
    with pytest.raises(RuntimeError, match="outer: Expected 1-D argument "
                       "vec2, but got 2-D"):
        ampc.zeros(3).outer(ampc.zeros(2, 2))


def test_addmm_values_gradient_and_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(2)
    i, a, b = (rng.normal(size=s).astype(np.float32)
               for s in ((33,), (7, 5), (5, 33)))
    out = ampc.addmm(ampc.tensor(i), ampc.tensor(a), ampc.tensor(b),
                     beta=0.5, alpha=2)
    assert_close(out, 0.5 * i + 2 * a @ b, k=5)
    t = torch.addmm(torch.tensor(i), torch.tensor(a), torch.tensor(b),
                    beta=0.5, alpha=2)
    assert np.allclose(to64(out), t.numpy(), rtol=1e-5, atol=1e-5)
    nan = ampc.full((7, 33), float("nan"))
    assert ampc.addmm(nan, ampc.tensor(a), ampc.tensor(b),
                      beta=0).isfinite().all()
    gradcheck(lambda i, a, b: i.addmm(a, b, beta=2, alpha=-1),
              lambda i, a, b: 2 * i - a @ b, [(2, 1), (2, 3), (3, 4)])
    with pytest.raises(RuntimeError, match="addmm.*cannot be multiplied "
                       r"\(2x3 and 4x2\)"):
        ampc.addmm(ampc.zeros(2), ampc.zeros(2, 3), ampc.zeros(4, 2))
    with pytest.raises(RuntimeError, match="addmm.*mat1 must be a matrix"):
        ampc.addmm(ampc.zeros(2), ampc.zeros(2, 3, 1), ampc.zeros(3, 2))


def test_addmm_autocast_lowers():
    torch = torch_or_skip()
    args = [ampc.randn(2, 3), ampc.randn(2, 4), ampc.randn(4, 3)]
    with ampc.autocast("cpu"):
        out = ampc.addmm(*args)
    with torch.autocast("cpu"):
        t = torch.addmm(*[to_torch(torch, a) for a in args])
    assert out.dtype is ampc.bfloat16 and t.dtype == torch.bfloat16


def test_stacks():
    a, x = _x((7,))
    b, y = _x((7,), seed=1)
    c, z = _x((2, 7), seed=2)
    assert_close(ampc.hstack([x, y]), np.hstack([a, b]))
    assert_close(ampc.vstack([x, z, y]), np.vstack([a, c, b]))
    assert_close(ampc.dstack((x, y)), np.dstack([a, b]))
    assert_close(ampc.hstack([z, z]), np.hstack([c, c]))
    assert_close(ampc.dstack([z, z]), np.dstack([c, c]))
    assert ampc.hstack([ampc.tensor(1.0), ampc.tensor(2.0)]).tolist() == \
        [1.0, 2.0]
    assert ampc.atleast_3d(ampc.tensor(1.0)).shape == (1, 1, 1)
    with pytest.raises(RuntimeError, match="hstack expects a non-empty"):
        ampc.hstack([])
    with pytest.raises(RuntimeError):
        ampc.vstack([ampc.zeros(3), ampc.zeros(4)])
    x.requires_grad_()
    ampc.vstack([x, x]).sum().backward()
    assert x.grad.tolist() == [2.0] * 7


def test_meshgrid_and_broadcast_tensors():
    a, b = ampc.arange(3), ampc.arange(4)
    for ix in ("ij", "xy"):
        got = ampc.meshgrid(a, b, ampc.arange(2), indexing=ix)
        want = np.meshgrid(np.arange(3), np.arange(4), np.arange(2),
                           indexing=ix)
        for g, w in zip(got, want):
            assert g.tolist() == w.tolist()
    with pytest.warns(UserWarning, match="indexing argument"):
        g = ampc.meshgrid([a, b])
    assert g[0].shape == (3, 4)
    with pytest.raises(RuntimeError, match='indexing must be one of "xy" '
                       'or "ij"'):
        ampc.meshgrid(a, b, indexing="foo")
    x, y = ampc.broadcast_tensors(ampc.zeros(3, 1), ampc.ones(4))
    assert x.shape == y.shape == (3, 4)
    with pytest.raises(RuntimeError, match="size of tensor a"):
        ampc.broadcast_tensors(ampc.zeros(3), ampc.zeros(2))
