"""Advanced indexing (ampc/_indexing.py over _C.index_gather, index_put_ and
nonzero): reads and writes with int64 and bool tensors, lists and arrays
mixed with ints, slices, None and ..., against NumPy (whose rules PyTorch
shares except where an int sits between index tensors, checked against
torch), every dtype, strided sources, odd sizes, gradients by finite
differences and second derivatives, and the errors."""
import numpy as np
import pytest

import ampc
from helpers import (
    ALL_NAMES, FLOAT_NAMES, assert_close, from_values, gradcheck, rand_values,
    strided, to64, torch_or_skip,
)

C = ampc._C
SHAPE = (5, 7, 3)


def source(dtype, layout="contig", shape=SHAPE, seed=0):
    """A tensor of exact values in ``dtype`` and those values (float64)."""
    vals = rand_values(shape, dtype, np.random.default_rng(seed))
    if dtype == "bool":
        vals = (vals > 0).astype(np.float64)
    return (from_values(vals, dtype) if layout == "contig"
            else strided(vals, dtype, layout)), vals


def np_index(index):
    """The index with ampc tensors as NumPy arrays."""
    conv = (lambda i: i.numpy() if isinstance(i, ampc.Tensor) else i)
    if isinstance(index, tuple):
        return tuple(conv(i) for i in index)
    return conv(index)


def numpy_cases(vals):
    """Indices on which NumPy's result is PyTorch's."""
    mask0 = vals[:, 0, 0] > 0
    mask2 = vals[0] > 0
    return [
        ampc.tensor([4, 0, 0, -1]),
        [1, 3],
        ampc.tensor([[0, 1], [4, -5]]),
        (slice(None), ampc.tensor([6, 0, 3])),
        (Ellipsis, [2, 0]),
        (ampc.tensor([1, 2]), slice(1, 6, 2), ampc.tensor([0, 2])),
        (ampc.tensor([[0], [3]]), slice(None), ampc.tensor([2, 1, 0])),
        (None, [3, 1], None, slice(None), [1]),
        ([0, 4], 2),
        (slice(0, None, 2), [1, 6]),
        ampc.tensor(mask0),
        (slice(None), ampc.tensor(vals[0, :, 0] > 0)),
        (2, ampc.tensor(mask2)),
        ampc.tensor(vals > 0),
        (ampc.tensor([True, False, True, True, False]), [0, 6, 6]),
        [True, False, False, True, True],
        np.array([3, 3, 1]),
        ampc.tensor([], dtype=ampc.int64),
        ampc.tensor(np.zeros((5,), bool)),
    ]


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("layout", ["contig", "step", "t"])
def test_getitem_matches_numpy(dtype, layout):
    x, vals = source(dtype, layout)
    for index in numpy_cases(vals):
        got = x[index]
        want = vals[np_index(index)]
        assert tuple(got.shape) == want.shape, index
        assert got.dtype is x.dtype
        np.testing.assert_array_equal(to64(got), want, err_msg=str(index))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_getitem_copies_bits(dtype):
    """Elements are moved, not computed: NaN, inf and -0.0 come through."""
    x = from_values(np.array([np.nan, -0.0, np.inf, -np.inf, 1.5]), dtype)
    got = x[ampc.tensor([3, 1, 0, 2, 1])]
    want = C.to_bits(x)[[3, 1, 0, 2, 1]] if dtype != "float32" else None
    if want is not None:
        np.testing.assert_array_equal(C.to_bits(got), want)
    else:
        np.testing.assert_array_equal(
            got.numpy().view(np.uint32),
            x.numpy().view(np.uint32)[[3, 1, 0, 2, 1]])


def test_big_sizes_cross_the_parallel_split():
    rng = np.random.default_rng(3)
    vals = rng.normal(size=(1001, 257)).astype(np.float32)
    x = ampc.tensor(vals)
    rows = rng.integers(-1001, 1001, size=2049)
    np.testing.assert_array_equal(x[ampc.tensor(rows)].numpy(), vals[rows])
    cols = rng.integers(0, 257, size=301)
    np.testing.assert_array_equal(x[:, ampc.tensor(cols)].numpy(),
                                  vals[:, cols])
    mask = vals > 0.3
    np.testing.assert_array_equal(x[ampc.tensor(mask)].numpy(), vals[mask])
    # a put whose rest dims are split across threads
    y = ampc.zeros(7, 40000)
    y[ampc.tensor([6, 1, 6])] = ampc.arange(40000.0)
    expected = np.zeros((7, 40000), np.float32)
    expected[[6, 1]] = np.arange(40000.0)
    np.testing.assert_array_equal(y.numpy(), expected)


def test_int_between_index_tensors_follows_torch():
    """PyTorch applies ints first: x[0, :, [1, 2]] is (7, 2) where NumPy
    gives (2, 7)."""
    torch = torch_or_skip()
    x, vals = source("float32")
    t = torch.from_numpy(vals.astype(np.float32))
    for index in [(0, slice(None), [1, 2]), ([1, 3], 2, [0, 2]),
                  (slice(None), 3, [2, 0]), ([[0], [1]], 0, [1, 2, 0]),
                  (None, [3, 1], None, slice(None), 1)]:
        got = x[index]
        assert tuple(got.shape) == tuple(t[index].shape), index
        np.testing.assert_array_equal(got.numpy(), t[index].numpy())


def test_zero_dim_bool_index():
    torch = torch_or_skip()
    x, vals = source("float32")
    t = torch.from_numpy(vals.astype(np.float32))
    for flag in (True, False):
        got = x[ampc.tensor(flag)]
        assert tuple(got.shape) == tuple(t[torch.tensor(flag)].shape)
        np.testing.assert_array_equal(got.numpy(),
                                      t[torch.tensor(flag)].numpy())


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_setitem_matches_numpy(dtype):
    _, vals = source(dtype)
    rng = np.random.default_rng(5)
    for index in numpy_cases(vals):
        x = from_values(vals, dtype)
        expected = vals.copy()
        shape = expected[np_index(index)].shape
        # a value broadcast along the leading dims
        v = rand_values(shape[1:], dtype, rng)
        if dtype == "bool":
            v = (v > 0).astype(np.float64)
        x[index] = from_values(v, dtype)
        expected[np_index(index)] = v
        np.testing.assert_array_equal(to64(x), expected, err_msg=str(index))
        x[index] = 1
        expected[np_index(index)] = 1
        np.testing.assert_array_equal(to64(x), expected, err_msg=str(index))


def test_setitem_through_a_view_and_with_a_cast():
    base = ampc.zeros(4, 6)
    view = base[:, ::2]                 # strided destination
    view[ampc.tensor([3, 0])] = ampc.tensor([1, 2, 3])   # int64 -> float32
    expected = np.zeros((4, 6), np.float32)
    expected[[3, 0], ::2] = [1, 2, 3]
    np.testing.assert_array_equal(base.numpy(), expected)
    m = ampc.arange(12.0).reshape(3, 4)
    m[m > 6] = -1.0
    expected = np.arange(12.0).reshape(3, 4)
    expected[expected > 6] = -1
    np.testing.assert_array_equal(m.numpy(), expected)


# ----------------------------------------------------------------------------
# gradients


def test_gather_gradient_by_finite_differences():
    rows = np.array([4, 0, 0, -1, 2])
    gradcheck(lambda a: a[ampc.tensor(rows)], lambda a: a[rows], [SHAPE])
    gradcheck(lambda a: a[:, [6, 6, 1], 1:], lambda a: a[:, [6, 6, 1], 1:],
              [SHAPE])
    mask = np.random.default_rng(2).normal(size=SHAPE[:2]) > 0
    gradcheck(lambda a: a[ampc.tensor(mask)] * 2, lambda a: a[mask] * 2,
              [SHAPE])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_repeated_index_gradient_adds_in_float32(dtype):
    """2049 ones added at one element: 2049 in float32, where adding one
    at a time in float16 would stop at 2048."""
    x = ampc.zeros(3, dtype=getattr(ampc, dtype), requires_grad=True)
    x[ampc.tensor([1] * 2049)].sum().backward()
    assert x.grad.dtype is x.dtype
    want = np.array([0, 2049, 0], np.float64).astype(np.float32)
    assert_close(x.grad, want, dtype)


def test_setitem_gradients():
    torch = torch_or_skip()
    rng = np.random.default_rng(4)
    vals = rng.normal(size=(6, 4)).astype(np.float32)
    v = rng.normal(size=(4,)).astype(np.float32)
    results = []
    for lib in (ampc, torch):
        a = lib.tensor(vals, requires_grad=True)
        b = lib.tensor(v, requires_grad=True)
        y = a * 1.0
        y[lib.tensor([1, 4, 1])] = b
        (y * lib.arange(4.0)).sum().backward()
        results.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1])


def test_setitem_on_a_leaf_that_requires_grad_is_refused():
    a = ampc.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        a[ampc.tensor([0])] = 1.0


def test_second_derivatives():
    x = ampc.tensor([0.5, -1.0, 2.0, 3.0], requires_grad=True)
    idx = ampc.tensor([0, 2, 2, 3])
    g, = ampc.autograd.grad((x[idx] ** 3).sum(), x, create_graph=True)
    counts = np.array([1, 0, 2, 1])
    xs = x.detach().numpy().astype(np.float64)
    assert_close(g, 3 * xs ** 2 * counts, "float32")
    h, = ampc.autograd.grad((g * g).sum(), x)
    assert_close(h, 2 * (3 * xs ** 2 * counts) * 6 * xs * counts, "float32")
    # through a write at an index, too
    y = x * 1.0
    y[ampc.tensor([1])] = x[ampc.tensor([0])] ** 2
    g, = ampc.autograd.grad(y.sum(), x, create_graph=True)
    h, = ampc.autograd.grad(g.sum(), x)
    assert_close(h, np.array([2.0, 0, 0, 0]), "float32")


# ----------------------------------------------------------------------------
# errors


def test_errors_name_the_problem():
    x = ampc.zeros(5, 7)
    with pytest.raises(IndexError, match="index 7 is out of bounds for "
                                         "dimension 1 with size 7"):
        x[:, [0, 7]]
    with pytest.raises(IndexError, match="index -6 is out of bounds for "
                                         "dimension 0 with size 5"):
        x[ampc.tensor([-6])] = 1.0
    with pytest.raises(IndexError, match="shape of the mask \\[4\\] at "
                                         "index 0 does not match"):
        x[ampc.tensor([True] * 4)]
    with pytest.raises(IndexError, match="must be long or bool"):
        x[ampc.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match="too many indices"):
        x[[0], [1], [2]]
    with pytest.raises(IndexError, match="could not be broadcast"):
        x[[0, 1], [1, 2, 3]]
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        x[[0, 1]] = ampc.ones(3)
    with pytest.raises(RuntimeError, match="accumulate=True needs"):
        C.index_put_(ampc.zeros(3, dtype=ampc.bool), ampc.tensor([[0]]),
                     ampc.ones(1, dtype=ampc.bool), True)
    with pytest.raises(RuntimeError, match="expected out of shape"):
        C.index_gather(x, ampc.tensor([[0]]), ampc.empty(2, 7))
    with pytest.raises(RuntimeError, match="dtype int64"):
        C.index_gather(x, ampc.tensor([[0.0]]), ampc.empty(1, 7))
    with pytest.raises(RuntimeError, match="dtype bool"):
        C.nonzero(x)


# ----------------------------------------------------------------------------
# nonzero and the selection functions


@pytest.mark.parametrize("n", [0, 1, 7, 65535, 65536, 65537, 3 * 65536 + 5])
def test_nonzero_across_chunks(n):
    rng = np.random.default_rng(n)
    mask = rng.random(n) < 0.3
    np.testing.assert_array_equal(C.nonzero(ampc.tensor(mask)).numpy(),
                                  np.argwhere(mask))


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_nonzero_of_any_dtype_and_layout(dtype):
    x, vals = source(dtype, "t", shape=(3, 1, 5, 4), seed=6)
    vals[vals < 0.5] = 0
    x = from_values(vals, dtype) if dtype != "bool" else x
    vals = to64(x)
    np.testing.assert_array_equal(x.nonzero().numpy(), np.argwhere(vals))
    for got, want in zip(ampc.nonzero(x, as_tuple=True), np.nonzero(vals)):
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(ampc.argwhere(x).numpy(),
                                  np.argwhere(vals))
    assert tuple(ampc.nonzero(ampc.tensor(2.0)).shape) == (1, 0)


def test_selection_functions_match_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(8)
    vals = rng.normal(size=(4, 6, 3)).astype(np.float32)
    x, t = ampc.tensor(vals), torch.from_numpy(vals)
    idx = rng.integers(0, 4, size=(3, 5, 2))
    for dim, index in [(0, idx), (1, rng.integers(0, 6, size=(2, 9, 3))),
                       (-1, rng.integers(-3, 3, size=(4, 6, 1)))]:
        index = np.where(index < 0, index + 3, index)
        np.testing.assert_array_equal(
            ampc.gather(x, dim, ampc.tensor(index)).numpy(),
            torch.gather(t, dim, torch.from_numpy(index)).numpy())
    np.testing.assert_array_equal(
        x.index_select(1, ampc.tensor([5, 0, 5])).numpy(),
        t.index_select(1, torch.tensor([5, 0, 5])).numpy())
    mask = vals[0] > 0
    np.testing.assert_array_equal(
        x.masked_select(ampc.tensor(mask)).numpy(),
        t.masked_select(torch.from_numpy(mask)).numpy())
    for acc in (False, True):
        i = (torch.tensor([0, 3, 0]), torch.tensor([1, 1, 1]))
        want = t.index_put(i, torch.tensor(2.5), accumulate=acc)
        got = x.index_put(tuple(ampc.tensor(a.numpy()) for a in i),
                          ampc.tensor(2.5), accumulate=acc)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_gather_gradient_and_its_checks():
    index = np.array([[2, 0, 0], [1, 1, 2]])
    gradcheck(lambda a: a.gather(1, ampc.tensor(index)),
              lambda a: np.take_along_axis(a, index, 1), [(2, 4)])
    x = ampc.zeros(2, 4)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.gather(1, ampc.tensor([0]))
    with pytest.raises(RuntimeError, match=r"Size does not match at "
                                           r"dimension 0 expected index \[3, 1\]"):
        x.gather(1, ampc.zeros(3, 1, dtype=ampc.int64))


def test_index_put_accumulate_gradient():
    a = ampc.zeros(4, requires_grad=True)
    v = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = a * 1.0
    y.index_put_((ampc.tensor([1, 1, 3]),), v, accumulate=True)
    np.testing.assert_array_equal(y.detach().numpy(), [0, 3, 0, 3])
    (y * ampc.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1, 2, 3, 4])
    np.testing.assert_array_equal(v.grad.numpy(), [2, 2, 4])


def test_indexing_under_autocast_keeps_the_dtype():
    w = ampc.randn(10, 4, requires_grad=True)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        h = (ampc.randn(3, 10) @ w)[ampc.tensor([2, 0])]
    assert h.dtype is ampc.bfloat16
    h.float().sum().backward()
    assert w.grad.dtype is ampc.float32


def test_where_with_a_condition_alone_is_nonzero_as_tuple():
    mask = np.random.default_rng(9).random((4, 7)) < 0.5
    for got, want in zip(ampc.where(ampc.tensor(mask)), np.nonzero(mask)):
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(TypeError, match="condition alone, or"):
        ampc.where(ampc.tensor(mask), ampc.ones(1))


def test_mask_fill_fast_path_keeps_setitem_semantics():
    """x[mask] = number (or 0-d tensor) runs as masked_fill_: same values,
    same gradients (torch's), same in-place checks."""
    torch = torch_or_skip()
    rng = np.random.default_rng(10)
    vals = rng.normal(size=(5, 4, 3)).astype(np.float32)
    mask = vals[:, :, 0] > 0
    results = []
    for lib in (ampc, torch):
        a = lib.tensor(vals, requires_grad=True)
        v = lib.tensor(2.5, requires_grad=True)
        y = a * 1.0
        y[lib.tensor(mask)] = v
        y[lib.tensor(vals < -1)] = -7
        (y * lib.arange(3.0)).sum().backward()
        results.append([y.detach().numpy(), a.grad.numpy(), v.grad.numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want)
    leaf = ampc.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf[ampc.tensor([True, False, True])] = 1.0
    ints = ampc.arange(6).reshape(2, 3)
    ints[ints > 2] = 9.7                  # cast to self's dtype
    np.testing.assert_array_equal(ints.numpy(), [[0, 1, 2], [9, 9, 9]])


def test_index_forms_torch_reads_specially():
    """A 0-d int tensor (or array) is an int; Python bools add a dim; a
    tuple inside the index is a list; a short list holding a sequence is
    read as a tuple, with PyTorch's deprecation warning."""
    torch = torch_or_skip()
    x, vals = source("float32")
    t = torch.from_numpy(vals.astype(np.float32))
    cases = [(ampc.tensor(0), slice(None), [0, 1]),
             (np.array(1), [0, 2], slice(None)), True, False, (0, True),
             ((0, 1),), ((0, 1), (1, 2))]
    for index in cases:
        tindex = tuple(torch.tensor(i.item()) if isinstance(i, ampc.Tensor)
                       else i for i in index) \
            if isinstance(index, tuple) else index
        assert tuple(x[index].shape) == tuple(t[tindex].shape), index
        np.testing.assert_array_equal(x[index].numpy(), t[tindex].numpy())
    for index in ([[0, 1], [1, 2]], [[0, 1]], [0, slice(None)]):
        with pytest.warns(UserWarning, match="non-tuple sequence"):
            got = x[index]
        with pytest.warns(UserWarning):
            want = t[index]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_writes_read_the_value_as_it_was():
    """x[idx] = x reads x before writing (NumPy's answer; PyTorch refuses),
    a value may have leading size-1 dims, and a destination with two
    elements at one address is refused."""
    a = ampc.arange(6).reshape(3, 2)
    a[[2, 0, 1]] = a
    np.testing.assert_array_equal(a.numpy(), [[2, 3], [4, 5], [0, 1]])
    a = ampc.arange(4).reshape(2, 2)
    a[:, [1, 0]] = a
    np.testing.assert_array_equal(a.numpy(), [[1, 0], [3, 2]])
    y = ampc.zeros(3, 4)
    y[0, [1]] = ampc.tensor([[3.0]])
    y[[1, 2]] = ampc.tensor([[[1.0, 2.0, 3.0, 4.0]]])
    np.testing.assert_array_equal(
        y.numpy(), [[0, 3, 0, 0], [1, 2, 3, 4], [1, 2, 3, 4]])
    wide = ampc.zeros(4, 1).expand(4, 50000)
    with pytest.raises(RuntimeError, match="more than one element of the "
                                           "written-to tensor"):
        wide.index_put_((ampc.tensor([0, 1, 1]),), ampc.tensor(1.0),
                        accumulate=True)
