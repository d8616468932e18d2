"""The lab on a GPU: ``Lab`` with device "cuda" trains the SimpleCNN in
FP32, AMP float16 and AMP bfloat16 from the same weights and batches as on
the CPU, reads its losses from the device in batches, reports GPU peak
memory; ``python -m ampc.lab --device cuda`` prints the table.  Marked
``cuda``: these skip without a GPU (test_lab.py covers the CPU and the
GPU-less messages).
"""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ampc
from ampc.lab import Lab, LabConfig, load_data
from ampc.lab.runner import GPU_READ_EVERY
from cuda_helpers import requires_cuda

pytestmark = [pytest.mark.cuda, requires_cuda]

REPO = Path(__file__).resolve().parents[1]


def _run(device, precisions, train_size=96, test_size=64, batch=16,
         epochs=1):
    data = load_data("fake", train_size=train_size, test_size=test_size)
    lab = Lab(LabConfig(epochs=epochs, batch_size=batch,
                        precisions=precisions, device=device),
              data, progress=False)
    return lab.run()


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_lab_run_on_gpu(precision):
    r, = _run("cuda", (precision,))
    assert r.status == "done" and r.device.startswith("cuda")
    assert r.steps == 6 and r.images == 96 and r.test_images == 64
    assert len(r.loss_curve) == 6
    assert all(math.isfinite(v) for v in r.loss_curve)
    assert 0.0 <= r.test_accuracy <= 1.0
    assert math.isfinite(r.test_loss)
    assert r.peak_memory_bytes > 0
    assert r.train_time_s > 0 and r.epochs[0].batches == 6
    if precision == "fp16":
        assert len(r.scale_curve) == 6
        assert r.final_scale == r.scale_curve[-1]
        assert r.skipped_steps is not None
    else:
        assert r.scale_curve == []


def test_more_steps_than_one_read():
    """More steps than GPU_READ_EVERY: every step's loss is read, in
    order, across the batched reads (the last one partial)."""
    steps = GPU_READ_EVERY + 5
    r, = _run("cuda", ("fp16",), train_size=8 * steps, test_size=8,
              batch=8)
    assert r.steps == steps == len(r.loss_curve) == len(r.scale_curve)
    assert all(math.isfinite(v) for v in r.loss_curve)
    assert r.epochs[0].train_loss == pytest.approx(
        sum(r.loss_curve) / steps)


@pytest.mark.parametrize("precision,tol", [("fp32", 2e-4), ("bf16", 3e-2),
                                           ("fp16", 5e-3)])
def test_gpu_losses_follow_the_cpu(precision, tol):
    """Same weights, same batches: the GPU's losses are the CPU's, up to
    accumulation order and the precision's rounding (a few steps, before
    the trajectories can drift apart)."""
    # TF32 convolutions (cuDNN's default, as PyTorch's) would round the
    # float32 run's operands to 10 mantissa bits.
    with ampc.backends.cudnn.flags(allow_tf32=False):
        gpu, = _run("cuda", (precision,), train_size=48, test_size=32)
    cpu, = _run("cpu", (precision,), train_size=48, test_size=32)
    np.testing.assert_allclose(gpu.loss_curve, cpu.loss_curve, rtol=tol,
                               atol=tol)
    assert gpu.test_images == cpu.test_images
    if precision == "fp16":
        assert gpu.scale_curve == cpu.scale_curve


def test_peak_memory_is_the_gpu_s():
    r, = _run("cuda", ("fp32",))
    # At least the model's 2,122,186 float32 parameters and their grads.
    assert r.peak_memory_bytes >= 2 * 2122186 * 4
    assert r.peak_memory_bytes <= ampc.cuda.max_memory_allocated()


def test_cli_on_gpu(tmp_path):
    out = tmp_path / "lab.json"
    run = subprocess.run(
        [sys.executable, "-m", "ampc.lab", "--device", "cuda", "--data",
         "fake", "--epochs", "1", "--train-size", "512", "--test-size",
         "256", "--no-progress", "--json", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "device cuda" in run.stdout
    assert "Peak GPU memory" in run.stdout
    for label in ("FP32", "AMP fp16", "AMP bf16"):
        assert label in run.stdout
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 3
    assert all(r["device"].startswith("cuda") for r in runs)
    assert all(r["status"] == "done" for r in runs)
