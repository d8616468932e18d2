"""conv2d with groups (PyTorch's semantics): weight (OC, C/groups, KH, KW),
output channels [g*OC/G, (g+1)*OC/G) reading input channels [g*C/G,
(g+1)*C/G).  The raw ops on every CPU level and float dtype against the
float64 oracle (reference.py), gradients also by finite differences, the
autograd and module layers (unbatched input, padding forms, the
Conv2d+ReLU+MaxPool2d fold, autocast, initialisation), the errors, torch
where installed, and the GPU against the CPU (tests marked ``cuda``).
"""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import (assert_close_to_cpu, assert_same, make_pair,
                          requires_cuda, torch_cuda)
from helpers import (FLOAT_NAMES, assert_close, from_values, numeric_grad,
                     rand_values, to64, to_torch, torch_or_skip)

C = ampc._C

# (N, C, H, W, OC, KH, KW, groups, stride, padding, dilation); sizes odd
# so that no row fills a vector
CASES = [
    (2, 6, 7, 9, 4, 3, 3, 2, (1, 1), (1, 1), (1, 1)),
    (3, 9, 11, 6, 6, 3, 2, 3, (2, 1), (0, 1), (1, 2)),
    (2, 5, 9, 10, 5, 3, 3, 5, (1, 1), (1, 1), (1, 1)),       # depthwise
    (1, 7, 13, 11, 14, 3, 3, 7, (2, 2), (2, 1), (2, 1)),     # depthwise x2
    (3, 4, 10, 12, 8, 5, 3, 4, (1, 2), (2, 1), (1, 1)),      # depthwise x2
    (4, 6, 5, 7, 9, 1, 1, 3, (1, 1), (0, 0), (1, 1)),        # pointwise
    # big enough for both threads: split by (image, group), one image's
    # groups across threads (depthwise), and an image across threads in
    # the weight gradient's per-thread sums (groups 2 of 3 images)
    (1, 32, 47, 45, 64, 3, 3, 32, (1, 1), (1, 1), (1, 1)),
    (3, 16, 23, 21, 16, 3, 3, 2, (1, 1), (1, 1), (1, 1)),
]
IDS = ["g2", "g3", "dw", "dw_x2", "dw_x2_5x3", "pointwise", "dw_big",
       "g2_big"]


def close(out, expected, dtype, k, msg=""):
    """out against float64 expected rounded to dtype: the dtype's k-term
    float32-accumulation tolerance, relative to each value and to the
    largest one."""
    r, _ = ref.tolerance(dtype, k)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    assert_close(out, expected, dtype, rtol=r, atol=r * scale, msg=msg)


def case_values(rng, dtype, case, bias=True):
    """(float64 values exact in dtype, ampc tensors) of x, w [, b]."""
    n, c, h, w, oc, kh, kw, g = case[:8]
    shapes = [(n, c, h, w), (oc, c // g, kh, kw)] + ([(oc,)] if bias else [])
    vals = [rand_values(s, dtype, rng, -2.0, 2.0) for s in shapes]
    return vals, [from_values(v, dtype) for v in vals]


def geometry(case):
    return case[7], case[8], case[9], case[10]


# ----------------------------------------------------------------------------
# the raw ops against the oracle, every CPU level and dtype


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_forward(cpu_level, dtype, rng):
    for i, case in enumerate(CASES):
        g, st, pad, dil = geometry(case)
        bias, relu = i % 2 == 0, i % 3 == 0
        vals, ts = case_values(rng, dtype, case, bias)
        out = C.conv2d(*ts, stride=st, padding=pad, dilation=dil, relu=relu,
                       groups=g)
        want = ref.conv2d(*vals, stride=st, padding=pad, dilation=dil,
                          relu=relu, groups=g)
        assert tuple(out.shape) == want.shape and out.dtype.name == dtype
        close(out, want, dtype, case[1] // g * case[5] * case[6] + 1,
              f"{IDS[i]}: ")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_backward(cpu_level, dtype, rng):
    for i, case in enumerate(CASES):
        n, oc, kh, kw = case[0], case[4], case[5], case[6]
        g, st, pad, dil = geometry(case)
        (x, w), (tx, tw) = case_values(rng, dtype, case, bias=False)
        oh, ow = ref.conv2d(x, w, stride=st, padding=pad, dilation=dil,
                            groups=g).shape[2:]
        go = rand_values((n, oc, oh, ow), dtype, rng, -2.0, 2.0)
        gx, gw, gb = C.conv2d_backward(from_values(go, dtype), tx, tw, st,
                                       pad, dil, (True, True, True), g)
        ex, ew, eb = ref.conv2d_backward(go, x, w, st, pad, dil, groups=g)
        assert tuple(gw.shape) == w.shape
        close(gx, ex, dtype, oc // g * kh * kw, f"grad_x {IDS[i]}: ")
        close(gw, ew, dtype, n * oh * ow, f"grad_w {IDS[i]}: ")
        close(gb, eb, dtype, n * oh * ow, f"grad_b {IDS[i]}: ")


def test_backward_needs_each_gradient_alone(rng):
    case = CASES[3]
    g, st, pad, dil = geometry(case)
    (x, w), (tx, tw) = case_values(rng, "float32", case, bias=False)
    go = rng.uniform(-1, 1, C.conv2d(tx, tw, None, st, pad, dil, False,
                                     g).shape)
    tgo = from_values(ref.round_to(go, "float32"), "float32")
    want = ref.conv2d_backward(ref.round_to(go, "float32"), x, w, st, pad,
                               dil, groups=g)
    for needs in [(True, False, False), (False, True, False),
                  (False, False, True)]:
        got = C.conv2d_backward(tgo, tx, tw, st, pad, dil, needs, g)
        assert [t is not None for t in got] == list(needs)
        for t, e in zip(got, want):
            if t is not None:
                close(t, e, "float32", 200)


@pytest.mark.parametrize("case", [CASES[1], CASES[3]], ids=["g3", "dw_x2"])
def test_gradients_by_finite_differences(case, rng):
    """Autograd through F.conv2d (input, weight and bias) against central
    differences of the float64 forward."""
    g, st, pad, dil = geometry(case)
    n, c, h, w, oc, kh, kw = case[:7]
    n, h, w = 1, min(h, 7), min(w, 6)
    vals = [ref.round_to(rng.uniform(-1, 1, s), "float32")
            for s in [(n, c, h, w), (oc, c // g, kh, kw), (oc,)]]

    def fwd(x, w, b):
        return ref.conv2d(x, w, b, st, pad, dil, groups=g)

    leaves = [ampc.tensor(v.astype(np.float32), requires_grad=True)
              for v in vals]
    out = F.conv2d(*leaves, stride=st, padding=pad, dilation=dil, groups=g)
    go = ref.round_to(rng.uniform(0.5, 1.5, tuple(out.shape)), "float32")
    (out * ampc.tensor(go.astype(np.float32))).sum().backward()
    for leaf, e in zip(leaves, numeric_grad(fwd, vals, go)):
        assert_close(leaf.grad, e, "float32", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_depthwise_gives_the_same_bits_on_every_level(dtype, rng):
    """The direct depthwise loops round each product and sum on its own in
    a fixed order, so every CPU level gives the same bits (the GEMM path's
    microkernels do not promise that)."""
    prev = C.cpu_capability()
    results = []
    try:
        for level in ampc.backends.cpu.levels():
            C._set_cpu_level(level)
            per_case = []
            for i in (2, 3, 4, 6):
                case = CASES[i]
                g, st, pad, dil = geometry(case)
                vals, ts = case_values(np.random.default_rng(i), dtype, case)
                y = C.conv2d(*ts, st, pad, dil, True, g)
                go = from_values(rand_values(tuple(y.shape), dtype,
                                             np.random.default_rng(i)),
                                 dtype)
                grads = C.conv2d_backward(go, ts[0], ts[1], st, pad, dil,
                                          (True, True, True), g)
                per_case += [to64(t) for t in (y,) + tuple(grads)]
            results.append(per_case)
    finally:
        C._set_cpu_level(prev)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b, equal_nan=True)


def test_groups_one_is_the_plain_convolution(rng):
    """groups=1 (the default, or given) is today's kernel, bit for bit."""
    (x, w, b), ts = case_values(rng, "float32", (2, 5, 8, 9, 7, 3, 3, 1))
    plain = to64(C.conv2d(*ts, 1, 1, 1))
    assert np.array_equal(to64(C.conv2d(*ts, 1, 1, 1, False, 1)), plain)
    assert np.array_equal(to64(F.conv2d(*ts, padding=1, groups=1)), plain)


# ----------------------------------------------------------------------------
# autograd, modules, the fold, autocast


@pytest.mark.parametrize("padding", [0, 1, (2, 1), "same", "valid"])
def test_unbatched_input_and_padding_forms(padding, rng):
    x = rng.uniform(-1, 1, (6, 9, 7))
    w = rng.uniform(-1, 1, (12, 2, 3, 3))
    b = rng.uniform(-1, 1, 12)
    tx, tw, tb = (ampc.tensor(v.astype(np.float32), requires_grad=True)
                  for v in (x, w, b))
    out = F.conv2d(tx, tw, tb, padding=padding, groups=3)
    pad = {"same": (1, 1), "valid": (0, 0)}.get(padding, padding)
    pad = (pad, pad) if isinstance(pad, int) else pad
    want = ref.conv2d(ref.round_to(x[None], "float32"),
                      ref.round_to(w, "float32"), ref.round_to(b, "float32"),
                      padding=pad, groups=3)[0]
    assert out.ndim == 3
    close(out, want, "float32", 19)
    out.sum().backward()
    ex, ew, eb = ref.conv2d_backward(np.ones((1,) + want.shape),
                                     ref.round_to(x[None], "float32"),
                                     ref.round_to(w, "float32"),
                                     padding=pad, groups=3)
    close(tx.grad, ex[0], "float32", 40)
    close(tw.grad, ew, "float32", 200)
    close(tb.grad, eb, "float32", 200)


def test_module_shape_init_and_repr():
    ampc.manual_seed(3)
    m = nn.Conv2d(12, 18, (3, 5), padding=1, groups=6)
    assert tuple(m.weight.shape) == (18, 2, 3, 5)
    assert m.groups == 6
    # PyTorch's default: U(+-1/sqrt(fan_in)), fan_in = in/groups * kh * kw
    bound = 1 / math.sqrt(2 * 3 * 5)
    for p in (m.weight, m.bias):
        v = to64(p)
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.8 * bound
    assert repr(m) == ("Conv2d(12, 18, kernel_size=(3, 5), stride=(1, 1), "
                       "padding=(1, 1), groups=6)")
    x = ampc.randn(2, 12, 6, 7)
    assert np.array_equal(to64(m(x)), to64(F.conv2d(
        x, m.weight, m.bias, padding=1, groups=6)))
    dw = nn.Conv2d(8, 8, 3, groups=8, bias=False)
    assert tuple(dw.weight.shape) == (8, 1, 3, 3)
    assert "groups=8, bias=False" in repr(dw)


@pytest.mark.parametrize("groups", [2, 8])
def test_sequential_fold_with_groups(groups, rng):
    """Conv2d(groups) + ReLU + MaxPool2d in a Sequential runs as the fused
    node with the same bits as the three layers one after the other,
    forward and backward."""
    ampc.manual_seed(1)
    conv = nn.Conv2d(8, 16, 3, padding=1, groups=groups)
    net = nn.Sequential(conv, nn.ReLU(), nn.MaxPool2d(2))
    xv = rng.uniform(-1, 1, (3, 8, 9, 10)).astype(np.float32)
    x1 = ampc.tensor(xv, requires_grad=True)
    y1 = net(x1)
    assert type(y1.grad_fn)._function.__name__ == "_Conv2dReluMaxPool"
    y1.sum().backward()
    g1 = [to64(t.grad) for t in (x1, conv.weight, conv.bias)]
    conv.zero_grad()
    x2 = ampc.tensor(xv, requires_grad=True)
    y2 = F.max_pool2d(F.relu(conv(x2)), 2)
    y2.sum().backward()
    g2 = [to64(t.grad) for t in (x2, conv.weight, conv.bias)]
    assert np.array_equal(to64(y1), to64(y2))
    for a, b in zip(g1, g2):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_autocast(dtype, rng):
    """Under autocast the grouped conv runs in the low dtype (float32
    sums, one rounding); the float32 parameters get float32 gradients."""
    ampc.manual_seed(2)
    m = nn.Conv2d(6, 12, 3, padding=1, groups=6)
    x = ampc.tensor(rng.uniform(-1, 1, (2, 6, 7, 9)).astype(np.float32))
    low = getattr(ampc, dtype)
    with ampc.autocast("cpu", dtype=low):
        y = m(x)
    assert y.dtype is low
    y.float().sum().backward()
    assert m.weight.grad.dtype is ampc.float32
    assert m.bias.grad.dtype is ampc.float32
    xl, wl, bl = (ref.round_to(to64(t), dtype) for t in (x, m.weight,
                                                         m.bias))
    close(y, ref.conv2d(xl, wl, bl, padding=(1, 1), groups=6), dtype, 10)
    _, ew, eb = ref.conv2d_backward(np.ones(tuple(y.shape)), xl, wl,
                                    padding=(1, 1), groups=6)
    # the gradients were computed in the low dtype, then widened
    close(m.weight.grad, ew, dtype, 126)
    close(m.bias.grad, eb, dtype, 126)


def test_layer_report_counts_a_group_s_channels():
    """layer_report's FLOPs and tensor-core notes use C/groups."""
    from ampc.amp.perf import _alignment_notes, _gemm_gflop
    m = nn.Conv2d(12, 24, 3, groups=4)
    out = ampc.zeros(1, 24, 5, 5)
    assert _gemm_gflop(m, out, True) == pytest.approx(
        3 * 2 * 3 * 9 * 600 / 1e9)
    notes = _alignment_notes(m, (), ampc.float16, "cuda")
    assert notes[0].startswith("C_in/groups=3 is not a multiple of 8")
    assert notes[1].startswith("C_out/groups=6 is not a multiple of 8")


# ----------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("groups", [0, -2])
def test_error_groups_not_positive(groups):
    x, w = ampc.ones(1, 4, 5, 5), ampc.ones(4, 1, 3, 3)
    with pytest.raises(RuntimeError, match=r"conv2d\(\): argument 'groups' "
                       "expected a positive int, but got "):
        F.conv2d(x, w, groups=groups)
    with pytest.raises(RuntimeError, match=r"conv2d\(\): expected groups "
                       "to be a positive int, got "):
        C.conv2d(x, w, groups=groups)
    with pytest.raises(ValueError, match=r"Conv2d\(\): expected groups to "
                       "be a positive int, got "):
        nn.Conv2d(4, 4, 3, groups=groups)


@pytest.mark.parametrize("groups", [1.5, 2.0, True, "2", None])
def test_error_groups_not_an_int(groups):
    x, w = ampc.ones(1, 4, 5, 5), ampc.ones(4, 2, 3, 3)
    with pytest.raises(TypeError, match=r"conv2d\(\): argument 'groups' "
                       "expected a positive int, but got") as e:
        F.conv2d(x, w, groups=groups)
    assert "pair" not in str(e.value)
    with pytest.raises(TypeError, match=r"conv2d\(\): expected groups to "
                       "be a positive int"):
        C.conv2d(x, w, groups=groups)
    with pytest.raises(ValueError, match=r"Conv2d\(\): expected groups to "
                       "be a positive int"):
        nn.Conv2d(4, 4, 3, groups=groups)


def test_error_channels_not_divisible():
    with pytest.raises(RuntimeError, match=r"conv2d\(\): expected input's "
                       r"channels to be divisible by groups=2, got 5 "
                       "channels"):
        F.conv2d(ampc.ones(1, 5, 5, 5), ampc.ones(4, 2, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match=r"conv2d\(\): expected weight's "
                       r"output channels \(dim 0\) to be divisible by "
                       r"groups=2, got weight of shape \[3, 2, 3, 3\]"):
        F.conv2d(ampc.ones(1, 4, 5, 5), ampc.ones(3, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match=r"in_channels must be divisible "
                       "by groups, got in_channels=5, groups=2"):
        nn.Conv2d(5, 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"out_channels must be divisible "
                       "by groups, got out_channels=4, groups=3"):
        nn.Conv2d(6, 4, 3, groups=3)


def test_error_weight_channels_per_group():
    msg = (r"conv2d\(\): expected weight to have 2 input channels per "
           r"group \(dim 1: the input's 4 channels / groups=2\), got weight "
           r"of shape \[4, 4, 3, 3\]")
    with pytest.raises(RuntimeError, match=msg):
        F.conv2d(ampc.ones(1, 4, 5, 5), ampc.ones(4, 4, 3, 3), groups=2)
    x, w = ampc.ones(1, 4, 5, 5), ampc.ones(4, 4, 3, 3)
    with pytest.raises(RuntimeError, match=r"conv2d_backward\(\): expected "
                       "weight to have 2 input channels per group"):
        C.conv2d_backward(ampc.ones(1, 4, 3, 3), x, w, 1, 0, 1,
                          (True, True, True), 2)
    # groups=1 keeps its message
    with pytest.raises(RuntimeError, match=r"expected input to have 2 "
                       "channels"):
        F.conv2d(x, ampc.ones(4, 2, 3, 3))


# ----------------------------------------------------------------------------
# torch, where installed


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_matches_torch(dtype, rng):
    torch = torch_or_skip()
    for i, case in enumerate(CASES):
        n, oc, kh, kw = case[0], case[4], case[5], case[6]
        g, st, pad, dil = geometry(case)
        _, ts = case_values(rng, dtype, case)
        leaves = [t.float().requires_grad_() for t in ts]
        tleaves = [to_torch(torch, t).float().requires_grad_() for t in ts]
        low = getattr(ampc, dtype)
        out = F.conv2d(*(t.to(low) for t in leaves), stride=st,
                       padding=pad, dilation=dil, groups=g)
        tout = torch.nn.functional.conv2d(
            *(t.to(getattr(torch, dtype)) for t in tleaves), stride=st,
            padding=pad, dilation=dil, groups=g)
        want = tout.detach().double().numpy()
        close(out, want, dtype, 2 * case[1] // g * kh * kw, f"{IDS[i]}: ")
        go = rand_values(want.shape, dtype, rng)
        out.backward(from_values(go, dtype))
        tout.backward(to_torch(torch, from_values(go, dtype)))
        oh, ow = want.shape[2:]
        for name, a, t, k in zip(("x", "w", "b"), leaves, tleaves,
                                 (oc // g * kh * kw, n * oh * ow,
                                  n * oh * ow)):
            close(a.grad, t.grad.double().numpy(), dtype, 2 * k,
                  f"grad_{name} {IDS[i]}: ")


def test_module_matches_torch_module(rng):
    """nn.Conv2d(groups) with torch's weights gives torch's output and
    gradients; its initialisation's fan_in is torch's."""
    torch = torch_or_skip()
    m = nn.Conv2d(6, 9, 3, stride=2, padding=1, groups=3)
    tm = torch.nn.Conv2d(6, 9, 3, stride=2, padding=1, groups=3)
    assert tuple(tm.weight.shape) == tuple(m.weight.shape)
    assert nn.init._calculate_fan_in_and_fan_out(m.weight) == \
        torch.nn.init._calculate_fan_in_and_fan_out(tm.weight) == (18, 81)
    for a, t in ((m.weight, tm.weight), (m.bias, tm.bias)):
        with torch.no_grad():
            t.copy_(to_torch(torch, a.detach()))
    xv = rng.uniform(-1, 1, (2, 6, 11, 9)).astype(np.float32)
    y, ty = m(ampc.tensor(xv)), tm(torch.from_numpy(xv))
    close(y, ty.detach().double().numpy(), "float32", 20)
    y.sum().backward()
    ty.sum().backward()
    close(m.weight.grad, tm.weight.grad.double().numpy(), "float32", 200)
    close(m.bias.grad, tm.bias.grad.double().numpy(), "float32", 200)
    assert repr(m) == repr(tm)


# ----------------------------------------------------------------------------
# CUDA: the GPU against the CPU (cuDNN, and the im2col fallback), and
# against torch on the GPU


def gpu(fn):
    return pytest.mark.cuda(requires_cuda(fn))


def conv_fn(case, relu=False):
    g, st, pad, dil = geometry(case)

    def fn(x, w, b=None):
        return F._conv2d(x, w, b, st, pad, dil, relu, g)
    return fn


@pytest.fixture
def exact_fp32():
    saved = C._linalg_cuda_flags()
    C._set_linalg_cuda_flags(matmul_allow_tf32=False, cudnn_allow_tf32=False)
    yield
    C._set_linalg_cuda_flags(**saved)


# cuDNN may pick a Winograd algorithm for float32 (see test_cuda_linalg)
WINOGRAD_K = 16


def gpu_k(case):
    n, c, h, w, oc, kh, kw, g = case[:8]
    return c // g * kh * kw * WINOGRAD_K, n * h * w * WINOGRAD_K


@gpu
@pytest.mark.parametrize("cudnn", [True, False], ids=["cudnn", "im2col"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cuda_matches_cpu(exact_fp32, cudnn, dtype, rng):
    with ampc.backends.cudnn.flags(enabled=cudnn):
        for i, case in enumerate(CASES):
            n, c, h, w, oc, kh, kw, g = case[:8]
            arrays = [rng.uniform(-1, 1, (n, c, h, w)),
                      rng.uniform(-1, 1, (oc, c // g, kh, kw))]
            if i % 2 == 0:
                arrays.append(rng.uniform(-1, 1, oc))
            k, gk = gpu_k(case)
            assert_close_to_cpu(conv_fn(case, relu=i % 3 == 0), *arrays,
                                dtype=dtype, grad=True, k=k, grad_k=gk)


@gpu
def test_cuda_algorithm_cache_keys_groups(exact_fp32, rng):
    """Two convolutions alike in every size but groups choose their
    algorithms apart (the weights differ only in dim 1)."""
    if not ampc.backends.cudnn.is_available():
        pytest.skip("built without cuDNN: no algorithm cache")
    x = make_pair(rng.uniform(-1, 1, (2, 8, 9, 9)))[1]
    ampc.backends.cudnn.clear_algorithm_cache()
    for g in (1, 2, 8):
        w = make_pair(rng.uniform(-1, 1, (8, 8 // g, 3, 3)))[1]
        C.conv2d(x, w, None, 1, 1, 1, False, g)
    assert ampc.backends.cudnn.algorithm_cache_info().entries == 3


@gpu
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cuda_matches_torch_cuda(exact_fp32, dtype, rng):
    """Forward and every gradient against torch's cuDNN convolution (TF32
    off on both sides)."""
    torch = torch_cuda()
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        for case in CASES:
            g, st, pad, dil = geometry(case)
            (x, w, b), _ = case_values(rng, dtype, case)
            ours = [make_pair(v, dtype, requires_grad=True)[1]
                    for v in (x, w, b)]
            theirs = [torch.from_numpy(v).to("cuda", getattr(torch, dtype))
                      .requires_grad_() for v in (x, w, b)]
            y = F.conv2d(*ours, stride=st, padding=pad, dilation=dil,
                         groups=g)
            ty = torch.nn.functional.conv2d(*theirs, stride=st, padding=pad,
                                            dilation=dil, groups=g)
            k, gk = gpu_k(case)
            pairs = [(y, ty, k)]
            go = rand_values(tuple(y.shape), dtype, rng)
            y.backward(make_pair(go, dtype)[1])
            ty.backward(torch.from_numpy(go).to("cuda", ty.dtype))
            pairs += [(o.grad, t.grad, gk) for o, t in zip(ours, theirs)]
            for got, want, kk in pairs:
                r, _ = ref.tolerance(dtype, 2 * kk)
                want = want.detach().double().cpu().numpy()
                scale = max(1.0, float(np.abs(want).max()))
                assert np.allclose(to64(got.detach().cpu()), want, rtol=r,
                                   atol=r * scale)
    finally:
        torch.backends.cudnn.allow_tf32 = saved


@gpu
def test_cuda_empty_batch_grouped(rng):
    xc, xg = make_pair(np.zeros((0, 6, 5, 5)))
    wc, wg = make_pair(rng.uniform(-1, 1, (4, 3, 3, 3)))
    y = C.conv2d(xg, wg, None, 1, 0, 1, False, 2)
    assert tuple(y.shape) == (0, 4, 3, 3)
    gx, gw, gb = C.conv2d_backward(y, xg, wg, 1, 0, 1, (True, True, True),
                                   2)
    assert tuple(gw.shape) == (4, 3, 3, 3)
    assert not to64(gw.cpu()).any() and not to64(gb.cpu()).any()
    assert_same(gw, C.conv2d_backward(y.cpu(), xc, wc, 1, 0, 1,
                                      (True, True, True), 2)[1])
