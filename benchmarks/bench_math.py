"""The binary element-wise math, atan2, fmod and remainder, beside torch:
forward alone (the kernel) and forward + backward through autograd, on
(batch, 4096) float32 with a divisor of the same shape, each result checked
against torch (fmod and remainder bit for bit) before it is timed.  The
unary math (sin ... atanh) is bench_train.py's activation and unary
sections.

Not a test: run it by hand, one thread as the README's figures:

    OMP_NUM_THREADS=1 python benchmarks/bench_math.py [--batch 256]
        [--repeat 15]
"""
import argparse
import os

import numpy as np

import ampc
from beside_torch import best_ms

try:
    import torch
except ImportError:  # torch is optional: its columns are left out
    torch = None

OPS = ("atan2", "fmod", "remainder")


def _inputs(shape):
    """Dividends (or y) and divisors (or x): standard normal and 0.5 to 3 in
    magnitude with random signs, so every quadrant and sign case comes."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 4).astype(np.float32)
    b = (rng.uniform(0.5, 3.0, shape) * rng.choice([-1, 1], shape)).astype(
        np.float32)
    return a, b


def _check(op, got, want):
    if op == "atan2":
        ok = np.allclose(got, want, rtol=1e-6, atol=1e-7)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        raise SystemExit(f"validation failed: {op}")


def _backward_step(fn, a, b, g):
    def step():
        fn(a, b).backward(g)
    return step


def _row(label, fa, ft, repeat):
    ms = best_ms(fa, repeat, lambda: None)
    row = f"{label:<24}{ms:>8.2f}"
    if ft is not None:
        tms = best_ms(ft, repeat, lambda: None)
        row += f"{tms:>8.2f}{ms / tms:>12.2f}"
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and torch is not None:
        torch.set_num_threads(int(threads))
    shape = (args.batch, 4096)
    a_np, b_np = _inputs(shape)
    print(f"binary math {shape} float32, ms ({ampc.get_num_threads()} "
          "threads)")
    print(f"{'op':<24}{'ampc':>8}{'torch':>8}{'ampc/torch':>12}")
    for op in OPS:
        a, b = ampc.tensor(a_np), ampc.tensor(b_np)
        fa = getattr(ampc, op)
        ta = tb = ft = None
        if torch is not None:
            ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
            ft = getattr(torch, op)
            _check(op, fa(a, b).numpy(), ft(ta, tb).numpy())
        print(_row(op, lambda: fa(a, b),
                   None if ft is None else lambda: ft(ta, tb),
                   args.repeat), flush=True)
        ga, gb = ampc.tensor(a_np, requires_grad=True), ampc.tensor(
            b_np, requires_grad=True)
        step = _backward_step(fa, ga, gb, ampc.ones(*shape))
        tstep = None
        if torch is not None:
            tga = torch.from_numpy(a_np).requires_grad_()
            tgb = torch.from_numpy(b_np).requires_grad_()
            tstep = _backward_step(ft, tga, tgb, torch.ones(*shape))
            tstep()
            step()
            _check(op, gb.grad.numpy(), tgb.grad.numpy())
        print(_row(op + " fwd+bwd", step, tstep, args.repeat), flush=True)


if __name__ == "__main__":
    main()
