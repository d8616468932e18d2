"""Scans and sorts beside torch, in one process: cumsum on (256, 4096),
sort and topk (k = 5 and 100) on (256, 4096) and (4096, 1000), float32.
Each case is checked against NumPy (or torch) before it is timed; the table
gives the best of `--repeat` runs in ms and torch/ampc.  Not a test: run it
by hand, with OMP_NUM_THREADS=1 for a fair comparison of one core each.

    OMP_NUM_THREADS=1 python benchmarks/bench_sort.py [--repeat 20]
        [--device cpu|cuda]
"""

import numpy as np

import ampc

from beside_torch import run_cases

try:
    import torch
except ImportError:  # torch is optional: its column is left out
    torch = None


def cases(device):
    """(label, ampc fn, torch fn or None, check) for each case; check()
    raises when ampc's result is wrong."""
    rng = np.random.default_rng(0)
    wide = rng.standard_normal((256, 4096)).astype(np.float32)
    tall = rng.standard_normal((4096, 1000)).astype(np.float32)
    arrays = {"256x4096": wide, "4096x1000": tall}

    def a(x):
        return ampc.tensor(x).to(device)

    def t(x):
        return torch.tensor(x).to(device) if torch else None

    def same(got, want):
        np.testing.assert_array_equal(got.cpu().numpy(), want)

    aw, tw = a(wide), t(wide)
    out = [("cumsum 256x4096", lambda: aw.cumsum(1),
            (lambda: tw.cumsum(1)) if torch else None,
            lambda: np.testing.assert_allclose(
                aw.cumsum(1).cpu().numpy(),
                np.cumsum(wide.astype(np.float64), 1), rtol=1e-6,
                atol=1e-4))]
    for name, x in arrays.items():
        ax, tx = a(x), t(x)
        out.append((f"sort {name}", lambda ax=ax: ax.sort(1),
                    (lambda tx=tx: tx.sort(1)) if torch else None,
                    lambda ax=ax, x=x: same(ax.sort(1).indices,
                                            np.argsort(x, 1,
                                                       kind="stable"))))
        for k in (5, 100):
            out.append((
                f"topk k={k} {name}", lambda ax=ax, k=k: ax.topk(k, 1),
                (lambda tx=tx, k=k: tx.topk(k, 1)) if torch else None,
                lambda ax=ax, x=x, k=k: same(
                    ax.topk(k, 1).indices,
                    np.argsort(-x, 1, kind="stable")[:, :k])))
    return out


def main():
    run_cases(__doc__, cases, ampc, torch, 26)


if __name__ == "__main__":
    main()
