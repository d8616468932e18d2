"""ampc.nn.utils.clip_grad_norm_ / clip_grad_value_ / get_total_norm /
clip_grads_with_norm_: against the float64 oracle on every CPU level, and
against torch.nn.utils where installed (values, dtypes, errors, warnings).
"""
import math
import warnings

import numpy as np
import pytest

import ampc
import reference as ref
from helpers import from_values, to64, torch_or_skip

clip = ampc.nn.utils
FLOATS = ("float32", "float16", "bfloat16")
NORMS = (2.0, 1.0, math.inf, -math.inf, 0.0, 3.0, 0.5)
SHAPES = [(3, 4), (17,), (1,), (5, 2, 3), (70001,)]


def params_with_grads(values, dtypes, layout="contig"):
    ps = []
    for v, d in zip(values, dtypes):
        g = from_values(v, d)
        if layout == "t" and g.ndim == 2:
            g = from_values(np.ascontiguousarray(v.T), d).t()
        p = ampc.nn.Parameter(ampc.zeros(tuple(g.shape),
                                         dtype=getattr(ampc, d)))
        p.grad = g
        ps.append(p)
    return ps


def grad_values(rng, dtypes, scale=1.0):
    return [ref.round_to(rng.uniform(-scale, scale, s), d)
            for s, d in zip(SHAPES, dtypes)]


def expected_clip(values, dtypes, max_norm, p):
    """(total norm, clipped gradients): the multiply in float32, rounded
    to each gradient's dtype, as the kernel does."""
    total = ref.total_norm(values, dtypes, p)
    out = dtypes[0]
    for d in dtypes[1:]:
        out = ref.promote(out, d)
    coef = ref.clip_coef(total, out, max_norm)
    with np.errstate(invalid="ignore"):
        return total, [ref.round_to(ref.round_to(v * coef, "float32"), d)
                       for v, d in zip(values, dtypes)]


def close(got, want, dtype, ulps=4, rtol=0.0):
    """Equal to within a few units in the last place of dtype (the norm is
    summed in another order than NumPy's), or rtol; non-finite values
    equal."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    fin = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])
    tol = max(ulps * ref.EPS[dtype], rtol) * np.abs(want[fin]) + 1e-30
    assert (np.abs(got[fin] - want[fin]) <= tol).all(), \
        np.max(np.abs(got[fin] - want[fin]) - tol)


# ----------------------------------------------------------------------------
# against the oracle, every level


@pytest.mark.parametrize("dtype", FLOATS + ("mixed",))
def test_clip_grad_norm_matches_reference(cpu_level, dtype):
    rng = np.random.default_rng(21)
    dtypes = [FLOATS[i % 3] if dtype == "mixed" else dtype
              for i in range(len(SHAPES))]
    values = grad_values(rng, dtypes, scale=0.01)
    for p in NORMS:
        for max_norm in (0.05, 1e6):
            ps = params_with_grads(values, dtypes)
            total = clip.clip_grad_norm_(ps, max_norm, norm_type=p)
            want_total, want = expected_clip(values, dtypes, max_norm, p)
            assert total.ndim == 0
            assert total.dtype.name == ("float32" if dtype == "mixed"
                                        else dtype)
            # double accumulation: bit-exact to the oracle on these data
            close(total.item(), want_total, total.dtype.name, ulps=0)
            for q, w, d in zip(ps, want, dtypes):
                close(to64(q.grad), w, d, ulps=0)


def test_no_scaling_pass_when_not_clipping(cpu_level):
    rng = np.random.default_rng(22)
    values = grad_values(rng, ["float32"] * len(SHAPES))
    ps = params_with_grads(values, ["float32"] * len(SHAPES))
    versions = [q.grad._version for q in ps]
    clip.clip_grad_norm_(ps, 1e9)
    assert [q.grad._version for q in ps] == versions
    clip.clip_grad_norm_(ps, 1e-3)
    assert all(q.grad._version > v for q, v in zip(ps, versions))


def test_non_contiguous_grads_are_clipped_in_place(cpu_level):
    rng = np.random.default_rng(23)
    v = [ref.round_to(rng.uniform(-1, 1, (9, 7)), "float32")]
    p1 = params_with_grads(v, ["float32"], layout="t")[0]
    assert not p1.grad.is_contiguous()
    base = from_values(np.zeros((9, 14)), "float32")
    base[:, ::2] = ampc.tensor(v[0].astype(np.float32))
    p2 = ampc.nn.Parameter(ampc.zeros(9, 7))
    p2.grad = base[:, ::2]
    total = clip.clip_grad_norm_([p1, p2], 0.5)
    want_total, want = expected_clip(v + v, ["float32"] * 2, 0.5, 2.0)
    close(total.item(), want_total, "float32")
    close(to64(p1.grad), want[0], "float32")
    close(to64(p2.grad), want[1], "float32")
    assert (to64(base)[:, 1::2] == 0).all()


def test_nonfinite_norms():
    ps = params_with_grads([np.array([1.0, np.inf]), np.array([2.0])],
                           ["float32", "float32"])
    total = clip.clip_grad_norm_(ps, 1.0)
    assert total.item() == math.inf
    # coefficient 0: every gradient zeroed (inf * 0 is NaN)
    assert math.isnan(ps[0].grad[1].item()) and ps[0].grad[0].item() == 0
    assert ps[1].grad.item() == 0.0
    ps = params_with_grads([np.array([1.0, np.nan])], ["float32"])
    assert math.isnan(clip.clip_grad_norm_(ps, 1.0).item())
    assert math.isnan(ps[0].grad[0].item())
    for bad in (np.inf, np.nan):
        ps = params_with_grads([np.array([1.0, bad])], ["float32"])
        with pytest.raises(RuntimeError, match="^The total norm of order "
                                               "2.0 for gradients from "
                                               "`parameters` is non-finite, "
                                               "so it cannot be clipped\\. To"
                                               " disable this error"):
            clip.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
        assert ps[0].grad[0].item() == 1.0


def test_edge_cases():
    # no gradients: tensor(0.) and nothing touched
    p = ampc.nn.Parameter(ampc.ones(3))
    total = clip.clip_grad_norm_([p], 1.0)
    assert total.item() == 0.0 and total.dtype is ampc.float32
    # a single tensor, a string norm type, a generator
    p.grad = ampc.tensor([3.0, -4.0, 0.0])
    assert clip.clip_grad_norm_(p, 100.0, "inf").item() == 4.0
    assert clip.clip_grad_norm_((q for q in [p]), 100.0).item() == 5.0
    with pytest.warns(UserWarning, match="^`parameters` is an empty "
                                         "generator, no gradient clipping "
                                         "will occur.$"):
        clip.clip_grad_norm_((q for q in []), 1.0)
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now "
                                           "deprecated"):
        assert clip.clip_grad_norm([p], 100.0).item() == 5.0
    assert clip.get_total_norm([]).item() == 0.0
    assert clip.get_total_norm(ampc.tensor([6.0, 8.0])).item() == 10.0
    clip.clip_grads_with_norm_([p], 1.0, ampc.tensor(5.0))
    close(to64(p.grad), [0.6, -0.8, 0.0], "float32")


def test_clip_grad_value(cpu_level):
    rng = np.random.default_rng(24)
    for d in FLOATS:
        v = ref.round_to(rng.uniform(-3, 3, 1001), d)
        v[5] = np.nan
        v[6] = -np.inf
        p = params_with_grads([v], [d])[0]
        q = ampc.nn.Parameter(ampc.ones(2))      # no grad: skipped
        assert clip.clip_grad_value_([p, q], 1.5) is None
        want = np.clip(v, -1.5, 1.5)
        got = to64(p.grad)
        assert np.array_equal(got, ref.round_to(want, d), equal_nan=True)
        assert q.grad is None


# ----------------------------------------------------------------------------
# against torch


def torch_grads(torch, values, dtypes):
    ps = []
    for v, d in zip(values, dtypes):
        p = torch.nn.Parameter(torch.zeros(v.shape,
                                           dtype=getattr(torch, d)))
        p.grad = torch.tensor(v, dtype=torch.float64).to(getattr(torch, d))
        ps.append(p)
    return ps


@pytest.mark.parametrize("dtype", FLOATS + ("mixed",))
def test_clip_grad_norm_matches_torch(dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(25)
    dtypes = [FLOATS[i % 3] if dtype == "mixed" else dtype
              for i in range(len(SHAPES))]
    values = grad_values(rng, dtypes, scale=0.01)
    for p in NORMS + ("inf",):
        for max_norm in (0.05, 1e6):
            ap = params_with_grads(values, dtypes)
            tp = torch_grads(torch, values, dtypes)
            at = clip.clip_grad_norm_(ap, max_norm, norm_type=p)
            tt = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type=p)
            assert at.dtype.name == str(tt.dtype).split(".")[-1]
            # torch sums float32 norms in float32 (ampc in double, exact to
            # the oracle above): up to ~1e-5 apart for long sums
            close(at.item(), tt.item(), at.dtype.name, rtol=2e-5)
            for a, t, d in zip(ap, tp, dtypes):
                close(to64(a.grad), t.grad.to(torch.float64).numpy(), d,
                      ulps=6, rtol=2e-5)


def test_clip_grad_errors_and_values_match_torch():
    torch = torch_or_skip()
    for bad in (np.inf, np.nan):
        v = [np.array([1.0, bad, 3.0])]
        ap = params_with_grads(v, ["float32"])
        tp = torch_grads(torch, v, ["float32"])
        with pytest.raises(RuntimeError) as ea:
            clip.clip_grad_norm_(ap, 1.0, error_if_nonfinite=True)
        with pytest.raises(RuntimeError) as et:
            torch.nn.utils.clip_grad_norm_(tp, 1.0, error_if_nonfinite=True)
        assert str(ea.value) == str(et.value)
        at = clip.clip_grad_norm_(ap, 1.0)
        tt = torch.nn.utils.clip_grad_norm_(tp, 1.0)
        assert np.array_equal(at.numpy(), tt.numpy(), equal_nan=True)
        assert np.array_equal(to64(ap[0].grad),
                              tp[0].grad.double().numpy(), equal_nan=True)
    rng = np.random.default_rng(26)
    v = [rng.uniform(-2, 2, 50).astype(np.float32)]
    v[0][3] = np.nan
    ap = params_with_grads(v, ["float32"])
    tp = torch_grads(torch, v, ["float32"])
    clip.clip_grad_value_(ap, 0.7)
    torch.nn.utils.clip_grad_value_(tp, 0.7)
    assert np.array_equal(to64(ap[0].grad), tp[0].grad.double().numpy(),
                          equal_nan=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert clip.get_total_norm([ampc.ones(4)], 3.0).item() == \
            pytest.approx(torch.nn.utils.get_total_norm(
                [torch.ones(4)], 3.0).item(), rel=1e-6)
