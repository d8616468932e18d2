"""Conv2d's padding_mode ('zeros', 'reflect', 'replicate', 'circular') and
the padding strings of F.conv2d / Conv2d ('valid', and 'same' with an
uneven total split as PyTorch: the extra element at the bottom or right):
values against a float64 NumPy reference (np.pad then the convolution) on
odd sizes in every float dtype, gradients by finite differences, torch
where installed, the Conv2d+ReLU+MaxPool2d fold, and the errors
(ConvTranspose allows 'zeros' only, as PyTorch)."""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
import reference as ref
from helpers import FLOAT_NAMES, assert_close, gradcheck, to64

NP_MODES = {"zeros": "constant", "reflect": "reflect",
            "replicate": "edge", "circular": "wrap"}
MODES = list(NP_MODES)

# (kernel_size, Conv2d kwargs)
CASES = [
    ((3, 3), dict(padding=1)),
    ((3, 4), dict(padding=(2, 1), stride=(2, 1))),
    ((2, 4), dict(padding="same")),                  # uneven: +1 right
    ((3, 2), dict(padding="same", dilation=(2, 3))),
    ((3, 3), dict(padding="valid", stride=2, groups=3)),
]


def same_sides(kernel, dilation):
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return [(t // 2, t - t // 2) for t in totals]


def conv_ref(x, w, b, kernel, kw, mode):
    """float64: x padded by np.pad in the mode, then conv2d unpadded."""
    stride = kw.get("stride", 1)
    stride = stride if isinstance(stride, tuple) else (stride, stride)
    dilation = kw.get("dilation", (1, 1))
    padding = kw.get("padding", 0)
    if padding == "same":
        sides = same_sides(kernel, dilation)
    elif padding == "valid":
        sides = [(0, 0), (0, 0)]
    else:
        p = padding if isinstance(padding, tuple) else (padding, padding)
        sides = [(p[0], p[0]), (p[1], p[1])]
    xp = np.pad(x, [(0, 0), (0, 0)] + sides, mode=NP_MODES[mode])
    return ref.conv2d(xp, w, b, stride=stride, dilation=dilation,
                      groups=kw.get("groups", 1))


def module(kernel, kw, mode, dtype=None):
    m = nn.Conv2d(6, 9, kernel, padding_mode=mode, dtype=dtype, **kw)
    return m


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,kw", CASES,
                         ids=["p1", "p21_s21", "same_even", "same_dil",
                              "valid_g3"])
def test_conv2d_padding_modes_values(kernel, kw, mode, dtype, rng):
    m = module(kernel, kw, mode, getattr(ampc, dtype))
    x = ref.round_to(rng.uniform(-2, 2, (2, 6, 7, 9)), dtype)
    xt = ampc.tensor(x.astype(np.float32)).to(getattr(ampc, dtype))
    y = m(xt)
    want = conv_ref(x, to64(m.weight), to64(m.bias), kernel, kw, mode)
    k = 6 // kw.get("groups", 1) * kernel[0] * kernel[1]
    r, _ = ref.tolerance(dtype, k)
    assert_close(y, want, dtype, rtol=r, atol=r * 4)
    # unbatched (C, H, W) gives the batch's first image
    assert_close(m(xt[0]), to64(y)[0], dtype, rtol=r, atol=r * 4)


def numeric_weight_grad(x, w, b, kernel, kw, mode, gw, eps=1e-6):
    """d(sum(conv_ref * gw))/dw by central differences in float64."""
    g = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        plus, minus = w.copy(), w.copy()
        plus[idx] += eps
        minus[idx] -= eps
        g[idx] = (np.sum(conv_ref(x, plus, b, kernel, kw, mode) * gw)
                  - np.sum(conv_ref(x, minus, b, kernel, kw, mode) * gw)) \
            / (2 * eps)
    return g


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,kw", CASES[1:4],
                         ids=["p21_s21", "same_even", "same_dil"])
def test_conv2d_padding_modes_gradients(kernel, kw, mode, rng):
    m = module(kernel, kw, mode)
    w, b = to64(m.weight), to64(m.bias)
    # the input's gradient (reflected / wrapped pixels add up)
    gradcheck(m, lambda x: conv_ref(x, w, b, kernel, kw, mode),
              [(1, 6, 5, 7)], rng=rng)
    # the weight's
    m.weight.grad = None
    xv = ref.round_to(rng.uniform(-2, 2, (1, 6, 5, 7)), "float32")
    y = m(ampc.tensor(xv.astype(np.float32)))
    gw = ref.round_to(rng.uniform(0.5, 1.5, tuple(y.shape)), "float32")
    (y * ampc.tensor(gw.astype(np.float32))).sum().backward()
    assert_close(m.weight.grad,
                 numeric_weight_grad(xv, w, b, kernel, kw, mode, gw),
                 "float32", rtol=1e-3, atol=1e-4)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("mode", MODES)
def test_conv2d_module_matches_torch(mode, rng):
    torch = pytest.importorskip("torch")
    for kernel, kw in CASES:
        m = module(kernel, kw, mode)
        tm = torch.nn.Conv2d(6, 9, kernel, padding_mode=mode, **kw)
        assert repr(m) == repr(tm)
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(m.weight.detach().numpy()))
            tm.bias.copy_(torch.tensor(m.bias.detach().numpy()))
        xv = rng.standard_normal((2, 6, 8, 11)).astype(np.float32)
        x = ampc.tensor(xv, requires_grad=True)
        tx = torch.tensor(xv, requires_grad=True)
        y, ty = m(x), tm(tx)
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        np.testing.assert_allclose(to64(y), ty.detach().double(), rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(to64(x.grad), tx.grad.double(),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(to64(m.weight.grad),
                                   tm.weight.grad.double(), rtol=1e-4,
                                   atol=1e-3)
        assert m(x[0]).shape == tm(tx[0]).shape


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_functional_conv2d_same_with_an_even_kernel_matches_torch(rng):
    torch = pytest.importorskip("torch")
    xv = rng.standard_normal((2, 4, 9, 6)).astype(np.float32)
    wv = rng.standard_normal((6, 2, 2, 4)).astype(np.float32)
    a = [ampc.tensor(v, requires_grad=True) for v in (xv, wv)]
    t = [torch.tensor(v, requires_grad=True) for v in (xv, wv)]
    y = F.conv2d(*a, padding="same", groups=2, dilation=(3, 1))
    ty = torch.nn.functional.conv2d(*t, padding="same", groups=2,
                                    dilation=(3, 1))
    assert tuple(y.shape) == tuple(ty.shape) == (2, 6, 9, 6)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(to64(y), ty.detach().double(), rtol=1e-5,
                               atol=1e-5)
    for p, tp in zip(a, t):
        np.testing.assert_allclose(to64(p.grad), tp.grad.double(),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["reflect", "circular"])
def test_sequential_fold_keeps_the_padding_mode(mode, rng):
    conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode)
    seq = nn.Sequential(conv, nn.ReLU(), nn.MaxPool2d(2))
    x = ampc.tensor(rng.uniform(-1, 1, (2, 3, 8, 7)).astype(np.float32))
    want = F.max_pool2d(F.relu(conv(x)), 2)
    assert ampc.equal(seq(x), want)


def test_padding_mode_and_string_errors():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(3, 4, 3, padding="full")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=(1, 2), padding="same")
    x, w = ampc.randn(1, 3, 6, 6), ampc.randn(4, 3, 3, 3)
    with pytest.raises(RuntimeError, match="strided"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Invalid padding string: 'full'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(RuntimeError, match="3D \\(unbatched\\) or 4D"):
        nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")(
            ampc.randn(6, 6))
    # reflect needs the padding to be smaller than the input, as F.pad
    with pytest.raises(RuntimeError):
        nn.Conv2d(3, 4, 3, padding=2, padding_mode="reflect")(
            ampc.randn(1, 3, 2, 6))
    for cls in (nn.ConvTranspose2d, nn.ConvTranspose1d):
        with pytest.raises(ValueError, match='Only "zeros" padding mode is '
                           f'supported for {cls.__name__}'):
            cls(3, 4, 3, padding_mode="reflect")
