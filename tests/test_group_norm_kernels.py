"""The group norm kernels of ampc._C (group_norm and group_norm_backward)
on every CPU level and, where a GPU is usable, on CUDA: against the float64
NumPy oracle (reference.py) on random data of odd sizes (planes and groups
that do not fill a vector, one channel per group, a group longer than one
widened block, a plane longer than one block), for float32, float16,
bfloat16 and a 16-bit input with float32 parameters; partial gradients,
no affine, empty inputs, thread-count independence; gradients by finite
differences; and against torch where it is installed.
"""
import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import device  # noqa: F401 (a fixture)
from helpers import from_values, gradcheck, rand_values, to64, torch_or_skip

C = ampc._C

# (input dtype, parameter dtype)
COMBOS = [("float32", "float32"), ("float16", "float16"),
          ("bfloat16", "bfloat16"), ("float16", "float32"),
          ("bfloat16", "float32")]
COMBO_IDS = [f"{x}-{p}" for x, p in COMBOS]
# (shape (N, C, *), groups): odd planes (7 x 5, 33), one channel per group
# with HW = 1, a group of 2 x 2145 values (longer than one widened block of
# 4096, its planes shorter), a plane of 4100 (longer than a block) and one
# group of every channel
GN_SHAPES = [((3, 6, 7, 5), 3), ((5, 6), 6), ((2, 12, 33), 4),
             ((2, 4, 33, 65), 2), ((1, 2, 4100), 1), ((4, 6, 9), 1)]


def put(values, dtype, dev):
    return from_values(values, dtype).to(dev)


def close(actual, expected, dtype, k=1, scale=1.0, msg="", tol_dtype=None):
    """actual (a tensor) near the float64 expected values: a few ulps of
    dtype (or tol_dtype; sums of k terms in float32) relative to the
    values, and absolutely to `scale` times the largest magnitude (the
    backward's results cancel)."""
    got = to64(actual.cpu())
    expected = np.asarray(expected, dtype=np.float64).reshape(got.shape)
    r, _ = ref.tolerance(tol_dtype or dtype, k)
    atol = r * scale * max(1.0, np.abs(expected).max(initial=0.0))
    np.testing.assert_allclose(got, ref.round_to(expected, dtype), rtol=r,
                               atol=atol, err_msg=msg)


def gn_inputs(shape, xdt, pdt, rng):
    c = shape[1]
    return (rand_values(shape, xdt, rng, -2.0, 4.0),
            rand_values((c,), pdt, rng, 0.5, 2.0),
            rand_values((c,), pdt, rng, -1.0, 1.0),
            rand_values(shape, xdt, rng))


# ----------------------------------------------------------------------------
# against the float64 oracle


@pytest.mark.parametrize("xdt,pdt", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("shape,groups", GN_SHAPES)
def test_group_norm_forward_backward(cpu_level, device, xdt, pdt, shape,
                                     groups, rng):
    x, w, b, g = gn_inputs(shape, xdt, pdt, rng)
    tx, tw, tb = put(x, xdt, device), put(w, pdt, device), put(b, pdt,
                                                                device)
    y, mean, rstd = C.group_norm(tx, groups, tw, tb, 1e-5)
    ey, emean, erstd = ref.group_norm(x, groups, w, b, 1e-5)
    d = x.size // (shape[0] * groups)
    assert y.dtype.name == xdt and tuple(y.shape) == shape
    assert tuple(mean.shape) == (shape[0], groups)
    assert mean.dtype.name == "float32" and rstd.dtype.name == "float32"
    close(y, ey, xdt, d, scale=2.0, msg="y")
    close(mean, emean, "float32", d, msg="mean")
    close(rstd, erstd, "float32", d, msg="rstd")
    if device == "cpu":
        assert C.kernel_variant("group_norm_fwd") == cpu_level

    gx, gw, gb = C.group_norm_backward(put(g, xdt, device), tx, groups, tw,
                                       mean, rstd, (True, True, True))
    egx, egw, egb = ref.group_norm_backward(g, x, groups, w, 1e-5)
    per_channel = x.size // shape[1]
    assert gw.dtype.name == pdt and tuple(gb.shape) == (shape[1],)
    close(gx, egx, xdt, d, scale=4.0, msg="grad_input")
    close(gw, egw, pdt, per_channel, scale=4.0, msg="grad_weight")
    close(gb, egb, pdt, per_channel, scale=4.0, msg="grad_bias")
    if device == "cpu":
        assert C.kernel_variant("group_norm_bwd") == cpu_level


def test_group_norm_without_affine_and_partial_needs(cpu_level, device, rng):
    shape = (3, 6, 7, 5)
    x, w, _, g = gn_inputs(shape, "float32", "float32", rng)
    tx, tg = put(x, "float32", device), put(g, "float32", device)
    y, mean, rstd = C.group_norm(tx, 3)
    close(y, ref.group_norm(x, 3)[0], "float32", 70)
    egx, egw, egb = ref.group_norm_backward(g, x, 3)
    gx, gw, gb = C.group_norm_backward(tg, tx, 3, None, mean, rstd,
                                       (True, True, True))
    assert gw is None
    close(gx, egx, "float32", 70, scale=4.0)
    close(gb, egb, "float32", 105, scale=4.0)
    # each gradient alone: the kernel skips the others' work
    tw = put(w, "float32", device)
    _, mean, rstd = C.group_norm(tx, 3, tw)
    egx, egw, egb = ref.group_norm_backward(g, x, 3, w)
    for k, want in enumerate((egx, egw, egb)):
        needs = tuple(j == k for j in range(3))
        got = C.group_norm_backward(tg, tx, 3, tw, mean, rstd, needs)
        assert [t is None for t in got] == [not n for n in needs]
        close(got[k], want, "float32", 105, scale=4.0)


def test_group_norm_large_mean_small_spread(cpu_level, device, rng):
    """Two-pass statistics: a mean of 1000 with a spread of 1e-2 keeps its
    variance (one pass of sum(x^2) - n mean^2 would lose it in float32)."""
    x = ref.round_to(1000.0 + rng.uniform(-1e-2, 1e-2, (2, 4, 9, 7)),
                     "float32")
    y, mean, rstd = C.group_norm(put(x, "float32", device), 2, eps=0.0)
    ey, emean, erstd = ref.group_norm(x, 2, eps=0.0)
    close(mean, emean, "float32", 126)
    close(rstd, erstd, "float32", 126 * 1e3)
    np.testing.assert_allclose(to64(y.cpu()), ey, atol=2e-2)


def test_group_norm_empty(device):
    """No samples: empty outputs and zero parameter gradients; empty
    planes: the statistics of an empty group (mean 0, rstd 1/sqrt(eps))."""
    w = put(np.ones(4), "float32", device)
    x = put(np.zeros((0, 4, 3)), "float32", device)
    y, mean, rstd = C.group_norm(x, 2, w, w)
    assert tuple(y.shape) == (0, 4, 3) and tuple(mean.shape) == (0, 2)
    gx, gw, gb = C.group_norm_backward(x, x, 2, w, mean, rstd,
                                       (True, True, True))
    assert tuple(gx.shape) == (0, 4, 3)
    assert gw.cpu().tolist() == [0.0] * 4 and gb.cpu().tolist() == [0.0] * 4
    x = put(np.zeros((2, 4, 0)), "float32", device)
    y, mean, rstd = C.group_norm(x, 2, w, w, 0.25)
    assert tuple(y.shape) == (2, 4, 0)
    assert mean.cpu().tolist() == [[0.0, 0.0]] * 2
    assert rstd.cpu().tolist() == [[2.0, 2.0]] * 2
    _, gw, gb = C.group_norm_backward(x, x, 2, w, mean, rstd,
                                      (True, True, True))
    assert gw.cpu().tolist() == [0.0] * 4 and gb.cpu().tolist() == [0.0] * 4


def test_group_norm_results_do_not_depend_on_threads(rng):
    shape = (16, 8, 13, 11)
    x, w, b, g = gn_inputs(shape, "bfloat16", "float32", rng)
    tx, tw, tb = put(x, "bfloat16", "cpu"), put(w, "float32", "cpu"), \
        put(b, "float32", "cpu")
    tg = put(g, "bfloat16", "cpu")
    prev = ampc.get_num_threads()
    outs = []
    try:
        for threads in (1, 3):
            ampc.set_num_threads(threads)
            y, mean, rstd = C.group_norm(tx, 4, tw, tb)
            outs.append([to64(t) for t in (y, mean, rstd) + tuple(
                C.group_norm_backward(tg, tx, 4, tw, mean, rstd,
                                      (True, True, True)))])
    finally:
        ampc.set_num_threads(prev)
    for a, b in zip(*outs):
        assert np.array_equal(a, b)


def test_group_norm_gradients_match_differences(rng):
    """N = 3, C = 6 in 3 groups, HW = 7 x 5: F.group_norm's gradients (the
    kernel's backward) against central differences of the oracle."""
    gradcheck(lambda x, w, b: F.group_norm(x, 3, w, b),
              lambda x, w, b: ref.group_norm(x, 3, w, b)[0],
              [(3, 6, 7, 5), (6,), (6,)], rng=rng, rtol=2e-3, atol=2e-4)


def test_group_norm_kernel_errors():
    x = ampc.randn(2, 6, 5)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        C.group_norm(x, 4)
    with pytest.raises(RuntimeError, match="num_groups to be positive"):
        C.group_norm(x, 0)
    with pytest.raises(RuntimeError, match="2 or more dimensions"):
        C.group_norm(ampc.randn(6), 3)
    with pytest.raises(RuntimeError, match="weight should contain 6"):
        C.group_norm(x, 3, ampc.ones(5))
    with pytest.raises(RuntimeError, match="bias to have dtype float32"):
        C.group_norm(x, 3, ampc.ones(6), ampc.ones(6).half())
    with pytest.raises(RuntimeError, match="group_norm.*input"):
        C.group_norm(ampc.ones(2, 6, dtype=ampc.int64), 3)
    y, mean, rstd = C.group_norm(x, 3)
    with pytest.raises(RuntimeError, match="mean should contain 6"):
        C.group_norm_backward(y, x, 3, None, rstd.view(-1)[:5], rstd,
                              (True, False, False))
    with pytest.raises(RuntimeError, match="rstd to have dtype float32"):
        C.group_norm_backward(y, x, 3, None, mean, rstd.half(),
                              (True, False, False))
    with pytest.raises(RuntimeError, match="grad_output"):
        C.group_norm_backward(y.half(), x, 3, None, mean, rstd,
                              (True, False, False))


# ----------------------------------------------------------------------------
# against torch


@pytest.mark.parametrize("xdt,pdt", COMBOS, ids=COMBO_IDS)
def test_group_norm_matches_torch(xdt, pdt, rng):
    torch = torch_or_skip()
    import torch.nn.functional as TF
    shape, groups = (3, 6, 7, 5), 3
    x, w, b, g = gn_inputs(shape, xdt, pdt, rng)
    ours = [ampc.tensor(v).to(getattr(ampc, d)).requires_grad_(True)
            for v, d in ((x, xdt), (w, pdt), (b, pdt))]
    theirs = [torch.tensor(v).to(getattr(torch, d)).requires_grad_(True)
              for v, d in ((x, xdt), (w, pdt), (b, pdt))]
    y = F.group_norm(ours[0], groups, ours[1], ours[2])
    ty = TF.group_norm(theirs[0], groups, theirs[1], theirs[2])
    y.backward(ampc.tensor(g).to(getattr(ampc, xdt)))
    ty.backward(torch.tensor(g).to(getattr(torch, xdt)))
    pairs = [(y, ty, xdt)] + [(a.grad, t.grad, d) for a, t, d in
                              zip(ours, theirs, (xdt, pdt, pdt))]
    for k, (a, t, dt) in enumerate(pairs):
        close(a, t.detach().double().numpy(), dt, 105, scale=8.0,
              msg=f"output {k}", tol_dtype=xdt)
