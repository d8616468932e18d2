"""The normalisation kernels of ampc._C (batch_norm, layer_norm and their
backward passes) on every CPU level and, where a GPU is usable, on CUDA:
against the float64 NumPy oracle (reference.py) on random data of odd
sizes (channels and rows that do not fill a vector, planes narrow and wide,
rows longer than one widened block), for float32, float16, bfloat16 and a
16-bit input with float32 parameters; training and evaluation; the running
statistics over several steps; and against torch where it is installed
(whose CPU kernels round 16-bit intermediates, so those comparisons take
the input dtype's tolerance).
"""
import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import device  # noqa: F401 (a fixture)
from helpers import from_values, rand_values, to64, torch_or_skip

C = ampc._C

# (input dtype, parameter dtype)
COMBOS = [("float32", "float32"), ("float16", "float16"),
          ("bfloat16", "bfloat16"), ("float16", "float32"),
          ("bfloat16", "float32")]
COMBO_IDS = [f"{x}-{p}" for x, p in COMBOS]
# (N, C, *): narrow planes (a tile of channels per item; several tiles,
# the last one partial, for C = 37 and HW = 5), wide ones (a channel per
# item) and a plane longer than one widened block
BN_SHAPES = [(5, 3), (4, 7, 5), (3, 37, 5), (3, 37, 5, 7), (2, 3, 9, 11),
             (2, 2, 65, 70)]
LN_SHAPES = [((5, 7), 1), ((3, 4, 37), 1), ((2, 3, 5, 7), 2),
             ((3, 5000), 1)]


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


def bn_inputs(shape, xdt, pdt, rng):
    c = shape[1]
    x = rand_values(shape, xdt, rng, -2.0, 4.0)
    w = rand_values((c,), pdt, rng, 0.5, 2.0)
    b = rand_values((c,), pdt, rng, -1.0, 1.0)
    rm = rand_values((c,), pdt, rng, -0.5, 0.5)
    rv = rand_values((c,), pdt, rng, 0.5, 2.0)
    return x, w, b, rm, rv


# ----------------------------------------------------------------------------
# batch_norm


@pytest.mark.parametrize("xdt,pdt", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("shape", BN_SHAPES)
def test_batch_norm_training_forward_backward(cpu_level, device, xdt, pdt,
                                              shape, rng):
    x, w, b, rm, rv = bn_inputs(shape, xdt, pdt, rng)
    ts = [put(v, d, device) for v, d in
          ((x, xdt), (w, pdt), (b, pdt), (rm, pdt), (rv, pdt))]
    y, mean, invstd = C.batch_norm(*ts, True, 0.1, 1e-5)
    ey, erm, erv, emean, einv = ref.batch_norm(x, w, b, rm, rv, True, 0.1,
                                                1e-5)
    count = x.size // shape[1]
    assert y.dtype.name == xdt and ts[3].dtype.name == pdt
    close(y, ey, xdt, count, msg="y")
    close(mean, emean, "float32", count, msg="mean")
    close(invstd, einv, "float32", count, msg="invstd")
    close(ts[3], erm, pdt, count, msg="running_mean")
    close(ts[4], erv, pdt, count, msg="running_var")
    if device == "cpu":
        assert C.kernel_variant("batch_norm_fwd") == cpu_level

    g = rand_values(shape, xdt, rng)
    gx, gw, gb = C.batch_norm_backward(put(g, xdt, device), ts[0], ts[1],
                                       mean, invstd, True,
                                       (True, True, True))
    egx, egw, egb = ref.batch_norm_backward(g, x, w, to64(mean.cpu()),
                                            to64(invstd.cpu()), True)
    assert gx.dtype.name == xdt and gw.dtype.name == pdt
    close(gx, egx, xdt, count, scale=4.0, msg="grad_input")
    close(gw, egw, pdt, count, scale=4.0, msg="grad_weight")
    close(gb, egb, pdt, count, scale=4.0, msg="grad_bias")


@pytest.mark.parametrize("xdt,pdt", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("shape", [(6, 7), (3, 37, 5, 7), (2, 3, 9, 11)])
def test_batch_norm_eval_uses_running_stats(cpu_level, device, xdt, pdt,
                                            shape, rng):
    x, w, b, rm, rv = bn_inputs(shape, xdt, pdt, rng)
    ts = [put(v, d, device) for v, d in
          ((x, xdt), (w, pdt), (b, pdt), (rm, pdt), (rv, pdt))]
    y, mean, invstd = C.batch_norm(*ts, False, 0.1, 1e-5)
    ey, _, _, _, einv = ref.batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
    close(y, ey, xdt, msg="y")
    close(ts[3], rm, pdt, msg="running_mean untouched")
    close(invstd, einv, "float32")
    g = rand_values(shape, xdt, rng)
    gx, gw, gb = C.batch_norm_backward(put(g, xdt, device), ts[0], ts[1],
                                       mean, invstd, False,
                                       (True, True, True))
    egx, egw, egb = ref.batch_norm_backward(g, x, w, rm, einv, False)
    count = x.size // shape[1]
    close(gx, egx, xdt, msg="grad_input")
    close(gw, egw, pdt, count, scale=4.0, msg="grad_weight")
    close(gb, egb, pdt, count, scale=4.0, msg="grad_bias")


def test_batch_norm_running_stats_over_steps(cpu_level, device, rng):
    """Five training steps with momentum 0.3, then momentum None (the
    cumulative average of the module) against the oracle."""
    shape = (6, 5, 3, 4)
    rm, rv = np.zeros(5), np.ones(5)
    trm, trv = put(rm, "float32", device), put(rv, "float32", device)
    for _ in range(5):
        x = rand_values(shape, "float32", rng, -3.0, 5.0)
        C.batch_norm(put(x, "float32", device), None, None, trm, trv, True,
                     0.3, 1e-5)
        _, rm, rv, _, _ = ref.batch_norm(x, None, None, rm, rv, True, 0.3,
                                         1e-5)
    close(trm, rm, "float32", 72)
    close(trv, rv, "float32", 72)

    bn = ampc.nn.BatchNorm2d(5, momentum=None).to(device)
    xs = [rand_values(shape, "float32", rng, -3.0, 5.0) for _ in range(4)]
    for x in xs:
        bn(put(x, "float32", device))
    allx = np.stack(xs)
    count = 6 * 3 * 4
    means = allx.mean(axis=(1, 3, 4))
    vars_ = allx.var(axis=(1, 3, 4)) * count / (count - 1)
    assert int(bn.num_batches_tracked.item()) == 4
    close(bn.running_mean, means.mean(axis=0), "float32", count)
    close(bn.running_var, vars_.mean(axis=0), "float32", count)


def test_batch_norm_without_running_stats_or_affine(cpu_level, device, rng):
    x = rand_values((7, 3, 5), "float32", rng)
    y, _, _ = C.batch_norm(put(x, "float32", device), None, None, None, None,
                           True, 0.1, 1e-3)
    close(y, ref.batch_norm(x, None, None, None, None, True, 0.1, 1e-3)[0],
          "float32", 35)


def test_batch_norm_large_mean_small_spread(cpu_level, device):
    """Two-pass statistics: a spread of 1e-3 around 1000 keeps its variance
    (E[x^2] - E[x]^2 in float32 would lose every digit)."""
    rng = np.random.default_rng(3)
    x = ref.round_to(1000.0 + 1e-3 * rng.standard_normal((64, 3, 11)),
                     "float32")
    y, mean, invstd = C.batch_norm(put(x, "float32", device), None, None,
                                   None, None, True, 0.1, 0.0)
    _, _, _, emean, einv = ref.batch_norm(x, None, None, None, None, True,
                                          0.1, 0.0)
    np.testing.assert_allclose(to64(invstd.cpu()), einv, rtol=1e-4)
    np.testing.assert_allclose(to64(mean.cpu()), emean, rtol=1e-7)


def test_strided_input_and_running_stats(cpu_level, device, rng):
    """A transposed input is read through a contiguous copy; running
    statistics that are strided views are updated where they live."""
    x = rand_values((6, 5), "float32", rng)
    tx = put(x.T.copy(), "float32", device).t()
    base_m = put(np.zeros(10), "float32", device)
    base_v = put(np.ones(10), "float32", device)
    rm, rv = base_m[::2], base_v[1::2]
    y, _, _ = C.batch_norm(tx, None, None, rm, rv, True, 0.5, 1e-5)
    ey, erm, erv, _, _ = ref.batch_norm(x, None, None, np.zeros(5),
                                        np.ones(5), True, 0.5, 1e-5)
    close(y, ey, "float32", 6)
    close(base_m[::2], erm, "float32", 6)
    close(base_v[1::2], erv, "float32", 6)
    assert to64(base_m[1::2].cpu()).tolist() == [0.0] * 5
    assert rm._version > 0 and rv._version > 0
    ln, _, _ = C.layer_norm(tx, (5,))
    close(ln, ref.layer_norm(x, 1)[0], "float32", 5)


def test_batch_norm_empty_batch_keeps_running_stats(device):
    rm = put(np.zeros(3), "float32", device)
    rv = put(np.ones(3), "float32", device)
    y, _, _ = C.batch_norm(put(np.zeros((0, 3)), "float32", device), None,
                           None, rm, rv, True, 0.1, 1e-5)
    assert tuple(y.shape) == (0, 3)
    assert rm.cpu().tolist() == [0.0] * 3 and rv.cpu().tolist() == [1.0] * 3


# ----------------------------------------------------------------------------
# layer_norm


@pytest.mark.parametrize("xdt,pdt", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("shape,nd", LN_SHAPES)
def test_layer_norm_forward_backward(cpu_level, device, xdt, pdt, shape, nd,
                                     rng):
    ns = shape[len(shape) - nd:]
    x = rand_values(shape, xdt, rng, -2.0, 4.0)
    w = rand_values(ns, pdt, rng, 0.5, 2.0)
    b = rand_values(ns, pdt, rng, -1.0, 1.0)
    tx, tw, tb = put(x, xdt, device), put(w, pdt, device), put(b, pdt,
                                                                device)
    y, mean, rstd = C.layer_norm(tx, ns, tw, tb, 1e-5)
    ey, emean, erstd = ref.layer_norm(x, nd, w, b, 1e-5)
    d = int(np.prod(ns))
    assert y.dtype.name == xdt
    close(y, ey, xdt, d, msg="y")
    close(mean, emean, "float32", d)
    close(rstd, erstd, "float32", d)
    if device == "cpu":
        assert C.kernel_variant("layer_norm_fwd") == cpu_level

    g = rand_values(shape, xdt, rng)
    gx, gw, gb = C.layer_norm_backward(put(g, xdt, device), tx, ns, tw, mean,
                                       rstd, (True, True, True))
    egx, egw, egb = ref.layer_norm_backward(g, x, nd, w, 1e-5)
    rows = x.size // d
    assert tuple(gw.shape) == tuple(ns) and gw.dtype.name == pdt
    close(gx, egx, xdt, d, scale=4.0, msg="grad_input")
    close(gw, egw, pdt, rows, scale=4.0, msg="grad_weight")
    close(gb, egb, pdt, rows, scale=4.0, msg="grad_bias")


def test_layer_norm_without_affine_and_partial_needs(cpu_level, device, rng):
    x = rand_values((9, 13), "float32", rng)
    tx = put(x, "float32", device)
    y, mean, rstd = C.layer_norm(tx, (13,))
    close(y, ref.layer_norm(x, 1)[0], "float32", 13)
    g = rand_values((9, 13), "float32", rng)
    gx, gw, gb = C.layer_norm_backward(put(g, "float32", device), tx, (13,),
                                       None, mean, rstd, (True, True, True))
    assert gw is None and gb is not None
    egx, _, egb = ref.layer_norm_backward(g, x, 1)
    close(gx, egx, "float32", 13, scale=4.0)
    close(gb, egb, "float32", 9)
    tw = put(np.ones(13), "float32", device)
    gx, gw, gb = C.layer_norm_backward(put(g, "float32", device), tx, (13,),
                                       tw, mean, rstd, (False, True, False))
    assert gx is None and gb is None and tuple(gw.shape) == (13,)


def test_layer_norm_empty(device):
    y, _, _ = C.layer_norm(put(np.zeros((0, 5)), "float32", device), (5,))
    assert tuple(y.shape) == (0, 5)
    x = put(np.zeros((0, 5)), "float32", device)
    m = put(np.zeros(0), "float32", device)
    _, gw, gb = C.layer_norm_backward(x, x, (5,), put(np.ones(5), "float32",
                                                      device), m, m,
                                      (True, True, True))
    assert gw.cpu().tolist() == [0.0] * 5 and gb.cpu().tolist() == [0.0] * 5


# ----------------------------------------------------------------------------
# against torch


@pytest.mark.parametrize("xdt,pdt", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(xdt, pdt, training, rng):
    torch = torch_or_skip()
    import torch.nn.functional as TF
    shape = (4, 7, 5, 3)
    x, w, b, rm, rv = bn_inputs(shape, xdt, pdt, rng)
    g = rand_values(shape, xdt, rng)
    ours = [ampc.tensor(v).to(getattr(ampc, d)) for v, d in
            ((x, xdt), (w, pdt), (b, pdt), (rm, pdt), (rv, pdt))]
    theirs = [torch.tensor(v).to(getattr(torch, d)) for v, d in
              ((x, xdt), (w, pdt), (b, pdt), (rm, pdt), (rv, pdt))]
    for t in ours[:3] + theirs[:3]:
        t.requires_grad_(True)
    y = ampc.nn.functional.batch_norm(ours[0], ours[3], ours[4], ours[1],
                                      ours[2], training, 0.1, 1e-5)
    ty = TF.batch_norm(theirs[0], theirs[3], theirs[4], theirs[1], theirs[2],
                       training, 0.1, 1e-5)
    y.backward(ampc.tensor(g).to(getattr(ampc, xdt)))
    ty.backward(torch.tensor(g).to(getattr(torch, xdt)))
    assert str(y.dtype).split(".")[1] == str(ty.dtype).split(".")[1]
    pairs = [(y, ty, xdt), (ours[3], theirs[3], pdt),
             (ours[4], theirs[4], pdt), (ours[0].grad, theirs[0].grad, xdt),
             (ours[1].grad, theirs[1].grad, pdt),
             (ours[2].grad, theirs[2].grad, pdt)]
    for k, (a, t, dt) in enumerate(pairs):
        close(a, t.detach().double().numpy(), dt, 60, scale=8.0,
              msg=f"output {k}", tol_dtype=xdt)


@pytest.mark.parametrize("xdt,pdt", COMBOS, ids=COMBO_IDS)
def test_layer_norm_matches_torch(xdt, pdt, rng):
    torch = torch_or_skip()
    import torch.nn.functional as TF
    shape, ns = (3, 5, 37), (37,)
    x = rand_values(shape, xdt, rng)
    w = rand_values(ns, pdt, rng, 0.5, 2.0)
    b = rand_values(ns, pdt, rng)
    g = rand_values(shape, xdt, rng)
    ours = [ampc.tensor(v).to(getattr(ampc, d)).requires_grad_(True)
            for v, d in ((x, xdt), (w, pdt), (b, pdt))]
    theirs = [torch.tensor(v).to(getattr(torch, d)).requires_grad_(True)
              for v, d in ((x, xdt), (w, pdt), (b, pdt))]
    y = ampc.nn.functional.layer_norm(ours[0], ns, ours[1], ours[2])
    ty = TF.layer_norm(theirs[0], ns, theirs[1], theirs[2])
    y.backward(ampc.tensor(g).to(getattr(ampc, xdt)))
    ty.backward(torch.tensor(g).to(getattr(torch, xdt)))
    pairs = [(y, ty, xdt)] + [(a.grad, t.grad, d) for a, t, d in
                              zip(ours, theirs, (xdt, pdt, pdt))]
    for k, (a, t, dt) in enumerate(pairs):
        close(a, t.detach().double().numpy(), dt, 37, scale=8.0,
              msg=f"output {k}", tol_dtype=xdt)
