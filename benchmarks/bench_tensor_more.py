"""prod, logsumexp, cosine_similarity, tril and lerp beside torch, in one
process.  Each case is checked against NumPy before it is timed; the table
gives the best of `--repeat` runs in ms and torch/ampc.  Not a test: run it
by hand.

    python benchmarks/bench_tensor_more.py [--repeat 20] [--threads 1]
        [--device cpu|cuda]
"""

import numpy as np

import ampc
import ampc.nn.functional as F

from beside_torch import run_cases

try:
    import torch
except ImportError:  # torch is optional: its column is left out
    torch = None


def cases(device):
    """(label, ampc fn, torch fn or None, check) for each case."""
    rng = np.random.default_rng(0)
    # products near 1, so that 1000 of them neither overflow nor underflow
    near1 = rng.uniform(0.99, 1.01, (1000, 1031)).astype(np.float32)
    wide = rng.standard_normal((1000, 1031)).astype(np.float32)
    a1, aw, ac = (ampc.tensor(x).to(device) for x in (near1, wide, wide))
    ah, awh = a1.half(), aw.half()
    t1 = tw = tc = th = twh = None
    if torch:
        t1, tw, tc = (torch.tensor(x).to(device)
                      for x in (near1, wide, wide))
        th, twh = t1.half(), tw.half()
    h1, hw = (x.astype(np.float16).astype(np.float64) for x in (near1, wide))
    lerp16 = h1 + 0.3 * (hw - h1)

    def close(got, want, rtol=1e-5):
        np.testing.assert_allclose(got.float().cpu().numpy(), want,
                                   rtol=rtol, atol=1e-6)

    def lse(x, axis):
        m = x.max(axis, keepdims=True)
        return (np.log(np.exp(x - m).sum(axis, keepdims=True)) + m).squeeze(
            axis)

    def cos(a, b):
        na = np.linalg.norm(a, axis=1, keepdims=True)
        nb = np.linalg.norm(b, axis=1, keepdims=True)
        return ((a / na) * (b / nb)).sum(1)

    n64 = near1.astype(np.float64)
    return [
        ("prod() 1000x1031", lambda: a1.prod(),
         (lambda: t1.prod()) if torch else None,
         lambda: close(a1.prod(), np.prod(n64))),
        ("prod(1) 1000x1031", lambda: a1.prod(1),
         (lambda: t1.prod(1)) if torch else None,
         lambda: close(a1.prod(1), np.prod(n64, 1))),
        ("prod(0) 1000x1031", lambda: a1.prod(0),
         (lambda: t1.prod(0)) if torch else None,
         lambda: close(a1.prod(0), np.prod(n64, 0))),
        ("prod(1) float16", lambda: ah.prod(1),
         (lambda: th.prod(1)) if torch else None,
         lambda: close(ah.prod(1), np.prod(
             ah.float().cpu().numpy().astype(np.float64), 1), 1e-3)),
        ("logsumexp(1)", lambda: aw.logsumexp(1),
         (lambda: tw.logsumexp(1)) if torch else None,
         lambda: close(aw.logsumexp(1), lse(wide, 1))),
        ("cosine_similarity", lambda: F.cosine_similarity(aw, a1),
         (lambda: torch.nn.functional.cosine_similarity(tw, t1))
         if torch else None,
         lambda: close(F.cosine_similarity(aw, a1), cos(wide, near1))),
        ("tril(1)", lambda: aw.tril(1),
         (lambda: tw.tril(1)) if torch else None,
         lambda: close(aw.tril(1), np.tril(wide, 1))),
        ("lerp(0.3)", lambda: aw.lerp(a1, 0.3),
         (lambda: tw.lerp(t1, 0.3)) if torch else None,
         lambda: close(aw.lerp(a1, 0.3), wide + 0.3 * (near1 - wide))),
        ("lerp(0.7)", lambda: aw.lerp(a1, 0.7),
         (lambda: tw.lerp(t1, 0.7)) if torch else None,
         lambda: close(aw.lerp(a1, 0.7), wide + 0.7 * (near1 - wide))),
        ("lerp(tensor w)", lambda: aw.lerp(a1, aw),
         (lambda: tw.lerp(t1, tw)) if torch else None,
         lambda: close(aw.lerp(a1, aw), wide + wide * (near1 - wide),
                       1e-4)),
        ("lerp(w row) broadcast", lambda: aw.lerp(a1, aw[0]),
         (lambda: tw.lerp(t1, tw[0])) if torch else None,
         lambda: close(aw.lerp(a1, aw[0]),
                       wide + wide[0] * (near1 - wide), 1e-4)),
        ("lerp_(0.3) in place", lambda: ac.lerp_(a1, 0.3),
         (lambda: tc.lerp_(t1, 0.3)) if torch else None,
         lambda: close(ampc.tensor(wide).to(device).lerp_(a1, 0.3),
                       wide + 0.3 * (near1 - wide))),
        ("lerp(0.3) float16", lambda: ah.lerp(awh, 0.3),
         (lambda: th.lerp(twh, 0.3)) if torch else None,
         lambda: close(ah.lerp(awh, 0.3), lerp16, 1e-3)),
    ]


def main():
    run_cases(__doc__, cases, ampc, torch, 22)


if __name__ == "__main__":
    main()
