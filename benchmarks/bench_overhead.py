"""Host time of a training step: the lab's SimpleCNN op sequence (conv,
relu, pool twice, flatten, two linears, cross-entropy, backward, SGD with
momentum) on tiny tensors, so that the kernels' own work is negligible and
what is measured is the framework around them: Python, autograd, autocast,
GradScaler, argument checks and, on a GPU, kernel launches.  ampc beside
torch in the same process, float32 and AMP (bfloat16; float16 with
GradScaler), in microseconds per step.  On a GPU an eager step at the
lab's batch size is mostly this time, so it decides how much AMP can gain
there without a CUDA graph.  Not a test: run it by hand.

    python benchmarks/bench_overhead.py [--device cpu|cuda] [--steps 300]
"""
import argparse
import importlib
import time


def make_step(lib, device, precision):
    T = importlib.import_module(lib)
    nn = T.nn
    T.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(2, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 10)).to(device)
    opt = T.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    crit = nn.CrossEntropyLoss()
    x = T.randn(1, 3, 4, 4, device=device)
    y = T.randint(0, 10, (1,), device=device)
    dtype = {"bf16": T.bfloat16, "fp16": T.float16}.get(precision)
    scaler = T.amp.GradScaler(device) if precision == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with T.autocast(device, dtype=dtype or T.bfloat16,
                        enabled=dtype is not None):
            loss = crit(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    sync = (T.cuda.synchronize if device.startswith("cuda")
            else (lambda: None))
    return step, sync


def per_step_us(step, sync, steps, repeat=5):
    for _ in range(20):
        step()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args(argv)
    libs = ["ampc"]
    try:
        import torch
        if not args.device.startswith("cuda") or torch.cuda.is_available():
            libs.append("torch")
    except ImportError:
        pass
    print(f"host time per training step, {args.device}, µs (best of 5 x "
          f"{args.steps} steps)")
    print(f"{'precision':<12}" + "".join(f"{lib:>10}" for lib in libs)
          + ("  torch/ampc" if len(libs) > 1 else ""))
    for precision in ("fp32", "bf16", "fp16"):
        times = [per_step_us(*make_step(lib, args.device, precision),
                             args.steps) for lib in libs]
        ratio = f"{times[1] / times[0]:12.2f}" if len(times) > 1 else ""
        print(f"{precision:<12}" + "".join(f"{t:10.1f}" for t in times)
              + ratio)


if __name__ == "__main__":
    main()
