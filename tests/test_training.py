"""End to end: the lab's SimpleCNN learns a small synthetic task in float32,
float16 (model.half()) and bfloat16; tensor memory stays flat over many
steps; bad input fails with clear errors through the nn API."""
import time

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.optim as optim

SIZE = 16           # images are 3 x SIZE x SIZE
CLASSES = 10


class SimpleCNN(nn.Module):
    """The lab's model (Linear in_features follow the image size)."""

    def __init__(self, size=SIZE):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(32, 64, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(64 * (size // 4) ** 2, 512),
            nn.ReLU(),
            nn.Linear(512, CLASSES),
        )

    def forward(self, x):
        x = self.features(x)
        x = ampc.flatten(x, 1)
        return self.classifier(x)


def synthetic(n, seed, noise=0.5):
    """10 classes: each a fixed random colour pattern (the same for every
    split), shifted by up to 2 pixels and buried in Gaussian noise."""
    protos = np.random.default_rng(1234).standard_normal(
        (CLASSES, 3, SIZE, SIZE))
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, size=n)
    x = protos[y]
    shifts = rng.integers(-2, 3, size=(n, 2))
    for i, (dy, dx) in enumerate(shifts):
        x[i] = np.roll(x[i], (dy, dx), axis=(1, 2))
    x = x + noise * rng.standard_normal(x.shape)
    return x.astype(np.float32), y.astype(np.int64)


def train(dtype, steps=30, batch=64):
    ampc.manual_seed(0)
    model = SimpleCNN()
    if dtype is ampc.float16:
        model.half()
    elif dtype is ampc.bfloat16:
        model.bfloat16()
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs, ys = synthetic(steps * batch, seed=1)
    losses = []
    for i in range(steps):
        inputs = ampc.tensor(xs[i * batch:(i + 1) * batch]).to(dtype)
        labels = ampc.tensor(ys[i * batch:(i + 1) * batch])
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


def accuracy(model, dtype):
    xs, ys = synthetic(256, seed=2)
    model.eval()
    with ampc.no_grad():
        out = model(ampc.tensor(xs).to(dtype))
    model.train()
    pred = out.float().argmax(1).numpy()
    return float((pred == ys).mean())


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_simple_cnn_learns(name):
    dtype = getattr(ampc, name)
    t0 = time.perf_counter()
    model, losses = train(dtype)
    elapsed = time.perf_counter() - t0
    assert all(p.dtype is dtype for p in model.parameters())
    assert np.all(np.isfinite(losses)), losses
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses
    acc = accuracy(model, dtype)
    assert acc > 0.5, f"{name}: accuracy {acc:.2f} (chance is 0.10)"
    assert elapsed < 60, f"{name}: 30 steps took {elapsed:.1f} s"


def test_memory_stays_flat_over_many_steps():
    ampc.manual_seed(0)
    base = ampc.memory_allocated()
    model = SimpleCNN()
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs, ys = synthetic(32, seed=3)
    inputs, labels = ampc.tensor(xs), ampc.tensor(ys)
    live, peaks = [], []
    for i in range(25):
        ampc.reset_peak_memory_stats()
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        del loss
        live.append(ampc.memory_allocated())
        peaks.append(ampc.max_memory_allocated())
    # after the first step (momentum buffers, .grad) nothing accumulates
    assert len(set(live[2:])) == 1, live
    assert len(set(peaks[2:])) == 1, peaks
    params = sum(p.numel() * 4 for p in model.parameters())
    # parameters + gradients + momentum buffers + the batch, no more
    assert live[-1] - base <= 3 * params + inputs.numel() * 4 + 1024


# ----------------------------------------------------------------------------
# bad input through the nn API


@pytest.fixture
def model():
    return SimpleCNN()


def test_wrong_channel_count(model):
    with pytest.raises(RuntimeError, match="channels"):
        model(ampc.randn(2, 4, SIZE, SIZE))


def test_bad_rank_to_conv2d():
    conv = nn.Conv2d(3, 8, 3)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or "
                                           r"4D \(batched\) input to conv2d"):
        conv(ampc.randn(3, SIZE))
    # a 3-D input is one unbatched image: here its 8 "channels" are wrong
    with pytest.raises(RuntimeError, match="channels"):
        conv(ampc.randn(8, SIZE, SIZE))
    assert conv(ampc.randn(3, 6, 6)).shape == (8, 4, 4)


def test_mismatched_dtypes(model):
    model.half()
    with pytest.raises(RuntimeError, match="dtype"):
        model(ampc.randn(2, 3, SIZE, SIZE))


def test_wrong_feature_count():
    with pytest.raises(RuntimeError, match="linear"):
        nn.Linear(4, 2)(ampc.randn(3, 5))


def test_targets_out_of_range(model):
    out = model(ampc.randn(2, 3, SIZE, SIZE))
    with pytest.raises(IndexError, match="Target 12 is out of bounds"):
        nn.CrossEntropyLoss()(out, ampc.tensor([0, 12]))
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        nn.CrossEntropyLoss()(out, ampc.tensor([-3, 1]))


def test_bad_targets(model):
    out = model(ampc.randn(2, 3, SIZE, SIZE))
    with pytest.raises((ValueError, RuntimeError), match="batch|size"):
        nn.CrossEntropyLoss()(out, ampc.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match="shape"):
        nn.CrossEntropyLoss()(out, ampc.tensor([0.0, 1.0]))
