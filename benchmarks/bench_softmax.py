"""softmax and log_softmax over the last dim beside torch, in one process:
narrow rows (a classifier's or an attention head's 128 logits, an odd 33)
and wide ones (1000 classes), float32, forward and forward + backward.
Each case is checked against float64 NumPy before it is timed; the table
gives the best of `--repeat` runs in ms and torch/ampc.  Not a test: run
it by hand.

    python benchmarks/bench_softmax.py [--repeat 20] [--threads 1]
        [--cpu-clock] [--device cpu|cuda]
"""

import numpy as np

import ampc
import ampc.nn.functional as F

from beside_torch import run_cases

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # torch is optional: its column is left out
    torch = None

SHAPES = [(32768, 128), (32768, 33), (4096, 1000)]


def reference(x, log):
    """float64 softmax or log_softmax over the last dim."""
    z = x - x.max(-1, keepdims=True)
    lse = np.log(np.exp(z).sum(-1, keepdims=True))
    return z - lse if log else np.exp(z - lse)


def cases(device):
    """(label, ampc fn, torch fn or None, check) for each case."""
    rng = np.random.default_rng(0)
    out = []
    for shape in SHAPES:
        xv = (rng.standard_normal(shape) * 3).astype(np.float32)
        a = ampc.tensor(xv).to(device)
        ag = ampc.tensor(xv).to(device).requires_grad_(True)
        t = tg = None
        if torch:
            t = torch.tensor(xv).to(device)
            tg = torch.tensor(xv).to(device).requires_grad_(True)
        for name in ("softmax", "log_softmax"):
            log = name == "log_softmax"
            fa, ft = getattr(F, name), getattr(TF, name) if torch else None

            def check(fa=fa, a=a, xv=xv, log=log):
                np.testing.assert_allclose(
                    fa(a, -1).cpu().numpy(), reference(xv.astype(np.float64),
                                                       log),
                    rtol=1e-5, atol=1e-6)

            def both(f, x):
                f(x, -1).sum().backward()

            label = f"{name} {shape}"
            out.append((label + " fwd", lambda fa=fa, a=a: fa(a, -1),
                        (lambda ft=ft, t=t: ft(t, -1)) if torch else None,
                        check))
            out.append((label + " fwd+bwd",
                        lambda fa=fa, ag=ag: both(fa, ag),
                        (lambda ft=ft, tg=tg: both(ft, tg)) if torch
                        else None, lambda: None))
    return out


def main():
    run_cases(__doc__, cases, ampc, torch, 38)


if __name__ == "__main__":
    main()
