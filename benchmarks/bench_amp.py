"""Throughput of the fused AMP unscale-and-check, in GB/s.

The kernel (``ampc._amp_foreach_non_finite_check_and_unscale_``: every
gradient of an optimiser multiplied by 1/scale in place, with the inf/NaN
check, in one call) is validated against a NumPy reference on every CPU
level first, then timed at the lab's SimpleCNN parameter sizes (8 tensors)
and at 100M elements, beside a memcpy of the same bytes (read + write,
NumPy's copyto) and torch's
``torch._amp_foreach_non_finite_check_and_unscale_`` on the CPU (where
torch is installed), all in this process.  The
"+counts" column is the GradScaler path, which also counts inf, NaN, zero
and subnormal elements per tensor in the same pass.  GB/s counts the bytes
read and written.  Then the lab's SimpleCNN training step in AMP float16
(autocast + GradScaler) and AMP bfloat16 (autocast) against the float32
step, and both again with the weights' 16-bit copies kept
(``ampc.amp.keep_weight_casts``): ms per step and ampc's peak tensor
memory, beside torch's step time.
Last, unscale-and-clip at the lab's parameter sizes: ampc's fused
``scaler.clip_grad_norm_(opt, max_norm)`` against the recipe's
``scaler.unscale_(opt)`` + ``clip_grad_norm_`` in ampc and in torch.
Not a test: run it by hand.

    python benchmarks/bench_amp.py [--repeat 15] [--big 100000000]
                                   [--threads N] [--batch 256]

On a loaded machine, a kernel split over threads waits for its slowest
thread; --threads 1 compares one core with one core (memcpy is one core
always).
"""
import argparse
import time

import numpy as np

import ampc
from ampc import _C

try:
    import torch
except ImportError:  # torch is optional: its column is left out
    torch = None

# the lab's SimpleCNN: conv1 w/b, conv2 w/b, fc1 w/b, fc2 w/b
LAB_SIZES = (864, 32, 18432, 64, 2097152, 512, 5120, 10)


def best_time(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def as_ampc(a32, dt):
    t = ampc.from_numpy(a32)
    return t if dt == "float32" else t.to(getattr(ampc, dt))


def reference(vals, inv):
    """float64 oracle: (unscaled values rounded to the dtype, found)."""
    found = any(not np.isfinite(v).all() for v in vals)
    return [v * np.float32(inv) for v in vals], found


def validate(sizes, dt, rng):
    """Every level: the kernel's output equals the oracle's, found_inf
    too, with inf planted at the first and the last element."""
    for level in ampc.backends.cpu.levels():
        _C._set_cpu_level(level)
        vals = [rng.standard_normal(n).astype(np.float32) for n in sizes]
        vals[0][0] = np.inf
        vals[-1][-1] = -np.inf
        grads = [as_ampc(v.copy(), dt) for v in vals]
        src = [g.float().numpy().copy() for g in grads]
        found = _C.full((), 0.0, ampc.float32)
        inv = _C.full((), 0.25, ampc.float32)
        _C._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        want, want_found = reference(src, 0.25)
        assert found.item() == float(want_found), (level, dt)
        for g, w in zip(grads, want):
            got = g.float().numpy()
            w = w.astype(np.float32) if dt == "float32" else \
                as_ampc(w.astype(np.float32), dt).float().numpy()
            assert np.array_equal(got, w, equal_nan=True), (level, dt)


def bench_case(label, sizes, dt, repeat, rng, levels):
    nbytes = 2 * sum(sizes) * getattr(ampc, dt).itemsize
    vals = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads = [as_ampc(v, dt) for v in vals]
    found = _C.full((), 0.0, ampc.float32)
    halves = [_C.full((), 0.5, ampc.float32), _C.full((), 2.0, ampc.float32)]
    state = {"i": 0}

    def run(fn):
        # alternate x0.5 and x2 so the values neither drift nor denormalise
        def go():
            state["i"] ^= 1
            fn(grads, found, halves[state["i"]])
        return go

    row = {"case": label, "dtype": dt, "MB": nbytes / 2 / 1e6}
    for level in levels:
        _C._set_cpu_level(level)
        t = best_time(run(_C._amp_foreach_non_finite_check_and_unscale_),
                      repeat)
        row[level] = nbytes / t / 1e9
    t = best_time(run(_C._amp_unscale_counts_), repeat)
    row["+counts"] = nbytes / t / 1e9

    flat = np.concatenate([np.frombuffer(v.tobytes(), np.uint8)
                           for v in vals])[:nbytes // 2]
    dst = np.empty_like(flat)
    t = best_time(lambda: np.copyto(dst, flat), repeat)
    row["memcpy"] = nbytes / t / 1e9

    if torch is not None:
        tdt = getattr(torch, dt)
        tg = [torch.from_numpy(v).to(tdt) for v in vals]
        tf = torch.zeros(())
        th = [torch.full((), 0.5), torch.full((), 2.0)]

        def go():
            state["i"] ^= 1
            torch._amp_foreach_non_finite_check_and_unscale_(
                tg, tf, th[state["i"]])
        t = best_time(go, repeat)
        row["torch"] = nbytes / t / 1e9
    return row


# ----------------------------------------------------------------------------
# the AMP training step against the float32 step


def _step_fn(lib, model, opt, x, y, precision):
    """One SimpleCNN training step of ``lib`` (ampc or torch) in
    ``precision``: fp32, fp16 (autocast + GradScaler) or bf16 (autocast)."""
    crit = lib.nn.CrossEntropyLoss()
    scaler = lib.amp.GradScaler("cpu") if precision == "fp16" else None
    dtype = {"fp16": lib.float16, "bf16": lib.bfloat16}.get(precision)

    def step():
        opt.zero_grad()
        with lib.autocast("cpu", dtype=dtype or lib.bfloat16,
                          enabled=dtype is not None):
            loss = crit(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss
    return step


def training_steps(batch, repeat):
    """ms per step and ampc's peak tensor memory for each precision."""
    from ampc.lab.model import SimpleCNN
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    ys = rng.integers(0, 10, batch)
    rows = {}
    for name in ("fp32", "fp16", "bf16", "fp16+kept", "bf16+kept"):
        precision, _, kept = name.partition("+")
        ampc.manual_seed(0)
        model = SimpleCNN()
        opt = ampc.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if kept:
            # persistent 16-bit weights, rewritten by the SGD step
            casts = ampc.amp.keep_weight_casts(
                model, dtype={"fp16": ampc.float16,
                              "bf16": ampc.bfloat16}[precision])
        step = _step_fn(ampc, model, opt, ampc.tensor(xs), ampc.tensor(ys),
                        precision)
        step()                                  # momentum buffers exist
        ampc.reset_peak_memory_stats()
        base = ampc.memory_allocated()
        t = best_time(step, repeat)
        peak = ampc.max_memory_allocated() - base
        row = {"ms": t * 1e3, "peak_mb": peak / 2**20}
        if kept:
            row["kept_mb"] = casts.nbytes / 2**20
            casts.release()
            if torch is not None:
                row["torch_ms"] = rows[precision]["torch_ms"]
        elif torch is not None:
            torch.manual_seed(0)
            tmodel = torch.nn.Sequential(
                torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                torch.nn.MaxPool2d(2), torch.nn.Conv2d(32, 64, 3, padding=1),
                torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                torch.nn.Linear(4096, 512), torch.nn.ReLU(),
                torch.nn.Linear(512, 10))
            topt = torch.optim.SGD(tmodel.parameters(), lr=0.01,
                                   momentum=0.9)
            tstep = _step_fn(torch, tmodel, topt, torch.from_numpy(xs),
                             torch.from_numpy(ys), precision)
            row["torch_ms"] = best_time(tstep, repeat) * 1e3
        rows[name] = row
    return rows


def print_training_steps(batch, repeat):
    rows = training_steps(batch, repeat)
    fp32 = rows["fp32"]
    print(f"\nSimpleCNN training step, batch {batch}, CPU "
          "(peak = ampc's tensor memory during a step, weights excluded; "
          "+kept: ampc.amp.keep_weight_casts, its copies excluded too, "
          "torch's column its plain autocast step)")
    head = (f"{'precision':<10}{'ms/step':>9}{'vs fp32':>9}{'peak MB':>9}"
            f"{'vs fp32':>9}")
    if torch is not None:
        head += f"{'torch ms':>10}{'ampc/torch':>11}"
    print(head)
    for name, r in rows.items():
        line = (f"{name:<10}{r['ms']:>9.1f}{r['ms'] / fp32['ms']:>9.2f}"
                f"{r['peak_mb']:>9.1f}{r['peak_mb'] / fp32['peak_mb']:>9.2f}")
        if torch is not None:
            line += f"{r['torch_ms']:>10.1f}{r['ms'] / r['torch_ms']:>11.2f}"
        if "kept_mb" in r:
            line += f"   copies {r['kept_mb']:.1f} MB"
        print(line)


def _clip_runner(lib, fused, repeat, rng):
    """ms per unscale-and-clip of the lab's float32 gradients (scaled by
    2^16, clipped to norm 1), the refill of the gradients between calls
    timed alone and taken off."""
    srcs = [lib.from_numpy(rng.standard_normal(n).astype(np.float32)
                           * 65536.0) for n in LAB_SIZES]
    params = [lib.nn.Parameter(lib.zeros(n)) for n in LAB_SIZES]
    for p, src in zip(params, srcs):
        p.grad = src.clone()
    opt = lib.optim.SGD(params, lr=0.1)

    def refill():
        for p, src in zip(params, srcs):
            p.grad.copy_(src)
        scaler = lib.amp.GradScaler("cpu")
        scaler.scale(lib.ones(1))
        return scaler

    def call():
        scaler = refill()
        if fused:
            scaler.clip_grad_norm_(opt, 1.0)
        else:
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_(params, 1.0)
    return (best_time(call, repeat) - best_time(refill, repeat)) * 1e3


def print_clip(repeat):
    rng = np.random.default_rng(1)
    fused = _clip_runner(ampc, True, repeat, rng)
    two = _clip_runner(ampc, False, repeat, rng)
    print("\nunscale + clip_grad_norm_ of the SimpleCNN's float32 gradients "
          "(2.1M elements), ms per call")
    line = (f"ampc scaler.clip_grad_norm_ {fused:.2f}   ampc unscale_ + "
            f"clip_grad_norm_ {two:.2f} ({two / fused:.2f}x)")
    if torch is not None:
        t = _clip_runner(torch, False, repeat, rng)
        line += f"   torch unscale_ + clip_grad_norm_ {t:.2f} " \
            f"({t / fused:.2f}x)"
    print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--big", type=int, default=100_000_000,
                    help="elements of the single big tensor")
    ap.add_argument("--batch", type=int, default=256,
                    help="batch size of the training-step comparison")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for ampc and torch (default: all)")
    args = ap.parse_args()
    if args.threads:
        ampc.set_num_threads(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    levels = ampc.backends.cpu.levels()
    best = levels[-1]
    prev = _C.cpu_capability()

    for dt in ("float32", "float16", "bfloat16"):
        validate((1, 7, 33, 1000, 70001) + LAB_SIZES[:4], dt, rng)
    print(f"validated against NumPy on {', '.join(levels)}; "
          f"{ampc.get_num_threads()} thread(s)")

    rows = []
    for dt in ("float32", "float16", "bfloat16"):
        rows.append(bench_case("SimpleCNN (8 tensors)", LAB_SIZES, dt,
                               args.repeat * 10, rng, levels))
    for dt in ("float32", "float16"):
        rows.append(bench_case(f"{args.big // 1_000_000}M x 1", (args.big,),
                               dt, args.repeat, rng, levels))
    _C._set_cpu_level(prev)

    cols = list(levels) + ["+counts", "memcpy"] + \
        (["torch"] if torch is not None else [])
    head = f"{'case':<22}{'dtype':<10}{'MB':>8}" + \
        "".join(f"{c:>9}" for c in cols) + \
        f"{'/memcpy':>9}" + (f"{'/torch':>8}" if torch is not None else "")
    print("GB/s (bytes read + written), best of runs")
    print(head)
    for r in rows:
        line = f"{r['case']:<22}{r['dtype']:<10}{r['MB']:>8.1f}" + \
            "".join(f"{r[c]:>9.1f}" for c in cols) + \
            f"{r[best] / r['memcpy']:>9.2f}"
        if torch is not None:
            line += f"{r[best] / r['torch']:>8.2f}"
        print(line)
    print_training_steps(args.batch, max(3, args.repeat // 3))
    print_clip(args.repeat * 4)


if __name__ == "__main__":
    main()
