"""ampc.einsum (ampc/_einsum.py, sums, permutes and batched matmuls):
values against float64 np.einsum on odd sizes, gradients by finite
differences and against torch, every float dtype, non-contiguous and
broadcast operands, autocast and PyTorch's errors."""
import numpy as np
import pytest

import ampc
from helpers import FLOAT_NAMES, assert_close, from_values, gradcheck, to64

CASES = [
    ("ij,jk->ik", [(2, 3), (3, 5)]), ("ij,jk", [(2, 3), (3, 5)]),
    ("bij,bjk->bik", [(3, 2, 7), (3, 7, 4)]), ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]), ("...ij,...jk", [(5, 1, 2, 3), (4, 3, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]), ("Ba,ab", [(2, 3), (3, 4)]),
    ("ij,kl->", [(2, 3), (4, 5)]), ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),
    ("i,i->i", [(1,), (4,)]), ("ij,j->i", [(3, 4), (4,)]),
    (" i j , j k -> k i ", [(3, 2), (2, 4)]), (",->", [(), ()]),
    # a subscript repeated within an operand: its diagonal
    ("ii->i", [(5, 5)]), ("ii", [(7, 7)]), ("iij->j", [(3, 3, 5)]),
    ("bii->bi", [(2, 5, 5)]), ("iii->i", [(3, 3, 3)]),
    ("iji->ij", [(3, 2, 3)]), ("ij,jj->i", [(2, 3), (3, 3)]),
    ("jij,ii->j", [(3, 4, 3), (4, 4)]), ("...ii->...i", [(2, 3, 4, 4)]),
    ("abab->ba", [(2, 3, 2, 3)]),
]


def _eq(eq):
    # (NumPy sums no ellipsis dims away: name them)
    return eq.replace(" ", "").replace("b...,b...->b", "bxy,bxy->b")


@pytest.mark.parametrize("eq,shapes", CASES)
def test_einsum_values_and_gradients(eq, shapes, rng):
    vs = [rng.uniform(-2, 2, size=s) for s in shapes]
    got = ampc.einsum(eq, *[from_values(v, "float32") for v in vs])
    want = np.einsum(_eq(eq), *vs)
    assert_close(got, want, k=40)
    gradcheck(lambda *ts: ampc.einsum(eq, *ts),
              lambda *xs: np.einsum(_eq(eq), *xs), shapes, rng=rng)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_einsum_every_float_dtype_and_non_contiguous(dtype, rng):
    a = rng.uniform(-2, 2, size=(4, 3, 5))
    b = rng.uniform(-2, 2, size=(4, 6, 5))
    x = from_values(np.swapaxes(a, 1, 2).copy(), dtype).transpose(1, 2)
    y = from_values(b, dtype)
    out = ampc.einsum("bik,bjk->bji", [x, y])      # a list works too
    assert out.dtype.name == dtype and out.shape == (4, 6, 3)
    assert_close(out, np.einsum("bik,bjk->bji", to64(x), to64(y)), dtype,
                 k=5)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_einsum_diagonals_every_float_dtype_and_non_contiguous(dtype, rng):
    a = rng.uniform(-2, 2, size=(3, 7, 7))
    x = from_values(np.swapaxes(a, 0, 2).copy(), dtype).transpose(0, 2)
    for eq in ("bii->bi", "bii->b", "bii->i"):
        out = ampc.einsum(eq, x)
        assert out.dtype.name == dtype
        assert_close(out, np.einsum(eq, to64(x)), dtype, k=7)
    # the diagonal is a view: no copy of the operand
    assert ampc.einsum("ii->i", x[0])._base is not None


def test_einsum_matches_torch(rng):
    torch = pytest.importorskip("torch")
    for eq, shapes in CASES:
        vs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        a = [ampc.tensor(v, requires_grad=True) for v in vs]
        t = [torch.tensor(v, requires_grad=True) for v in vs]
        y, ty = ampc.einsum(eq, *a), torch.einsum(eq, *t)
        assert tuple(y.shape) == tuple(ty.shape), eq
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        y.backward(ampc.tensor(g))
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(to64(y), ty.detach().double(), rtol=1e-5,
                                   atol=1e-5, err_msg=eq)
        for p, tp in zip(a, t):
            np.testing.assert_allclose(to64(p.grad), tp.grad.double(),
                                       rtol=1e-5, atol=1e-5, err_msg=eq)


def test_einsum_autocast_runs_the_products_lower():
    a, b = ampc.randn(2, 3), ampc.randn(3, 4)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert ampc.einsum("ij,jk", a, b).dtype is ampc.bfloat16
        assert ampc.einsum("ij->j", a).dtype is ampc.float32


def test_einsum_errors():
    a, b = ampc.randn(2, 3), ampc.randn(3, 4)
    with pytest.raises(RuntimeError, match="fewer operands"):
        ampc.einsum("ij,jk", a)
    with pytest.raises(RuntimeError, match="more operands"):
        ampc.einsum("ij", a, b)
    with pytest.raises(RuntimeError, match="invalid subscript given at "
                       "index 1"):
        ampc.einsum("i1,jk", a, b)
    with pytest.raises(RuntimeError, match="number of subscripts in the "
                       "equation \\(3\\) does not match the number of "
                       "dimensions \\(2\\) for operand 0"):
        ampc.einsum("ijk,jk", a, b)
    with pytest.raises(RuntimeError, match="output subscript i appears more "
                       "than once"):
        ampc.einsum("ij,jk->ii", a, b)
    with pytest.raises(RuntimeError, match="output subscript q does not "
                       "appear"):
        ampc.einsum("ij,jk->q", a, b)
    with pytest.raises(RuntimeError, match="subscript i has size 3 for "
                       "operand 1 which does not broadcast with previously "
                       "seen size 2"):
        ampc.einsum("ij,ik", a, b)
    with pytest.raises(RuntimeError, match="not part of any ellipsis"):
        ampc.einsum("..i", a)
    with pytest.raises(RuntimeError, match="subscript i is repeated for "
                       "operand 0 but the sizes don't match, 4 != 3"):
        ampc.einsum("ii->i", ampc.randn(3, 4))
    with pytest.raises(TypeError, match="expected Tensor as element 0"):
        ampc.einsum("ij", 3)
    with pytest.raises(TypeError, match="sublist"):
        ampc.einsum(a, [0, 1])
