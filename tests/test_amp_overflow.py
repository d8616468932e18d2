"""ampc.amp.detect_overflow: the first layer whose output (forward) or
output gradient (backward) held inf/NaN, the explanation it gives, abort,
bounds, and that watching changes no result."""
import math

import numpy as np
import pytest

import ampc
from ampc import nn
from ampc.amp import OverflowRecord, detect_overflow
from cuda_helpers import requires_cuda
from helpers import to64


def mlp(scale_layer=None, scale=1.0):
    ampc.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8),
                          nn.ReLU(), nn.Linear(8, 2))
    if scale_layer is not None:
        with ampc.no_grad():
            model[scale_layer].weight.mul_(scale)
    return model


def test_float16_forward_overflow_is_located_and_explained():
    model = mlp(2, 3000.0)
    x = ampc.randn(5, 4) * 100
    with detect_overflow(model) as report:
        with ampc.autocast("cpu", dtype=ampc.float16):
            model(x)
    first = report.first_nonfinite("forward")
    assert (first.module, first.kind, first.dtype) == ("2", "Linear",
                                                       "float16")
    assert first.inf > 0 and math.isfinite(first.input_absmax)
    assert [r.module for r in report.context("forward")] == ["0", "1"]
    text = str(report)
    assert "first non-finite output at '2' (Linear): its float16 output " \
        "overflowed (the largest float16 value is 65504)" in text
    assert "policy='fp32'" in text and "or use bfloat16" in text
    assert "backward: every checked value was finite" in text


def test_bfloat16_overflow_advice_does_not_suggest_bfloat16():
    model = mlp(2, 1e37)
    x = ampc.randn(5, 4) * 100
    with detect_overflow(model) as report:
        with ampc.autocast("cpu", dtype=ampc.bfloat16):
            model(x)
    first = report.first_nonfinite("forward")
    assert (first.module, first.dtype) == ("2", "bfloat16") and first.inf
    text = str(report)
    assert "its bfloat16 output overflowed" in text
    assert "policy='fp32'" in text and "use bfloat16" not in text


def test_input_already_non_finite():
    model = mlp()
    x = ampc.ones(2, 4)
    x[1, 2] = math.nan
    with detect_overflow(model) as report:
        model(x)
    first = report.first_nonfinite()
    assert first.module == "0" and first.nan > 0
    assert "its input was already non-finite" in str(report)


class LogLayer(nn.Module):
    def forward(self, x):
        return x.log()


def test_a_layer_making_nan_from_finite_inputs():
    model = nn.Sequential(nn.Identity(), LogLayer())
    with detect_overflow(model) as report:
        model(ampc.tensor([1.0, -1.0, 0.0]))
    first = report.first_nonfinite()
    assert (first.module, first.kind, first.inf, first.nan) == \
        ("1", "LogLayer", 1, 1)
    assert "the layer itself produced it from finite inputs" in str(report)


def test_backward_overflow_is_located():
    """The scaled loss's gradient overflows float16 in the backward of the
    3000x layer: the gradient of its input (the ReLU's output) is the first
    non-finite one, and GradScaler skips the step."""
    model = mlp(2, 3000.0)
    opt = ampc.optim.SGD(model.parameters(), lr=0.1)
    scaler = ampc.amp.GradScaler("cpu", init_scale=2.0 ** 4)
    x = ampc.randn(5, 4)
    with detect_overflow(model) as report:
        with ampc.autocast("cpu", dtype=ampc.float16):
            loss = model(x).float().sum() * 1e3
        scaler.scale(loss).backward()
    assert report.first_nonfinite("forward") is None
    first = report.first_nonfinite("backward")
    assert (first.module, first.kind) == ("1", "ReLU")
    assert report.context("backward")[-1].module == "2"
    assert "the last gradient checked before, finite, was that of '2' " \
        "(Linear)'s output" in str(report)
    scaler.step(opt)
    assert scaler.stats()["skipped_steps"] == 1


def test_abort_raises_at_the_first_non_finite_check():
    model = mlp(2, 3000.0)
    with pytest.raises(FloatingPointError,
                       match=r"detect_overflow: forward: first non-finite "
                             r"output at '2' \(Linear\)"):
        with detect_overflow(model, abort=True):
            with ampc.autocast("cpu", dtype=ampc.float16):
                model(ampc.randn(5, 4) * 100)


def test_hooks_go_at_exit_and_results_are_unchanged(rng):
    model = mlp()
    x = ampc.tensor(rng.uniform(-1, 1, (3, 4)).astype(np.float32))
    plain = model(x)
    plain.sum().backward()
    g_plain = to64(model[0].weight.grad)
    model.zero_grad()
    with detect_overflow(model) as report:
        watched = model(x)
    watched.sum().backward()        # after exit: not checked
    assert np.array_equal(to64(plain), to64(watched))
    assert np.array_equal(g_plain, to64(model[0].weight.grad))
    assert {r.phase for r in report.records} == {"forward"}
    n = len(report.records)
    model(x)
    assert len(report.records) == n
    assert not any(m._has_hooks() for m in model.modules())


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=[pytest.mark.cuda, requires_cuda])])
def test_backward_inside_the_context_keeps_saved_outputs_valid(device):
    """The checks write nothing: a ReLU saves its output for backward, and
    backward inside the context must not find it modified."""
    model = mlp().to(device)
    x = ampc.randn(6, 4).to(device)
    plain = model(x)
    plain.sum().backward()
    g_plain = to64(model[0].weight.grad.cpu())
    model.zero_grad()
    with detect_overflow(model) as report:
        model(x).sum().backward()
    np.testing.assert_array_equal(to64(model[0].weight.grad.cpu()), g_plain)
    assert report.first_nonfinite("backward") is None
    assert sum(r.phase == "backward" for r in report.records) == 6


def test_context_stays_within_one_pass():
    """The checks shown before the first non-finite one come from its own
    pass: not from the forward before it, nor from a backward between."""
    model = mlp()
    x = ampc.randn(5, 4)
    with detect_overflow(model, context=10) as report:
        model(x)                            # a clean forward, no backward
        model(x).sum().backward()           # and one with its backward
        x[0, 0] = math.inf                  # the next forward's first layer
        model(x)
    first = report.first_nonfinite("forward")
    assert first.module == "0"
    assert report.context("forward") == []
    assert len(report.records) == 3 * 6 + 6


def test_keep_bounds_records_and_clear():
    model = mlp()
    with detect_overflow(model, keep=4) as report:
        for _ in range(3):
            model(ampc.ones(1, 4))
    assert len(report.records) == 4
    report.clear()
    assert len(report.records) == 0 and report.first_nonfinite() is None
    with pytest.raises(ValueError, match="phase must be 'forward' or "
                       "'backward', got 'sideways'"):
        report.first_nonfinite("sideways")


class TwoHeads(nn.Module):
    def forward(self, x):
        return x * 2, x.argmax(dim=1)


def test_tuple_outputs_and_outputs_without_floats():
    model = nn.Sequential(TwoHeads())
    model2 = nn.Module()
    with detect_overflow(model) as report:
        model[0](ampc.tensor([[1.0, math.inf]]))
    first = report.first_nonfinite()
    assert first.module == "0" and first.inf == 1
    with detect_overflow(model2) as report2:
        pass
    assert len(report2.records) == 0


def test_record_text_and_headroom():
    rec = OverflowRecord("forward", "fc", "Linear", "float16", 32752.0, 0, 0,
                         1.5)
    assert rec.finite and rec.headroom_used == pytest.approx(0.5)
    assert str(rec) == ("forward  fc (Linear) output float16: absmax 3.275e+04"
                        " (50.0% of max); input absmax 1.5")


def test_a_scale_too_large_overflows_at_the_models_output():
    model = mlp()
    scaler = ampc.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    with detect_overflow(model) as report:
        with ampc.autocast("cpu", dtype=ampc.float16):
            out = model(ampc.randn(3, 4))
        scaler.scale(out.sum()).backward()
    first = report.first_nonfinite("backward")
    assert first.module == "4" and report.context("backward") == []
    assert "it arrived so from the loss, outside the model: with a " \
        "GradScaler, the scaled loss's gradient overflows float16" in \
        str(report)
