"""ampc.amp.layer_report: per-layer forward/backward timings that add up,
FLOP counts of convolutions and linear layers, the tensor-core notes, and
that the model is left as it was."""
import math

import pytest

import ampc
from ampc import nn
from ampc.amp import layer_report
from ampc.amp.perf import _alignment_notes
from cuda_helpers import requires_cuda


def small_cnn():
    ampc.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10))


def test_rows_flops_and_shares():
    model = small_cnn()
    x = ampc.randn(6, 3, 8, 8)
    report = layer_report(model, x, dtype=None, steps=2)
    assert [(r.name, r.kind) for r in report.rows] == [
        ("0", "Conv2d"), ("1", "ReLU"), ("2", "MaxPool2d"), ("3", "Flatten"),
        ("4", "Linear")]
    conv, lin = report.rows[0], report.rows[4]
    assert conv.out_shape == (6, 8, 8, 8) and conv.dtype == "float32"
    # forward + weight grad = 2 GEMMs of 2 * (C_in * kh * kw) per output
    # (the input needs no gradient); the linear layer's input grad is a 3rd
    assert conv.gflop == pytest.approx(2 * 2 * 27 * 6 * 8 * 8 * 8 / 1e9)
    assert lin.gflop == pytest.approx(3 * 2 * 128 * 6 * 10 / 1e9)
    assert report.rows[1].gflop == 0 and report.rows[1].gflops == 0
    assert all(r.forward_ms > 0 and r.backward_ms > 0 for r in report.rows)
    assert report.loss_ms > 0
    assert report.total_ms == pytest.approx(
        sum(r.total_ms for r in report.rows) + report.loss_ms)
    assert conv.gflops == pytest.approx(conv.gflop / conv.total_ms * 1e3)
    text = str(report)
    assert text.startswith("layer_report: cpu, autocast float32, ")
    assert "GEMM layers (conv, linear): " in text
    assert report.notes == []


def test_autocast_dtype_and_cpu_note():
    report = layer_report(small_cnn(), ampc.randn(2, 3, 8, 8), steps=1)
    assert report.dtype is ampc.bfloat16            # CPU autocast default
    assert report.rows[0].dtype == "bfloat16"
    assert "does not make these layers faster" in report.notes[0]


def test_model_is_left_as_it_was():
    model = small_cnn()
    x = ampc.randn(2, 3, 8, 8)
    model(x).sum().backward()
    grads = [p.grad for p in model.parameters()]
    values = [p.grad.tolist() for p in model.parameters()]
    calls = []
    layer_report(model, x, loss_fn=lambda out: calls.append(
        all(p.grad is None for p in model.parameters())) or
        out.float().pow(2).mean(), steps=2)
    assert calls == [True] * 3      # warm-up + 2 steps, each on fresh grads
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))
    assert [p.grad.tolist() for p in model.parameters()] == values
    assert not any(m._has_hooks() for m in model.modules())


def test_input_gradient_gemm_counts_when_the_input_needs_grad():
    model = small_cnn()
    x = ampc.randn(6, 3, 8, 8, requires_grad=True)
    conv = layer_report(model, x, dtype=None, steps=1).rows[0]
    assert conv.gflop == pytest.approx(3 * 2 * 27 * 6 * 8 * 8 * 8 / 1e9)


class PoolWithIndices(nn.Module):
    """A leaf whose output is a (values, indices) tuple inside a model
    whose output is a tuple too."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2, return_indices=True)

    def forward(self, x):
        y, idx = self.pool(self.conv(x))
        return y, idx


def test_tuple_outputs_and_bad_steps():
    report = layer_report(PoolWithIndices(), ampc.randn(2, 3, 8, 8),
                          dtype=None, steps=1)
    assert [(r.name, r.out_shape, r.dtype) for r in report.rows] == [
        ("conv", (2, 4, 8, 8), "float32"), ("pool", (2, 4, 4, 4), "float32")]
    assert report.rows[1].backward_ms > 0
    with pytest.raises(ValueError, match="no floating tensor .* loss_fn"):
        layer_report(nn.Flatten(), ampc.tensor([[1, 2]]), steps=1)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="steps must be a positive int"):
            layer_report(small_cnn(), ampc.randn(2, 3, 8, 8), steps=bad)


def test_tensor_core_notes():
    conv1 = nn.Conv2d(3, 32, 3)
    fc2 = nn.Linear(512, 10)
    x = (ampc.randn(256, 512),)
    assert _alignment_notes(conv1, (), ampc.float16, "cpu") == []
    notes = _alignment_notes(conv1, (), ampc.float16, "cuda")
    assert notes == ["C_in=3 is not a multiple of 8: float16 tensor cores "
                     "need padding (to 8) or fall back to slower kernels"]
    notes = _alignment_notes(fc2, x, ampc.bfloat16, "cuda")
    assert len(notes) == 1 and notes[0].startswith("out_features=10 ")
    assert "(to 16)" in notes[0]
    odd_batch = _alignment_notes(fc2, (ampc.randn(3, 5, 512),),
                                 ampc.float16, "cuda")
    assert odd_batch[0].startswith("batch rows=15 ")
    assert _alignment_notes(fc2, x, None, "cuda") == [
        "float32 math: no 16-bit tensor cores (run it under autocast)"]
    assert _alignment_notes(nn.ReLU(), x, ampc.float16, "cuda") == []


@pytest.mark.cuda
@requires_cuda
def test_on_the_gpu():
    model = small_cnn().cuda()
    report = layer_report(model, ampc.randn(8, 3, 8, 8, device="cuda"),
                          steps=2)
    assert report.device_type == "cuda" and report.dtype is ampc.float16
    assert report.rows[0].dtype == "float16"
    assert any("C_in=3" in n for n in report.rows[0].notes)
    assert all(math.isfinite(r.total_ms) for r in report.rows)
