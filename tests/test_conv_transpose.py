"""conv_transpose2d / ConvTranspose2d against a float64 NumPy scatter
reference, finite differences and, where installed, torch (values,
gradients, second derivatives, output_size, errors, autocast)."""
import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
from ampc import nn
from cuda_helpers import requires_cuda

try:
    import torch
except ImportError:     # the torch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
RNG = np.random.default_rng(5)


def _ref(x, w, b, stride, padding, output_padding, groups, dilation):
    """Each input pixel scatters its kernel-weighted copy into the output,
    then the padding is cropped (float64)."""
    n, cin, h, wd = x.shape
    _, coutg, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, padding
    (oph, opw), (dh, dw) = output_padding, dilation
    full = np.zeros((n, coutg * groups,
                     (h - 1) * sh + dh * (kh - 1) + 1 + oph,
                     (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    cing = cin // groups
    for ci in range(cin):
        g = ci // cing
        for a in range(kh):
            for c in range(kw):
                contrib = x[:, ci, :, :, None] * w[ci, None, None, None, :,
                                                   a, c]
                full[:, g * coutg:(g + 1) * coutg,
                     a * dh:a * dh + (h - 1) * sh + 1:sh,
                     c * dw:c * dw + (wd - 1) * sw + 1:sw] += \
                    contrib.transpose(0, 3, 1, 2)
    ho = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    wo = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = full[:, :, ph:ph + ho, pw:pw + wo]
    if b is not None:
        out = out + b[None, :, None, None]
    return out


CASES = [
    # (N, Cin, H, W), (Cout/groups, KH, KW), stride, padding, out_pad,
    # groups, dilation
    ((2, 3, 5, 7), (4, 3, 3), (1, 1), (0, 0), (0, 0), 1, (1, 1)),
    ((2, 4, 5, 5), (3, 3, 3), (2, 2), (1, 1), (1, 1), 1, (1, 1)),
    ((1, 6, 4, 3), (2, 2, 3), (2, 1), (0, 1), (1, 0), 2, (1, 1)),
    ((3, 2, 7, 1), (5, 1, 1), (1, 1), (0, 0), (0, 0), 1, (1, 1)),
    ((2, 4, 6, 5), (3, 3, 2), (3, 2), (2, 1), (2, 1), 4, (2, 1)),
    # an output padding past the stride (below the dilation)
    ((2, 3, 5, 4), (2, 3, 3), (1, 1), (0, 1), (1, 1), 1, (2, 2)),
    ((1, 33, 3, 3), (7, 4, 4), (2, 2), (1, 1), (0, 0), 1, (1, 1)),
]


def _make(case, dtype=np.float32):
    xs, (coutg, kh, kw), stride, padding, op, groups, dil = case
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((xs[1], coutg, kh, kw)).astype(dtype)
    b = RNG.standard_normal(coutg * groups).astype(dtype)
    return x, w, b, dict(stride=stride, padding=padding, output_padding=op,
                         groups=groups, dilation=dil)


@pytest.mark.parametrize("case", CASES)
def test_values_against_the_scatter_reference(case):
    x, w, b, kw = _make(case)
    out = F.conv_transpose2d(ampc.tensor(x), ampc.tensor(w), ampc.tensor(b),
                             **kw)
    ref = _ref(x.astype(np.float64), w.astype(np.float64),
               b.astype(np.float64), kw["stride"], kw["padding"],
               kw["output_padding"], kw["groups"], kw["dilation"])
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES[:3] + CASES[5:6])
def test_gradients_against_finite_differences(case):
    x, w, b, kw = _make(case)
    g = RNG.standard_normal(_ref(x, w, b, kw["stride"], kw["padding"],
                                 kw["output_padding"], kw["groups"],
                                 kw["dilation"]).shape)
    xt = ampc.tensor(x, requires_grad=True)
    wt = ampc.tensor(w, requires_grad=True)
    bt = ampc.tensor(b, requires_grad=True)
    F.conv_transpose2d(xt, wt, bt, **kw).backward(
        ampc.tensor(g.astype(np.float32)))

    def loss(x_, w_, b_):
        return float((_ref(x_, w_, b_, kw["stride"], kw["padding"],
                           kw["output_padding"], kw["groups"],
                           kw["dilation"]) * g).sum())

    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    eps = 1e-6
    for arr, grad, which in ((x64, xt.grad, 0), (w64, wt.grad, 1),
                             (b64, bt.grad, 2)):
        for _ in range(4):
            i = tuple(RNG.integers(0, s) for s in arr.shape)
            args = [x64, w64, b64]
            up, dn = arr.copy(), arr.copy()
            up[i] += eps
            dn[i] -= eps
            args[which] = up
            f_up = loss(*args)
            args[which] = dn
            fd = (f_up - loss(*args)) / (2 * eps)
            assert abs(grad.numpy()[i] - fd) <= 1e-3 * max(1, abs(fd)), which


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit(dtype):
    x, w, b, kw = _make(CASES[1])
    dt = getattr(ampc, dtype)
    xt, wt, bt = (ampc.tensor(a).to(dt) for a in (x, w, b))
    out = F.conv_transpose2d(xt, wt, bt, **kw)
    assert out.dtype is dt
    ref = _ref(*(t.float().numpy().astype(np.float64) for t in (xt, wt, bt)),
               kw["stride"], kw["padding"], kw["output_padding"],
               kw["groups"], kw["dilation"])
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(out.float().numpy(), ref, rtol=tol,
                               atol=tol * np.abs(ref).max())


def test_unbatched_and_without_grad_mode():
    x, w, b, kw = _make(CASES[1])
    batched = F.conv_transpose2d(ampc.tensor(x[:1]), ampc.tensor(w),
                                 ampc.tensor(b), **kw)
    with ampc.no_grad():
        single = F.conv_transpose2d(ampc.tensor(x[0]), ampc.tensor(w),
                                    ampc.tensor(b), **kw)
    np.testing.assert_array_equal(single.numpy(), batched.numpy()[0])


def test_autocast_runs_in_the_autocast_dtype():
    m = nn.ConvTranspose2d(4, 3, 3, stride=2)
    x = ampc.randn(2, 4, 5, 5)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        y = m(x)
    assert y.dtype is ampc.bfloat16
    y.float().sum().backward()
    assert m.weight.grad.dtype is ampc.float32
    assert m.bias.grad.dtype is ampc.float32


def test_module_defaults_repr_and_output_size():
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1)
    assert repr(m) == ("ConvTranspose2d(4, 6, kernel_size=(3, 3), "
                       "stride=(2, 2), padding=(1, 1))")
    assert m.weight.shape == (4, 6, 3, 3)
    bound = 1 / np.sqrt(6 * 9)
    assert float(m.weight.abs().max()) <= bound
    assert float(m.bias.abs().max()) <= bound
    x = ampc.ones(2, 4, 5, 5)
    assert m(x).shape == (2, 6, 9, 9)
    assert m(x, output_size=[10, 10]).shape == (2, 6, 10, 10)
    assert m(x, output_size=[2, 6, 9, 10]).shape == (2, 6, 9, 10)
    with pytest.raises(ValueError, match=r"requested an output size of "
                       r"\[12, 12\], but valid sizes range from \[9, 9\] to "
                       r"\[10, 10\]"):
        m(x, output_size=[12, 12])
    g = nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0),
                           output_padding=(1, 0), groups=2, bias=False,
                           dilation=(1, 2))
    assert repr(g) == (
        "ConvTranspose2d(4, 6, kernel_size=(3, 2), stride=(2, 1), "
        "padding=(1, 0), dilation=(1, 2), output_padding=(1, 0), groups=2, "
        "bias=False)")
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect")


def test_errors():
    x, w = ampc.ones(2, 4, 5, 5), ampc.ones(4, 3, 3, 3)
    with pytest.raises(RuntimeError, match="output padding must be smaller "
                       "than either stride or dilation"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(RuntimeError, match=r"expected input\[2, 5, 5, 5\] to "
                       "have 4 channels, but got 5 channels instead"):
        F.conv_transpose2d(ampc.ones(2, 5, 5, 5), w)
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional"
                       " with 3 elements, but got bias of size"):
        F.conv_transpose2d(x, w, ampc.ones(4))
    with pytest.raises(RuntimeError, match="expected weight to be divisible "
                       "by 3 at dimension 0"):
        F.conv_transpose2d(x, w, groups=3)
    with pytest.raises(RuntimeError, match="padding .* is too large"):
        F.conv_transpose2d(x, w, padding=5)
    with pytest.raises(RuntimeError, match="expected bias to have the input's"
                       " dtype"):
        F.conv_transpose2d(x.half(), w.half(), ampc.ones(3))
    with pytest.raises(TypeError, match="must be an int or a pair of ints"):
        F.conv_transpose2d(x, w, padding="same")
    with pytest.raises(RuntimeError, match="Expected 3D .* or 4D"):
        F.conv_transpose2d(ampc.ones(4, 5), w)


@needs_torch
@pytest.mark.parametrize("case", CASES)
def test_matches_torch_with_second_derivatives(case):
    x, w, b, kw = _make(case)
    results = []
    for m in (ampc, torch):
        xt = m.tensor(x, requires_grad=True)
        wt = m.tensor(w, requires_grad=True)
        bt = m.tensor(b, requires_grad=True)
        y = m.nn.functional.conv_transpose2d(xt, wt, bt, **kw)
        gx, gw = m.autograd.grad((y * y).sum(), (xt, wt), create_graph=True)
        gg = m.autograd.grad((gx * gx).sum() + (gw * gw).sum(), (xt, wt, bt))
        results.append([t.detach().numpy() for t in (y, gx, gw) + gg])
    for a, b_ in zip(*results):
        np.testing.assert_allclose(a, b_, rtol=2e-4,
                                   atol=2e-4 * max(1, np.abs(b_).max()))


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_cuda_matches_the_cpu(dtype):
    x, w, b, kw = _make(CASES[1])
    dt = getattr(ampc, dtype)
    outs = []
    for dev in ("cpu", "cuda"):
        xt = ampc.tensor(x, device=dev).to(dt).requires_grad_()
        wt = ampc.tensor(w, device=dev).to(dt).requires_grad_()
        bt = ampc.tensor(b, device=dev).to(dt).requires_grad_()
        y = F.conv_transpose2d(xt, wt, bt, **kw)
        y.float().square().sum().backward()
        outs.append([t.float().detach().cpu().numpy()
                     for t in (y, xt.grad, wt.grad, bt.grad)])
    tol = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}[dtype]
    for a, b_ in zip(*outs):
        np.testing.assert_allclose(a, b_, rtol=tol,
                                   atol=tol * max(1, np.abs(b_).max()))


# ----------------------------------------------------------------------------
# conv_transpose1d


@pytest.mark.parametrize("kw", [
    dict(), dict(stride=2, padding=1, output_padding=1),
    dict(stride=3, dilation=2, groups=2), dict(stride=1, dilation=2,
                                               output_padding=1)])
def test_conv_transpose1d_is_the_2d_one_over_a_unit_height(kw):
    x = RNG.standard_normal((3, 4, 9)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(3 * kw.get("groups", 1)).astype(np.float32)
    xt = ampc.tensor(x, requires_grad=True)
    wt = ampc.tensor(w, requires_grad=True)
    out = F.conv_transpose1d(xt, wt, ampc.tensor(b), **kw)
    pair = {k: (1 if k in ("stride", "dilation") else 0, v)
            for k, v in kw.items() if k != "groups"}
    ref = _ref(x[:, :, None].astype(np.float64),
               w[:, :, None].astype(np.float64), b.astype(np.float64),
               pair.get("stride", (1, 1)), pair.get("padding", (0, 0)),
               pair.get("output_padding", (0, 0)), kw.get("groups", 1),
               pair.get("dilation", (1, 1)))[:, :, 0]
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-5,
                               atol=1e-5)
    out.sum().backward()
    assert xt.grad.shape == x.shape and wt.grad.shape == w.shape
    single = F.conv_transpose1d(ampc.tensor(x[0]), ampc.tensor(w),
                                ampc.tensor(b), **kw)
    np.testing.assert_allclose(single.numpy(), ref[0], rtol=1e-5, atol=1e-5)


def test_conv_transpose1d_module_and_errors():
    m = nn.ConvTranspose1d(8, 4, 4, stride=2)
    assert repr(m) == "ConvTranspose1d(8, 4, kernel_size=(4,), stride=(2,))"
    assert m.weight.shape == (8, 4, 4)
    assert m(ampc.ones(2, 8, 5)).shape == (2, 4, 12)
    assert m(ampc.ones(8, 5), output_size=[13]).shape == (4, 13)
    with pytest.raises(ValueError, match=r"valid sizes range from \[12\] to "
                       r"\[13\]"):
        m(ampc.ones(2, 8, 5), output_size=[20])
    with pytest.raises(RuntimeError, match="Expected 2D .* or 3D"):
        F.conv_transpose1d(ampc.ones(2, 8, 5, 5), m.weight)
    with pytest.raises(RuntimeError, match="expected weight to be 3-D"):
        F.conv_transpose1d(ampc.ones(2, 8, 5), ampc.ones(8, 4, 1, 4))


@needs_torch
def test_conv_transpose1d_matches_torch():
    x = RNG.standard_normal((2, 6, 11)).astype(np.float32)
    w = RNG.standard_normal((6, 2, 5)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    kw = dict(stride=2, padding=2, output_padding=1, groups=2, dilation=1)
    outs = []
    for m in (ampc, torch):
        xt, wt, bt = (m.tensor(a, requires_grad=True) for a in (x, w, b))
        y = m.nn.functional.conv_transpose1d(xt, wt, bt, **kw)
        (y * y).sum().backward()
        outs.append([t.detach().numpy() for t in (y, xt.grad, wt.grad,
                                                  bt.grad)])
    for a, b_ in zip(*outs):
        np.testing.assert_allclose(a, b_, rtol=1e-4, atol=1e-4)


def test_conv2d_input_grad_checks_its_arguments():
    g, w = ampc.ones(2, 3, 4, 4), ampc.ones(3, 2, 3, 3)
    assert ampc._C.conv2d_input_grad(g, w, (2, 2, 6, 6), (1, 1), (0, 0),
                                     (1, 1)).shape == (2, 2, 6, 6)
    with pytest.raises(TypeError, match="input_size must be 4 non-negative "
                       "ints"):
        ampc._C.conv2d_input_grad(g, w, (2, 2, 6), (1, 1), (0, 0), (1, 1))
    with pytest.raises(TypeError, match="input_size must be 4"):
        ampc._C.conv2d_input_grad(g, w, (2, 2, -6, 6), (1, 1), (0, 0),
                                  (1, 1))
    with pytest.raises(RuntimeError, match=r"expected grad_out to have shape "
                       r"\[2, 3, 5, 5\]"):
        ampc._C.conv2d_input_grad(g, w, (2, 2, 7, 7), (1, 1), (0, 0), (1, 1))
    with pytest.raises(RuntimeError, match="dtype"):
        ampc._C.conv2d_input_grad(g.half(), w, (2, 2, 6, 6), (1, 1), (0, 0),
                                  (1, 1))
