"""The newer ops beside torch, in one process: adaptive_max_pool2d and
max_pool1d (forward, and forward + backward), embedding_bag (sum, mean,
max; forward, and forward + backward), cummax, kthvalue, histc and the
linalg norms, float32.  Each case is checked against torch (or NumPy when
torch is missing) before it is timed; the table gives the best of
`--repeat` runs in ms and torch/ampc.  Not a test: run it by hand, with
--threads 1 for a fair comparison of one core each.

    python benchmarks/bench_more_api.py --threads 1 [--repeat 20]
        [--device cpu|cuda]
"""

import numpy as np

import ampc
import ampc.nn.functional as F

from beside_torch import run_cases

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # torch is optional: its column is left out
    torch = TF = None


def _close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(got.detach().cpu().numpy(),
                               want.detach().cpu().numpy()
                               if hasattr(want, "detach") else want,
                               rtol=rtol, atol=atol)


def _backward(out_fn, leaf):
    def run():
        leaf.grad = None
        out_fn().sum().backward()
    return run


def cases(device):
    """(label, ampc fn, torch fn or None, check) for each case."""
    rng = np.random.default_rng(0)
    out = []

    def pair(x, grad=False):
        a = ampc.tensor(x).to(device)
        t = torch.tensor(x).to(device) if torch else None
        if grad:
            a.requires_grad_()
            if t is not None:
                t.requires_grad_()
        return a, t

    def add(label, fa, ft, want):
        out.append((label, fa, ft if torch else None,
                    lambda: _close(fa(), want()) if torch else fa()))

    img = rng.standard_normal((32, 64, 33, 33)).astype(np.float32)
    ai, ti = pair(img, grad=True)
    add("adaptive_max_pool2d 7x7", lambda: F.adaptive_max_pool2d(ai, 7),
        lambda: TF.adaptive_max_pool2d(ti, 7),
        lambda: TF.adaptive_max_pool2d(ti, 7))
    out.append(("  + backward", _backward(
        lambda: F.adaptive_max_pool2d(ai, 7), ai),
        _backward(lambda: TF.adaptive_max_pool2d(ti, 7), ti)
        if torch else None, lambda: None))
    sig = rng.standard_normal((32, 64, 1001)).astype(np.float32)
    asg, tsg = pair(sig, grad=True)
    add("max_pool1d k3 s2", lambda: F.max_pool1d(asg, 3, 2),
        lambda: TF.max_pool1d(tsg, 3, 2), lambda: TF.max_pool1d(tsg, 3, 2))
    out.append(("  + backward", _backward(lambda: F.max_pool1d(asg, 3, 2),
                                          asg),
                _backward(lambda: TF.max_pool1d(tsg, 3, 2), tsg)
                if torch else None, lambda: None))

    table = rng.standard_normal((100000, 64)).astype(np.float32)
    aw, tw = pair(table, grad=True)
    idx = rng.integers(0, 100000, 20 * 2048)
    offs = np.arange(0, 20 * 2048, 20)
    ai_, ti_ = pair(idx)
    ao, to_ = pair(offs)
    for mode in ("sum", "mean", "max"):
        add(f"embedding_bag {mode}",
            lambda m=mode: F.embedding_bag(ai_, aw, ao, mode=m),
            lambda m=mode: TF.embedding_bag(ti_, tw, to_, mode=m),
            lambda m=mode: TF.embedding_bag(ti_, tw, to_, mode=m))
        out.append(("  + backward", _backward(
            lambda m=mode: F.embedding_bag(ai_, aw, ao, mode=m), aw),
            _backward(lambda m=mode: TF.embedding_bag(ti_, tw, to_, mode=m),
                      tw) if torch else None, lambda: None))

    wide = rng.standard_normal((256, 4096)).astype(np.float32)
    ax, tx = pair(wide)
    add("cummax dim 1 256x4096", lambda: ax.cummax(1).values,
        lambda: tx.cummax(1).values, lambda: tx.cummax(1).values)
    add("cummax dim 0 256x4096", lambda: ax.cummax(0).values,
        lambda: tx.cummax(0).values, lambda: tx.cummax(0).values)
    add("kthvalue k=2048 256x4096", lambda: ax.kthvalue(2048, 1).values,
        lambda: tx.kthvalue(2048, 1).values,
        lambda: tx.kthvalue(2048, 1).values)
    big = rng.standard_normal(1 << 20).astype(np.float32)
    ab, tb = pair(big)
    add("histc 1M, 100 bins", lambda: ab.histc(100, -3, 3),
        lambda: tb.histc(100, -3, 3), lambda: tb.histc(100, -3, 3))
    add("vector_norm 3 256x4096 dim 1",
        lambda: ampc.linalg.vector_norm(ax, 3, 1),
        lambda: torch.linalg.vector_norm(tx, 3, 1),
        lambda: torch.linalg.vector_norm(tx, 3, 1))
    add("matrix_norm 1 256x4096", lambda: ampc.linalg.matrix_norm(ax, 1),
        lambda: torch.linalg.matrix_norm(tx, 1),
        lambda: torch.linalg.matrix_norm(tx, 1))
    return out


def main():
    run_cases(__doc__, cases, ampc, torch, 30)


if __name__ == "__main__":
    main()
