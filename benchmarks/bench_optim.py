"""Optimizer steps on the CPU beside torch: one ``opt.step()`` over the
parameters of the lab's SimpleCNN (2.2M float32 values in 8 tensors),
for ampc's fused-kernel optimizers (SGD, Adam, RMSprop, Adagrad), each
checked against torch's step first, and timed beside torch's default
(for-loop) step and its ``foreach=True`` step.  Both libraries run on one
thread, timed by the thread's CPU clock (best of ``--repeat``), so that
other jobs on a shared machine change the figures little.

Not a test: run it by hand.

    python benchmarks/bench_optim.py [--repeat 20]
"""
import argparse
import time

import numpy as np

import ampc

try:
    import torch
except ImportError:  # torch is optional: its column is left out
    torch = None

SHAPES = [(32, 3, 3, 3), (32,), (64, 32, 3, 3), (64,), (512, 4096), (512,),
          (10, 512), (10,)]
CASES = [
    ("SGD momentum", "SGD", dict(lr=0.01, momentum=0.9)),
    ("Adam", "Adam", dict(lr=1e-3)),
    ("RMSprop", "RMSprop", dict(lr=1e-3)),
    ("RMSprop momentum", "RMSprop", dict(lr=1e-3, momentum=0.9)),
    ("RMSprop centered momentum", "RMSprop",
     dict(lr=1e-3, momentum=0.9, centered=True)),
    ("RMSprop centered momentum wd", "RMSprop",
     dict(lr=1e-3, momentum=0.9, centered=True, weight_decay=1e-4)),
    ("Adagrad", "Adagrad", dict(lr=1e-2)),
    ("Adagrad lr_decay wd", "Adagrad",
     dict(lr=1e-2, lr_decay=1e-3, weight_decay=1e-4)),
]


def build(lib, cls, kw, values, grads):
    params = [lib.nn.Parameter(lib.tensor(v)) for v in values]
    for p, g in zip(params, grads):
        p.grad = lib.tensor(g)
    return params, getattr(lib.optim, cls)(params, **kw)


def best_ms(steps, repeat):
    """The best time of each step in ms, the steps taken in turn in every
    round, so that a load that comes and goes meets them alike."""
    best = [float("inf")] * len(steps)
    for step in steps:
        step()
    for _ in range(repeat):
        for k, step in enumerate(steps):
            t0 = time.thread_time()
            step()
            best[k] = min(best[k], time.thread_time() - t0)
    return [b * 1e3 for b in best]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    ampc.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    print("| optimizer step, SimpleCNN's parameters | ampc ms | torch ms | "
          "torch foreach ms | ampc/torch | ampc/torch foreach |\n"
          "|---|---:|---:|---:|---:|---:|")
    for label, cls, kw in CASES:
        _, opt = build(ampc, cls, kw, values, grads)
        if torch is None:
            ms, = best_ms([opt.step], args.repeat)
            print(f"| {label} | {ms:.2f} | – | – | – | – |")
            continue
        _, topt = build(torch, cls, kw, values, grads)
        _, fopt = build(torch, cls, dict(kw, foreach=True), values, grads)
        # the same start and one step each: the results must agree
        a_params, a_opt = build(ampc, cls, kw, values, grads)
        t_params, t_opt = build(torch, cls, kw, values, grads)
        a_opt.step()
        t_opt.step()
        for a, t in zip(a_params, t_params):
            np.testing.assert_allclose(a.detach().numpy(),
                                       t.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
        ms, tms, fms = best_ms([opt.step, topt.step, fopt.step],
                               args.repeat)
        print(f"| {label} | {ms:.2f} | {tms:.2f} | {fms:.2f} | "
              f"{ms / tms:.2f} | {ms / fms:.2f} |")


if __name__ == "__main__":
    main()
