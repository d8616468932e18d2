"""floor, ceil, round (half to even; decimals), trunc / fix and frac
(csrc/elementwise_math.h, the _C.unary ops, ampc/_tensor_ops.py): exact
against NumPy on every CPU level and float dtype, with the special values;
PyTorch's integer, bool and gradient rules; torch where installed; the GPU
(marked cuda) against the CPU bit for bit."""
import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import FLOAT_NAMES, from_values, gradcheck, to64, torch_or_skip

NUMPY = {"floor": np.floor, "ceil": np.ceil, "round": np.rint,
         "trunc": np.trunc, "frac": lambda x: x - np.trunc(x)}


def _values(n=1001, seed=0):
    """Odd-length random values at several scales plus the special ones:
    halves (ties), +-0, +-inf, NaN, subnormals and values past 2^23 (all
    integers already)."""
    rng = np.random.default_rng(seed)
    special = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, np.inf, -np.inf,
               np.nan, 1e-40, -1e-40, 8388608.5, 2.0 ** 24 + 2, -3e38,
               0.49999997, -0.49999997]
    return np.concatenate([rng.normal(scale=4.0, size=n),
                           rng.normal(scale=1e6, size=37), special])


@pytest.mark.parametrize("op", sorted(NUMPY))
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_exact_against_numpy(cpu_level, op, dtype):
    x = ref.round_to(_values(), dtype)
    got = to64(getattr(ampc, op)(from_values(x, dtype)))
    with np.errstate(invalid="ignore"):
        want = ref.round_to(NUMPY[op](x), dtype)
    np.testing.assert_array_equal(got, want)
    # the sign of zero too (round(-0.4) = -0, frac(-0) = +0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_integers_bools_and_in_place():
    i = ampc.tensor([3, -2, 0])
    for op in ("floor", "ceil", "round", "trunc", "fix"):
        out = getattr(ampc, op)(i)
        assert out.dtype is ampc.int64 and out.tolist() == [3, -2, 0]
        assert out is not i
        name = "trunc" if op == "fix" else op
        with pytest.raises(RuntimeError, match=rf"{name}\(\): not "
                                               "implemented for 'Bool'"):
            getattr(ampc, op)(ampc.tensor([True]))
    with pytest.raises(RuntimeError, match=r"frac\(\): not implemented for "
                                           "ampc.int64"):
        ampc.frac(i)
    x = ampc.tensor([1.5, -1.5, 2.7])
    x.floor_()
    assert x.tolist() == [1.0, -2.0, 2.0]
    y = ampc.tensor([1.25, -1.75])
    y.frac_()
    assert y.tolist() == [0.25, -0.75]


def test_round_decimals():
    x = ampc.tensor([1.2345, -2.5678, 1234.5678, 0.125])
    want = ref.round_to(np.array([1.23, -2.57, 1234.57, 0.12]), "float32")
    np.testing.assert_array_equal(to64(x.round(decimals=2)), want)
    assert to64(ampc.round(x, decimals=-2)).tolist() == [0.0, -0.0, 1200.0,
                                                         0.0]
    with pytest.raises(RuntimeError, match="only supported for floating"):
        ampc.tensor([1, 2]).round(decimals=1)


def test_gradients():
    # piecewise constant: zeros, even where the incoming gradient is inf
    for op in ("floor", "ceil", "round", "trunc"):
        x = ampc.tensor([0.3, -1.7, 2.5], requires_grad=True)
        getattr(ampc, op)(x).backward(ampc.tensor([1.0, np.inf, np.nan]))
        assert x.grad.tolist() == [0.0, 0.0, 0.0]
    gradcheck(lambda x: ampc.frac(x) * x, lambda x: (x - np.trunc(x)) * x,
              [(7,)], low=0.1, high=0.9)
    x = ampc.tensor([1.25, 2.75], requires_grad=True)
    g, = ampc.autograd.grad((ampc.frac(x) * x).sum(), x, create_graph=True)
    g.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]     # d/dx (2x - trunc x) = 2


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_against_torch(dtype):
    torch = torch_or_skip()
    x = ref.round_to(_values(301, 3), dtype)
    a = from_values(x, dtype)
    t = torch.tensor(x, dtype=getattr(torch, dtype))
    for op in ("floor", "ceil", "round", "trunc", "frac"):
        got = to64(getattr(ampc, op)(a))
        want = getattr(torch, op)(t).double().numpy()
        np.testing.assert_array_equal(got, want, err_msg=op)
    got = to64(a.round(decimals=3))
    want = t.round(decimals=3).double().numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", sorted(NUMPY))
def test_devices(device, op):
    x = ampc.tensor(_values(4099, 5).astype(np.float32))
    got = to64(getattr(ampc, op)(x.to(device)).cpu())
    np.testing.assert_array_equal(got, to64(getattr(ampc, op)(x)))
