"""Element-wise, cast and reduction throughput of ampc's engine, in GB/s.

Each op is validated against NumPy before it is timed, then timed beside a
memcpy of the same bytes (numpy's copyto), NumPy's own op and torch's op
(where torch is installed), all in this process.  GB/s counts the bytes the
op must read and write.  Not a test: run it by hand.

    python benchmarks/bench_engine.py [--n 16777216] [--repeat 20]
"""
import argparse
import time

import numpy as np

import ampc

try:
    import torch
except ImportError:  # torch is optional: its column is left out
    torch = None


def best_time(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def np_dtype(name):
    return {"float32": np.float32, "float16": np.float16}.get(name)


def cases(n):
    """(label, dtype name, bytes moved, ampc fn, numpy fn or None, torch fn
    or None, check) for each op."""
    rng = np.random.default_rng(0)
    out = []
    for dt in ("float32", "float16", "bfloat16"):
        a32 = rng.standard_normal(n).astype(np.float32)
        b32 = rng.standard_normal(n).astype(np.float32)
        adt = getattr(ampc, dt)
        a = ampc.tensor(a32).to(adt)
        b = ampc.tensor(b32).to(adt)
        isz = adt.itemsize
        npd = np_dtype(dt)
        na = a32.astype(npd) if npd else None
        nb = b32.astype(npd) if npd else None
        ta = tb = None
        if torch is not None:
            ta = torch.from_numpy(a32).to(getattr(torch, dt))
            tb = torch.from_numpy(b32).to(getattr(torch, dt))
        out.append((f"add {dt}", 3 * n * isz,
                    lambda a=a, b=b: a + b,
                    (lambda na=na, nb=nb: na + nb) if npd else None,
                    (lambda ta=ta, tb=tb: ta + tb) if ta is not None else None,
                    lambda a=a, b=b, a32=a32, b32=b32: np.allclose(
                        (a + b).float().numpy(), a32 + b32, atol=0.1)))
        out.append((f"mul scalar {dt}", 2 * n * isz,
                    lambda a=a: a * 0.5,
                    (lambda na=na: na * np.asarray(0.5, na.dtype)) if npd else None,
                    (lambda ta=ta: ta * 0.5) if ta is not None else None,
                    lambda a=a, a32=a32: np.allclose(
                        (a * 0.5).float().numpy(), a32 * 0.5, atol=0.05)))
        out.append((f"sum {dt}", n * isz,
                    lambda a=a: a.sum(),
                    (lambda na=na: na.sum(dtype=np.float32)) if npd else None,
                    (lambda ta=ta: ta.sum()) if ta is not None else None,
                    lambda a=a: abs(a.sum().item() - a.float().numpy()
                                    .astype(np.float64).sum())
                    <= 2 ** -8 * n ** 0.5 + 1e-3 * abs(a.float().numpy()
                                                       .sum())))
        if dt != "float32":
            out.append((f"cast float32->{dt}", n * (4 + isz),
                        lambda a32t=ampc.tensor(a32), adt=adt: a32t.to(adt),
                        (lambda a32=a32, npd=npd: a32.astype(npd)) if npd else None,
                        (lambda t=torch.from_numpy(a32), d=getattr(torch, dt):
                         t.to(d)) if torch is not None else None,
                        lambda: True))
            out.append((f"cast {dt}->float32", n * (4 + isz),
                        lambda a=a: a.float(),
                        (lambda na=na: na.astype(np.float32)) if npd else None,
                        (lambda ta=ta: ta.float()) if ta is not None else None,
                        lambda a=a, a32=a32: np.allclose(
                            a.float().numpy(), a32, rtol=1e-2, atol=1e-2)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    n = args.n
    print(f"ampc {ampc.__version__}, CPU level {ampc.backends.cpu.capability()}, "
          f"n = {n:,}" + ("" if torch is None else f", torch {torch.__version__}"))
    src = np.ones(n * 2, dtype=np.uint16)
    dst = np.empty_like(src)
    header = (f"{'op':24} {'ampc GB/s':>10} {'memcpy':>8} {'ampc/memcpy':>12}"
              f" {'numpy':>8} {'ampc/numpy':>11} {'torch':>8} {'ampc/torch':>11}")
    print(header)
    print("-" * len(header))
    for label, nbytes, fa, fn, ft, check in cases(n):
        if not check():
            raise SystemExit(f"{label}: ampc's result does not match NumPy")
        m = src[: nbytes // 2 // 2]
        md = dst[: m.size]
        t_memcpy = best_time(lambda: np.copyto(md, m), args.repeat)
        mem = gbps(m.nbytes * 2, t_memcpy)
        ours = gbps(nbytes, best_time(fa, args.repeat))
        row = f"{label:24} {ours:10.1f} {mem:8.1f} {ours / mem:12.2f}"
        for peer in (fn, ft):
            if peer is None:
                row += f" {'-':>8} {'-':>11}"
            else:
                theirs = gbps(nbytes, best_time(peer, args.repeat))
                row += f" {theirs:8.1f} {ours / theirs:11.2f}"
        print(row)


if __name__ == "__main__":
    main()
