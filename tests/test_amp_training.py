"""The lab's AMP training loop (amp_optimized.py of the seed) on the CPU:
float16 autocast with GradScaler("cpu"), and bfloat16 autocast, follow the
float32 run's loss from the same initial weights and batches."""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.optim as optim
from ampc.lab.model import SimpleCNN
from ampc.vision.datasets import FakeCIFAR10

STEPS = 20
BATCH = 32
LR = 0.05          # the lab uses 0.01; a larger step shows learning sooner


def _batches():
    data = FakeCIFAR10(train=True, size=STEPS * BATCH, seed=1)
    x = (data.data.astype(np.float32) / 255.0 - 0.5) / 0.5
    x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    y = np.asarray(data.targets, dtype=np.int64)
    return [(ampc.tensor(x[i:i + BATCH]), ampc.tensor(y[i:i + BATCH]))
            for i in range(0, STEPS * BATCH, BATCH)]


def _train(precision, batches):
    """The seed's loop: zero_grad, autocast forward, scaled backward,
    scaler.step, scaler.update; returns the losses and the scaler."""
    ampc.manual_seed(0)
    model = SimpleCNN()
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    dtype = {"fp16": ampc.float16, "bf16": ampc.bfloat16}.get(precision)
    scaler = ampc.amp.GradScaler("cpu", enabled=precision == "fp16")
    losses = []
    for inputs, labels in batches:
        optimizer.zero_grad()
        with ampc.autocast("cpu", dtype=dtype or ampc.bfloat16,
                           enabled=dtype is not None):
            outputs = model(inputs)
            loss = criterion(outputs, labels)
        assert loss.dtype is ampc.float32
        if dtype is not None:
            assert outputs.dtype is dtype
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype is ampc.float32 for p in model.parameters())
    return np.array(losses), scaler


@pytest.fixture(scope="module")
def fp32_run():
    batches = _batches()
    return batches, _train("fp32", batches)[0]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_amp_loop_follows_fp32(fp32_run, precision):
    batches, ref = fp32_run
    losses, scaler = _train(precision, batches)
    assert np.all(np.isfinite(losses))
    # the same path as float32 within the low dtype's rounding
    tol = 0.005 if precision == "fp16" else 0.02
    assert np.max(np.abs(losses - ref) / ref) < tol
    # and it learns: the last steps' loss is below the first steps'
    assert losses[-4:].mean() < losses[:4].mean()
    assert ref[-4:].mean() < ref[:4].mean()
    if precision == "fp16":
        stats = scaler.stats()
        assert stats["steps"] == STEPS
        assert stats["skipped_steps"] == 0
        assert scaler.get_scale() == 2.0 ** 16
