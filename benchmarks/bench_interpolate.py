"""F.interpolate's kernel modes beside torch, in one process: bilinear,
bicubic and trilinear upsampling, antialiased bilinear and bicubic
downsampling, each forward alone and forward + backward.  Each case is
checked against torch (or, without it, against the float32 output's
finiteness) before it is timed; the table gives the best of `--repeat` runs
in ms and torch/ampc.  Not a test: run it by hand.

    python benchmarks/bench_interpolate.py [--repeat 20] [--device cpu|cuda]
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

# (label, input shape, interpolate's keyword arguments)
CASES = [
    ("bilinear 2x", (8, 16, 128, 128), dict(scale_factor=2,
                                            mode="bilinear")),
    ("bicubic 2x", (8, 16, 128, 128), dict(scale_factor=2, mode="bicubic")),
    ("bicubic ac 1.5x", (8, 16, 127, 129),
     dict(scale_factor=1.5, mode="bicubic", align_corners=True)),
    ("bicubic 0.5x", (8, 16, 256, 256), dict(scale_factor=0.5,
                                             mode="bicubic")),
    ("bilinear aa 0.25x", (8, 16, 256, 256),
     dict(scale_factor=0.25, mode="bilinear", antialias=True)),
    ("bicubic aa 0.3x", (8, 16, 256, 256),
     dict(scale_factor=0.3, mode="bicubic", antialias=True)),
    ("trilinear 2x", (2, 8, 16, 48, 48), dict(scale_factor=2,
                                              mode="trilinear")),
]


def cases(device):
    """(label, ampc fn, torch fn or None, check) for each case; check()
    raises when ampc's result is wrong."""
    rng = np.random.default_rng(0)
    out = []
    for label, shape, kw in CASES:
        xv = rng.standard_normal(shape).astype(np.float32)
        ax = ampc.tensor(xv).to(device)
        axg = ampc.tensor(xv).to(device).requires_grad_()
        tx = torch.tensor(xv).to(device) if torch else None
        txg = torch.tensor(xv).to(device).requires_grad_() if torch else None

        def check(ax=ax, tx=tx, kw=kw):
            y = F.interpolate(ax, **kw).cpu().numpy()
            if torch is None:
                assert np.isfinite(y).all()
                return
            want = TF.interpolate(tx, **kw).cpu().numpy()
            np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)

        def fwd_bwd(x, interp, kw):
            y = interp(x, **kw)
            y.backward(y.detach())
        out.append((label, lambda ax=ax, kw=kw: F.interpolate(ax, **kw),
                    (lambda tx=tx, kw=kw: TF.interpolate(tx, **kw))
                    if torch else None, check))
        out.append((label + " +bwd",
                    lambda axg=axg, kw=kw: fwd_bwd(axg, F.interpolate, kw),
                    (lambda txg=txg, kw=kw: fwd_bwd(txg, TF.interpolate, kw))
                    if torch else None, lambda: None))
    return out


if __name__ == "__main__":
    run_cases(__doc__, cases, ampc, torch, width=24)
