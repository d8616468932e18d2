"""Data loading throughput: images/s for batch 256 of a CIFAR-shaped set
(FakeCIFAR10, 20,000 images), per-sample path vs fast path, with the lab's
transform (ToTensor + Normalize) and an augmenting one (RandomCrop +
RandomHorizontalFlip + ToTensor + Normalize), in the main process and
with worker processes.  The fast path is first checked against the
per-sample path (bit for bit, deterministic transform).

Run: python benchmarks/bench_data.py [--workers 0 2 4] [--size 20000]
"""
import argparse
import time

import numpy as np

import ampc.vision.transforms as T
from ampc.utils.data import DataLoader, default_collate
from ampc.vision.datasets import FakeCIFAR10

LAB = T.Compose([T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
AUG = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                 T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])


def per_sample(batch):
    """default_collate behind a different function: the loader then
    takes the per-sample path."""
    return default_collate(batch)


def validate(ds):
    ds.transform = LAB
    fast = DataLoader(ds, batch_size=256)
    slow = DataLoader(ds, batch_size=256, collate_fn=per_sample)
    assert fast._fetcher().batch_getter is not None
    for (a, b), (c, d) in zip(fast, slow):
        assert np.array_equal(a.numpy(), c.numpy())
        assert np.array_equal(b.numpy(), d.numpy())
    print("fast path == per-sample path (lab transform): OK")


def images_per_s(ds, transform, workers, fast, epochs=2):
    ds.transform = transform
    loader = DataLoader(ds, batch_size=256, shuffle=True,
                        num_workers=workers,
                        collate_fn=None if fast else per_sample,
                        persistent_workers=workers > 0)
    best = 0.0
    for _ in range(epochs):
        it = iter(loader)
        next(it)                # workers started, first batch in
        n, t0 = 0, time.perf_counter()
        for x, _ in it:
            n += x.shape[0]
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
    p.add_argument("--size", type=int, default=20000)
    args = p.parse_args()
    t0 = time.perf_counter()
    ds = FakeCIFAR10(size=args.size)
    print(f"FakeCIFAR10({args.size}) generated in "
          f"{time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    FakeCIFAR10()
    print(f"FakeCIFAR10() (50,000) generated in "
          f"{time.perf_counter() - t0:.2f} s")
    validate(ds)
    print(f"{'transform':10s} {'workers':>7s} {'per-sample':>12s} "
          f"{'fast path':>12s} {'speed-up':>9s}   (images/s, batch 256)")
    for name, tf in (("lab", LAB), ("augment", AUG)):
        for w in args.workers:
            slow = images_per_s(ds, tf, w, fast=False)
            fast = images_per_s(ds, tf, w, fast=True)
            print(f"{name:10s} {w:7d} {slow:12.0f} {fast:12.0f} "
                  f"{fast / slow:8.1f}x")


if __name__ == "__main__":
    main()
