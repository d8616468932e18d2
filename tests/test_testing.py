"""ampc.testing: assert_close (tolerances, report, inputs, containers, and
the same pass/fail decisions as torch.testing.assert_close), and the
inf/NaN planting and counting helpers."""
import math

import numpy as np
import pytest

import ampc
from ampc.testing import (assert_all_finite, assert_close, count_nonfinite,
                          default_tolerances, plant_nonfinite)
from helpers import torch_or_skip


def test_default_tolerances():
    assert default_tolerances(ampc.float32) == (1.3e-6, 1e-5)
    assert default_tolerances(ampc.float16) == (1e-3, 1e-5)
    assert default_tolerances(ampc.bfloat16) == (1.6e-2, 1e-5)
    assert default_tolerances(np.float64) == (1e-7, 1e-7)
    assert default_tolerances(ampc.int64) == (0.0, 0.0)
    assert default_tolerances(ampc.bool) == (0.0, 0.0)
    assert default_tolerances("float16") == (1e-3, 1e-5)


@pytest.mark.parametrize("name,rtol", [("float32", 1.3e-6),
                                       ("float16", 1e-3),
                                       ("bfloat16", 1.6e-2)])
def test_dtype_aware_defaults(name, rtol):
    dt = getattr(ampc, name)
    x = ampc.tensor([100.0, -3.0, 0.0]).to(dt)
    assert_close(x, x.clone())
    # a relative step well inside the tolerance passes, well outside fails
    base = [256.0, 512.0]
    inside = ampc.tensor([v * (1 + rtol / 4) for v in base]).to(dt)
    outside = ampc.tensor([v * (1 + rtol * 8) for v in base]).to(dt)
    ref = ampc.tensor(base).to(dt)
    assert_close(inside, ref)
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        assert_close(outside, ref)


def test_report_names_count_worst_and_indices():
    actual = ampc.tensor([[1.0, 2.0, 3.0], [4.0, 5.5, 6.0]])
    expected = ampc.tensor([[1.0, 2.0, 3.25], [4.0, 5.0, 6.0]])
    with pytest.raises(AssertionError) as e:
        assert_close(actual, expected)
    msg = str(e.value)
    assert msg.startswith("Tensor-likes are not close!")
    assert "Mismatched elements: 2 / 6 (33.3%)" in msg
    assert "Greatest absolute difference: 0.5 at index (1, 1) (up to 1e-05 "\
           "allowed)" in msg
    assert "Greatest relative difference: 0.1 at index (1, 1) (up to "\
           "1.3e-06 allowed)" in msg
    assert "Worst mismatches (2 of 2):" in msg
    lines = msg.splitlines()
    i = lines.index("Worst mismatches (2 of 2):")
    assert lines[i + 1].startswith("  index (1, 1): actual 5.5, expected 5.0")
    assert lines[i + 2].startswith("  index (0, 2): actual 3.0, expected "
                                   "3.25")


def test_integers_and_bools_are_exact():
    a = ampc.tensor([1, 2, 3])
    assert_close(a, ampc.tensor([1, 2, 3]))
    with pytest.raises(AssertionError, match="Tensor-likes are not equal!"):
        assert_close(a, ampc.tensor([1, 2, 4]))
    with pytest.raises(AssertionError, match="not equal"):
        assert_close(ampc.tensor([True, False]), ampc.tensor([True, True]))
    assert_close(3, 3)
    with pytest.raises(AssertionError, match="Scalars are not equal!"):
        assert_close(3, 4)


def test_nan_and_inf():
    a = ampc.tensor([1.0, math.nan, math.inf])
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3"):
        assert_close(a, a.clone())
    assert_close(a, a.clone(), equal_nan=True)
    with pytest.raises(AssertionError):
        assert_close(ampc.tensor([math.inf]), ampc.tensor([-math.inf]))
    with pytest.raises(AssertionError):
        assert_close(ampc.tensor([1e30]), ampc.tensor([math.inf]))
    with pytest.raises(AssertionError):
        assert_close(ampc.tensor([math.inf]), ampc.tensor([3.0]),
                     rtol=1.0, atol=1.0)


def test_inputs_numpy_numbers_and_mixes():
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
    assert_close(ampc.tensor([1.0, 2.0]),
                 np.array([1.0, 2.0], dtype=np.float32))
    assert_close(ampc.tensor(2.0), 2.0)
    assert_close(1.0, 1.0 + 1e-9)
    with pytest.raises(AssertionError, match="Scalars are not close"):
        assert_close(1.0, 1.1)
    with pytest.raises(TypeError, match="must be an ampc tensor, a NumPy "
                                        "array, a number"):
        assert_close("a", "a")


def test_shape_and_dtype_checks():
    with pytest.raises(AssertionError, match="The values for attribute "
                                             "'shape' do not match: "
                                             "\\(2,\\) != \\(3,\\)"):
        assert_close(ampc.zeros(2), ampc.zeros(3))
    with pytest.raises(AssertionError, match="The values for attribute "
                                             "'dtype' do not match: "
                                             "float32 != float16"):
        assert_close(ampc.zeros(2), ampc.zeros(2).half())
    assert_close(ampc.zeros(2), ampc.zeros(2).half(), check_dtype=False)
    # the looser tolerance of the two sides applies
    assert_close(ampc.tensor([1.0005]), ampc.tensor([1.0]).half(),
                 check_dtype=False)


def test_explicit_tolerances_and_msg():
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be "
                                         "either specified or omitted, but "
                                         "got no atol."):
        assert_close(1.0, 1.0, rtol=0.1)
    assert_close(ampc.tensor([1.0]), ampc.tensor([1.5]), rtol=0.0, atol=0.5)
    with pytest.raises(AssertionError, match="^custom$"):
        assert_close(ampc.tensor([1.0]), ampc.tensor([2.0]), msg="custom")
    with pytest.raises(AssertionError, match="^wrapped: Tensor-likes"):
        assert_close(ampc.tensor([1.0]), ampc.tensor([2.0]),
                     msg=lambda m: "wrapped: " + m)


def test_containers():
    assert_close([ampc.ones(2), (1.0, {"a": ampc.zeros(1)})],
                 [ampc.ones(2), (1.0, {"a": ampc.zeros(1)})])
    with pytest.raises(AssertionError, match="\\[1\\]\\[1\\]\\['a'\\]"):
        assert_close([ampc.ones(2), (1.0, {"a": ampc.zeros(1)})],
                     [ampc.ones(2), (1.0, {"a": ampc.ones(1)})])
    with pytest.raises(AssertionError, match="lengths do not match"):
        assert_close([1.0], [1.0, 2.0])
    with pytest.raises(AssertionError, match="keys do not match"):
        assert_close({"a": 1.0}, {"b": 1.0})


def test_same_decisions_as_torch_testing():
    torch = torch_or_skip()
    rng = np.random.default_rng(31)
    for name in ("float32", "float16", "bfloat16"):
        rtol, atol = default_tolerances(name)
        for trial in range(60):
            base = rng.uniform(-4, 4, 7)
            base[rng.random(7) < 0.2] = 0.0
            # steps around the tolerance boundary, both sides
            step = (atol + rtol * np.abs(base)) * rng.uniform(0.2, 3.0, 7)
            other = base + step * rng.choice([-1, 1], 7)
            ta = torch.tensor(other).to(getattr(torch, name))
            tb = torch.tensor(base).to(getattr(torch, name))
            aa = ampc.tensor(ta.double().numpy()).to(getattr(ampc, name))
            ab = ampc.tensor(tb.double().numpy()).to(getattr(ampc, name))
            try:
                torch.testing.assert_close(ta, tb)
                torch_ok = True
            except AssertionError:
                torch_ok = False
            try:
                assert_close(aa, ab)
                ampc_ok = True
            except AssertionError:
                ampc_ok = False
            assert ampc_ok == torch_ok, (name, trial)
    assert_close(torch.ones(3), ampc.ones(3))


# ----------------------------------------------------------------------------
# planting and counting


def test_plant_nonfinite_in_a_parameter_grad():
    w = ampc.nn.Parameter(ampc.zeros(2, 3))
    with pytest.raises(ValueError, match="has no .grad yet"):
        plant_nonfinite(w)
    w.grad = ampc.zeros(2, 3)
    assert plant_nonfinite(w) == 0
    assert plant_nonfinite(w, (1, -1), value=math.nan) == 5
    assert plant_nonfinite(w, -2, value=-math.inf) == 4
    g = w.grad.flatten().tolist()
    assert g[0] == math.inf and g[4] == -math.inf and math.isnan(g[5])
    assert w.flatten().tolist() == [0.0] * 6
    assert count_nonfinite([w]) == {"inf": 2, "nan": 1}
    with pytest.raises(AssertionError, match="found 2 inf and 1 NaN"):
        assert_all_finite([w])
    with pytest.raises(IndexError, match="out of range"):
        plant_nonfinite(w, 6)
    with pytest.raises(IndexError, match="has 1 entries"):
        plant_nonfinite(w, (0,))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_plant_nonfinite_dtypes_and_plain_tensors(dtype):
    t = ampc.ones(5, dtype=getattr(ampc, dtype))
    plant_nonfinite(t, 3, value=math.nan)
    assert math.isnan(t[3].item())
    assert count_nonfinite(t) == {"inf": 0, "nan": 1}
    assert_all_finite([ampc.ones(2, dtype=getattr(ampc, dtype))])


def test_planted_inf_makes_the_scaler_skip_and_names_the_parameter():
    model = ampc.nn.Sequential(ampc.nn.Linear(4, 3), ampc.nn.Linear(3, 2))
    opt = ampc.optim.SGD(model.parameters(), lr=0.1)
    scaler = ampc.amp.GradScaler("cpu", init_scale=256.0)
    scaler.watch(model)
    before = [p.detach().clone() for p in model.parameters()]
    scaler.scale(model(ampc.randn(5, 4)).sum()).backward()
    plant_nonfinite(model[1].weight, (0, 2))
    assert scaler.step(opt) is None
    scaler.update()
    assert scaler.get_scale() == 128.0
    assert scaler.stats()["overflow"] == {"1.weight": {"inf": 1, "nan": 0}}
    for b, p in zip(before, model.parameters()):
        assert_close(p.detach(), b, rtol=0.0, atol=0.0)
