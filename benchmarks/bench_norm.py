"""batch_norm, layer_norm and group_norm beside torch, in one process:
forward, and forward + backward (input, weight and bias gradients), at a
ResNet-like (256, 64, 16, 16) (group_norm: 32 groups) and a
transformer-like (4096, 768), in float32, bfloat16 and bfloat16 input with
float32 parameters (AMP's case).  Each ampc case is checked against torch
first; the table gives the best of `--repeat` runs in ms and torch/ampc.
Not a test: run it by hand.

    python benchmarks/bench_norm.py [--repeat 10] [--device cpu|cuda]
        [--cpu-clock]
"""
import argparse
import time

import numpy as np

import ampc
import ampc.nn.functional as F

from beside_torch import device_sync, timed_row

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # torch is optional: its column is left out
    torch = None

DTYPES = [("float32", "float32"), ("bfloat16", "bfloat16"),
          ("bfloat16", "float32")]


def make(lib, values, dtype, device, grad=False):
    t = lib.tensor(values).to(device).to(getattr(lib, dtype))
    return t.requires_grad_(True) if grad else t


def cases(device):
    """(label, ampc fn, torch fn or None, ampc output fn, torch output fn)
    per case; the outputs are compared before timing."""
    rng = np.random.default_rng(0)
    img = rng.standard_normal((256, 64, 16, 16)).astype(np.float32)
    seq = rng.standard_normal((4096, 768)).astype(np.float32)
    out = []
    for xdt, pdt in DTYPES:
        for name, x, norm in (("batch_norm (256,64,16,16)", img, "bn"),
                              ("layer_norm (4096,768)", seq, "ln"),
                              ("group_norm (256,64,16,16) g32", img, "gn")):
            c = x.shape[1]
            libs = [ampc] + ([torch] if torch is not None else [])
            fns = {}
            for lib, f in zip(libs, (F, TF if torch is not None else None)):
                xa = make(lib, x, xdt, device, True)
                w = make(lib, np.ones(c, np.float32), pdt, device, True)
                b = make(lib, np.zeros(c, np.float32), pdt, device, True)
                g = make(lib, np.ones(x.shape, np.float32), xdt, device)
                if norm == "bn":
                    rm = make(lib, np.zeros(c, np.float32), pdt, device)
                    rv = make(lib, np.ones(c, np.float32), pdt, device)

                    def fwd(f=f, xa=xa, w=w, b=b, rm=rm, rv=rv):
                        return f.batch_norm(xa, rm, rv, w, b, True, 0.1)
                elif norm == "ln":
                    def fwd(f=f, xa=xa, w=w, b=b, c=c):
                        return f.layer_norm(xa, (c,), w, b)
                else:
                    def fwd(f=f, xa=xa, w=w, b=b):
                        return f.group_norm(xa, 32, w, b)

                def both(fwd=fwd, g=g):
                    fwd().backward(g)

                fns[lib.__name__] = (fwd, both)
            label = f"{name} {xdt}/{pdt}"
            theirs = fns.get("torch", (None, None))
            out.append((label + " fwd", fns["ampc"][0], theirs[0]))
            out.append((label + " fwd+bwd", fns["ampc"][1], theirs[1]))
    return out


def check(fa, ft):
    """The forward outputs agree (to bfloat16's precision)."""
    if ft is None:
        return
    with ampc.no_grad():
        a = fa().float().cpu().numpy()
    with torch.no_grad():
        t = ft().float().cpu().numpy()
    np.testing.assert_allclose(a, t, rtol=2e-2, atol=2e-2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cpu-clock", action="store_true",
                    help="time by the calling thread's CPU time (with "
                    "OMP_NUM_THREADS=1 on the CPU)")
    args = ap.parse_args()
    sync = device_sync(args.device, ampc, torch)
    clock = time.thread_time if args.cpu_clock else time.perf_counter

    print(f"{'case':<52}{'ampc ms':>10}{'torch ms':>10}{'torch/ampc':>12}")
    for label, fa, ft in cases(args.device):
        if label.endswith(" fwd"):
            check(fa, ft)
        print(timed_row(label, fa, ft, args.repeat, sync, 52, 2, clock))


if __name__ == "__main__":
    main()
