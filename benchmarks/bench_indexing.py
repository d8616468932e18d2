"""Advanced indexing beside torch, in one process: row and column gathers
with their backward (the scatter-add), bool-mask reads and writes, nonzero,
gather(dim), scatter_reduce.  Each case is checked against NumPy (or torch)
before it is timed; the table gives the best of `--repeat` runs in ms and
torch/ampc.  Not a test: run it by hand.

    python benchmarks/bench_indexing.py [--repeat 20] [--device cpu|cuda]
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
    table = rng.standard_normal((100_000, 64)).astype(np.float32)
    rows = rng.integers(0, 100_000, 50_000)
    cols = rng.integers(0, 64, 32)
    square = rng.standard_normal((1000, 1000)).astype(np.float32)
    mask = rng.random((1000, 1000)) < 0.5
    logp = rng.standard_normal((4096, 1000)).astype(np.float32)
    target = rng.integers(0, 1000, (4096, 1))
    # scatter_reduce: 200000 rows of 64 features into 10000 segments (an
    # expanded index), and 2e6 values into 1e6 (a 1-D index)
    feats = rng.standard_normal((200_000, 64)).astype(np.float32)
    seg = rng.integers(0, 10_000, 200_000)
    vals = rng.standard_normal(2_000_000).astype(np.float32)
    pos = rng.integers(0, 1_000_000, 2_000_000)

    # (requires_grad after the move: a leaf on the device, whose .grad fills)
    def a(x, requires_grad=False):
        return ampc.tensor(x).to(device).requires_grad_(requires_grad)

    def t(x, requires_grad=False):
        return torch.tensor(x).to(device).requires_grad_(requires_grad) \
            if torch else None

    at, ar, ac = a(table), a(rows), a(cols)
    aw = a(table, requires_grad=True)
    asq, am = a(square), a(mask)
    alp, atg = a(logp), a(target)
    af, aseg, az = a(feats), a(seg).reshape(-1, 1).expand(-1, 64), \
        a(np.zeros((10_000, 64), np.float32))
    av, apos, az1 = a(vals), a(pos), a(np.zeros(1_000_000, np.float32))
    tt, tr, tc = t(table), t(rows), t(cols)
    tw = t(table, requires_grad=True)
    tsq, tm = t(square), t(mask)
    tlp, ttg = t(logp), t(target)
    if torch:
        tf, tseg, tz = t(feats), t(seg).reshape(-1, 1).expand(-1, 64), \
            t(np.zeros((10_000, 64), np.float32))
        tv, tpos, tz1 = t(vals), t(pos), t(np.zeros(1_000_000, np.float32))

    def same(got, want):
        np.testing.assert_array_equal(got.cpu().numpy(), want)

    def grad_check():
        aw.grad = None
        aw[ar].sum().backward()
        want = np.zeros_like(table)
        np.add.at(want, rows, 1.0)
        same(aw.grad, want)

    def fill_a():
        asq[am] = 0.0

    def fill_t():
        tsq[tm] = 0.0

    def fill_check():
        fill_a()
        same(asq, np.where(mask, 0, square))

    def reduced(op, out, at, values):
        """NumPy's answer: include_self=False, untouched elements 0."""
        fn = {"sum": np.add, "amax": np.maximum}[op]
        want = np.full(out.shape, 0.0 if op == "sum" else -np.inf,
                       np.float32)
        fn.at(want, at, values)
        return np.where(np.isneginf(want), 0, want)

    def close(got, want):
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5,
                                   atol=1e-5)

    def seg_a(op):
        return az.scatter_reduce(0, aseg, af, op, include_self=False)

    def seg_t(op):
        return tz.scatter_reduce(0, tseg, tf, op, include_self=False)

    def flat_a(op):
        return az1.scatter_reduce(0, apos, av, op, include_self=False)

    def flat_t(op):
        return tz1.scatter_reduce(0, tpos, tv, op, include_self=False)

    reductions = []
    for op in ("sum", "amax"):
        reductions += [
            (f"scatter_reduce {op} 2e5x64", lambda op=op: seg_a(op),
             (lambda op=op: seg_t(op)) if torch else None,
             lambda op=op: close(seg_a(op), reduced(
                 op, np.zeros((10_000, 64)),
                 (seg[:, None], np.arange(64)[None, :]), feats))),
            (f"scatter_reduce {op} 1-D 2e6", lambda op=op: flat_a(op),
             (lambda op=op: flat_t(op)) if torch else None,
             lambda op=op: close(flat_a(op), reduced(
                 op, np.zeros(1_000_000), pos, vals))),
        ]

    return [
        ("x[rows] 50000 of 100000x64", lambda: at[ar],
         (lambda: tt[tr]) if torch else None,
         lambda: same(at[ar], table[rows])),
        ("x[rows] + backward", lambda: aw[ar].sum().backward(),
         (lambda: tw[tr].sum().backward()) if torch else None, grad_check),
        ("x[:, cols] 32 of 64", lambda: at[:, ac],
         (lambda: tt[:, tc]) if torch else None,
         lambda: same(at[:, ac], table[:, cols])),
        ("x[:, cols] + backward", lambda: aw[:, ac].sum().backward(),
         (lambda: tw[:, tc].sum().backward()) if torch else None,
         lambda: None),
        ("x[mask] 1000x1000", lambda: asq[am],
         (lambda: tsq[tm]) if torch else None,
         lambda: same(asq[am], square[mask])),
        ("nonzero 1000x1000", lambda: am.nonzero(),
         (lambda: tm.nonzero()) if torch else None,
         lambda: same(am.nonzero(), np.argwhere(mask))),
        ("x[mask] = 0", fill_a, fill_t if torch else None, fill_check),
        ("gather(1) 4096x1000", lambda: alp.gather(1, atg),
         (lambda: tlp.gather(1, ttg)) if torch else None,
         lambda: same(alp.gather(1, atg),
                      np.take_along_axis(logp, target, 1))),
    ] + reductions


def main():
    run_cases(__doc__, cases, ampc, torch, 30)


if __name__ == "__main__":
    main()
