"""Training throughput of the lab's SimpleCNN on the CPU, beside torch.

Sections (each a function of the parsed arguments, run in order by
``main``; ``--sections`` picks some):

* ``section_peak``: the machine's float32 peak, measured by ampc's FMA loop
  (``_C._peak_flops``) on one thread and on all, and the AVX512_BF16
  dot-product rate beside it.
* ``section_gemm``: GEMM GFLOP/s per dtype at the lab's shapes (both linear
  layers forward and both backward GEMMs at batch 256, each conv layer as a
  GEMM over the batch) and at 1024^3, as a share of the measured peak and
  beside torch's same op.
* ``section_conv``: conv2d forward and backward of the lab's two layers at
  batch 256, beside torch's convolution and convolution_backward.
* ``section_grouped``: the same for grouped and depthwise convolutions
  (MobileNet's and ResNeXt's 3x3 layers: depthwise, depthwise at stride 2,
  depthwise with a channel multiplier of 2, 4 and 32 groups).
* ``section_pool``: avg_pool2d and adaptive_avg_pool2d forward +
  backward at (batch, 64, 16, 16), beside torch's.
* ``section_activation``: GELU (exact, tanh), SiLU and the other unary
  ops (sigmoid, tanh, exp, log, sin, cos, log1p, expm1, log2, log10, erf,
  erfc, tan and the inverse trigonometric and hyperbolic functions) forward
  + backward on (batch, 4096), beside torch's (atan2, fmod and remainder:
  bench_math.py).
* ``section_unary``: the same unary ops forward only (the kernel alone).
* ``section_layers``: group_norm, interpolate (nearest and bilinear x2),
  a reflect pad, conv1d and conv_transpose2d forward + backward at
  (batch, 64, 16, 16) (conv1d: (batch / 4, 64, 256); conv_transpose2d:
  (batch / 4, 64, 16, 16)), beside torch's.
* ``section_rnn``: LSTM, GRU and RNN (256 -> 256, 2 layers) forward +
  backward on (T=50, N=32), beside torch's.
* ``section_train_step``: one full training step of the lab's SimpleCNN
  (forward, cross-entropy, backward, SGD with momentum) at the lab's batch
  of 256 32x32 images, in float32, float16 (``model.half()``) and bfloat16
  (``model.bfloat16()``), beside CPU torch doing the same work in the same
  process.  First checks that ampc's and torch's models with the same
  weights give the same loss on the same batch.
* ``section_attention``: scaled_dot_product_attention forward + backward
  at (32, 8, 128, 64) (plain and causal), and one training step of a
  TransformerEncoderLayer (d_model 256, 8 heads, batch 32 x 128 tokens,
  SGD), beside torch's with the same weights.

Not a test: run it by hand.

    python benchmarks/bench_train.py [--batch 256] [--repeat 5]
        [--sections peak,gemm,conv,grouped,pool,activation,unary,layers,
                    rnn,train_step,attention]
        [--cpu-clock]

Every result is checked against torch (or float64 NumPy without torch)
before it is timed; times are the best of ``--repeat`` runs.
"""
import argparse
import statistics
import time

import numpy as np

import ampc
import ampc.nn as nn
import ampc.optim as optim

try:
    import torch
except ImportError:  # torch is optional: its columns are left out
    torch = None


def timed(fn, repeat, budget_s=20.0):
    """(best, median) seconds of fn() over ``repeat`` runs after one
    warm-up run, stopping early once ``budget_s`` is spent."""
    fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s:
            break
    return min(times), statistics.median(times)


# ----------------------------------------------------------------------------
# peak, GEMM and conv2d

C = ampc._C
DTYPES = ("float32", "float16", "bfloat16")
# tolerance of a K-term float32-accumulated result rounded to each dtype,
# relative to the result's largest value (as tests/test_linalg.py)
TOL = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 3e-2}


def peak_flops(nthreads=0):
    """Measured float32 FMA FLOP/s at ampc's CPU level (0: all threads),
    each thread timed by its own CPU clock."""
    return C._peak_flops(0.3, "fma", nthreads)


def best_time(fn, args):
    """Best seconds of fn() over ``args.repeat`` runs after a warm-up: wall
    time, or with --cpu-clock the calling thread's CPU time (both libraries
    then run on one thread, so the figure ignores other jobs' load)."""
    clock = time.thread_time if args.cpu_clock else time.perf_counter
    fn()
    best = float("inf")
    for _ in range(args.repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def section_peak(args):
    print("\npeak (measured: independent multiply-add chains in C, each "
          "thread timed by its CPU clock)")
    one, every = peak_flops(1), peak_flops(0)
    bf1, bfall = C._peak_flops(0.3, "bf16_dot", 1), C._peak_flops(
        0.3, "bf16_dot", 0)
    print(f"{'':<24}{'1 thread':>12}{'all threads':>14}")
    print(f"{'float32 FMA GFLOP/s':<24}{one / 1e9:>12.1f}{every / 1e9:>14.1f}")
    if bfall > 0:
        print(f"{'bf16 vdpbf16ps GFLOP/s':<24}{bf1 / 1e9:>12.1f}"
              f"{bfall / 1e9:>14.1f}")
    args.peak = one if args.cpu_clock else every


def ampc_array(t):
    return np.asarray(t.float().numpy(), dtype=np.float64)


def torch_array(t):
    return t.detach().to(torch.float64).numpy()


def check(name, got, want, dtype):
    """Stops the benchmark when ampc's result is not torch's (or NumPy's)
    within the dtype's tolerance."""
    err = np.max(np.abs(got - want), initial=0.0)
    scale = max(1.0, np.max(np.abs(want), initial=0.0))
    if not err <= TOL[dtype] * scale:
        raise SystemExit(f"validation failed: {name} {dtype}: max error "
                         f"{err:.3g} (scale {scale:.3g})")


def gemm_cases(batch):
    """(label, flops, shapes, ampc fn, torch fn) of the lab's GEMMs: fn
    takes the operands (float values made by the caller)."""
    b = batch
    return [
        ("fc1 fwd  x W^T", 2 * b * 4096 * 512, [(b, 4096), (512, 4096)],
         lambda x, w: C.linear(x, w), lambda x, w: torch.nn.functional
         .linear(x, w)),
        ("fc1 dX   dY W", 2 * b * 512 * 4096, [(b, 512), (512, 4096)],
         C.matmul, torch.matmul),
        ("fc1 dW   dY^T X", 2 * 512 * b * 4096, [(b, 512), (b, 4096)],
         lambda d, x: C.matmul(d.transpose(0, 1), x),
         lambda d, x: torch.matmul(d.t(), x)),
        ("fc2 fwd  x W^T", 2 * b * 512 * 10, [(b, 512), (10, 512)],
         lambda x, w: C.linear(x, w), lambda x, w: torch.nn.functional
         .linear(x, w)),
        ("fc2 dX   dY W", 2 * b * 10 * 512, [(b, 10), (10, 512)],
         C.matmul, torch.matmul),
        ("fc2 dW   dY^T X", 2 * 10 * b * 512, [(b, 10), (b, 512)],
         lambda d, x: C.matmul(d.transpose(0, 1), x),
         lambda d, x: torch.matmul(d.t(), x)),
        ("conv1 W col x256", 2 * b * 32 * 27 * 1024,
         [(32, 27), (b, 27, 1024)], C.matmul, torch.matmul),
        ("conv2 W col x256", 2 * b * 64 * 288 * 256,
         [(64, 288), (b, 288, 256)], C.matmul, torch.matmul),
        ("1024^3", 2 * 1024 ** 3, [(1024, 1024), (1024, 1024)],
         C.matmul, torch.matmul),
    ]


def section_gemm(args):
    peak = getattr(args, "peak", None) or peak_flops(1 if args.cpu_clock
                                                     else 0)
    rng = np.random.default_rng(0)
    print(f"\nGEMM, batch {args.batch}: GFLOP/s, % of the measured float32 "
          f"peak ({peak / 1e9:.0f} GFLOP/s; float16/bfloat16 are widened "
          "to float32 while packing)")
    head = f"{'op':<18}{'dtype':<10}{'ampc ms':>9}{'GFLOP/s':>9}{'peak':>6}"
    if torch is not None:
        head += f"{'torch ms':>10}{'GFLOP/s':>9}{'torch/ampc':>12}"
    print(head)
    for label, flops, shapes, fn, tfn in gemm_cases(args.batch):
        vals = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
        for name in DTYPES:
            ops = [ampc.tensor(v).to(getattr(ampc, name)) for v in vals]
            got = ampc_array(fn(*ops))
            if torch is not None:
                tops = [torch.from_numpy(v).to(getattr(torch, name))
                        for v in vals]
                check(label, got, torch_array(tfn(*tops)), name)
            else:
                f64 = [ampc_array(o) for o in ops]
                want = (f64[0] @ f64[1].T if "W^T" in label else
                        f64[0].T @ f64[1] if "^T X" in label else
                        f64[0] @ f64[1])
                check(label, got, want, name)
            best = best_time(lambda: fn(*ops), args)
            row = (f"{label:<18}{name:<10}{best * 1e3:>9.2f}"
                   f"{flops / best / 1e9:>9.0f}{flops / best / peak:>6.0%}")
            if torch is not None:
                tbest = best_time(lambda: tfn(*tops), args)
                row += (f"{tbest * 1e3:>10.2f}{flops / tbest / 1e9:>9.0f}"
                        f"{tbest / best:>11.2f}x")
            print(row, flush=True)


CONV_LAYERS = [("conv1", 3, 32, 32, (False, True, True)),
               ("conv2", 32, 64, 16, (True, True, True))]


def conv_rows(args, layer, shapes, stride, groups, needs, rng):
    """Validates, then times and prints, conv2d forward (with bias) and
    backward of x (N, C, H, W) with w (OC, C/groups, 3, 3), padding 1, in
    every dtype, beside torch's convolution and convolution_backward."""
    (b, c, hw, _), (oc, cg, k, _) = shapes
    x = rng.uniform(-1, 1, (b, c, hw, hw)).astype(np.float32)
    w = rng.uniform(-0.2, 0.2, (oc, cg, k, k)).astype(np.float32)
    bias = rng.uniform(-0.2, 0.2, (oc,)).astype(np.float32)
    ohw = (hw + 2 - k) // stride + 1
    g = rng.uniform(-1, 1, (b, oc, ohw, ohw)).astype(np.float32)
    flops = 2.0 * b * oc * ohw * ohw * cg * k * k
    for name in DTYPES:
        ax, aw, ab, ag = (ampc.tensor(v).to(getattr(ampc, name))
                          for v in (x, w, bias, g))

        def fwd():
            return C.conv2d(ax, aw, ab, stride, 1, 1, False, groups)

        def bwd():
            return C.conv2d_backward(ag, ax, aw, stride, 1, 1, needs,
                                     groups)

        runs = [("fwd", fwd, flops), ("bwd", bwd, flops * sum(needs[:2]))]
        peers = (None, None)
        if torch is not None:
            tdt = getattr(torch, name)
            tx, tw, tb, tg = (torch.from_numpy(v).to(tdt)
                              for v in (x, w, bias, g))

            def tfwd(tx=tx, tw=tw, tb=tb):
                return torch.nn.functional.conv2d(tx, tw, tb, stride=stride,
                                                  padding=1, groups=groups)

            def tbwd(tx=tx, tw=tw, tg=tg):
                return torch.ops.aten.convolution_backward(
                    tg, tx, tw, [oc], [stride, stride], [1, 1], [1, 1],
                    False, [0, 0], groups, list(needs))

            # checked against torch in float64 on the same values: torch's
            # own float16 weight gradients are off by several ulps here
            dx, dw, db, dg = (t.double() for t in (tx, tw, tb, tg))
            check(f"{layer} fwd", ampc_array(fwd()),
                  torch_array(tfwd(dx, dw, db)), name)
            for a, t in zip(bwd(), tbwd(dx, dw, dg)):
                if a is not None:
                    check(f"{layer} bwd", ampc_array(a), torch_array(t),
                          name)
            peers = (tfwd, tbwd)
        for (kind, fn, fl), tfn in zip(runs, peers):
            best = best_time(fn, args)
            row = (f"{layer + ' ' + kind:<22}{name:<10}"
                   f"{best * 1e3:>9.2f}{fl / best / 1e9:>9.1f}")
            if tfn is not None:
                tbest = best_time(tfn, args)
                row += (f"{tbest * 1e3:>10.2f}{fl / tbest / 1e9:>9.1f}"
                        f"{tbest / best:>11.2f}x")
            print(row, flush=True)


def conv_header():
    head = f"{'layer':<22}{'dtype':<10}{'ampc ms':>9}{'GFLOP/s':>9}"
    if torch is not None:
        head += f"{'torch ms':>10}{'GFLOP/s':>9}{'torch/ampc':>12}"
    print(head)


def section_conv(args):
    rng = np.random.default_rng(0)
    b = args.batch
    print(f"\nconv2d 3x3 pad 1, batch {b}: forward (with bias) and "
          "backward (the gradients training needs)")
    conv_header()
    for layer, c, oc, hw, needs in CONV_LAYERS:
        conv_rows(args, layer, ((b, c, hw, hw), (oc, c, 3, 3)), 1, 1, needs,
                  rng)


# (label, C, OC, H = W, stride, groups): MobileNet's depthwise layers (one
# input channel a group; x2: two filters each) and ResNeXt-style groups
GROUPED_LAYERS = [("dw c64 32x32", 64, 64, 32, 1, 64),
                  ("dw c64 32x32 s2", 64, 64, 32, 2, 64),
                  ("dw x2 c32 32x32", 32, 64, 32, 1, 32),
                  ("g4 c64 16x16", 64, 64, 16, 1, 4),
                  ("g32 c128 8x8", 128, 128, 8, 1, 32)]


def section_grouped(args):
    rng = np.random.default_rng(0)
    b = args.batch
    print(f"\ngrouped conv2d 3x3 pad 1, batch {b}: forward (with bias) and "
          "backward (input, weight and bias gradients)")
    conv_header()
    for layer, c, oc, hw, stride, groups in GROUPED_LAYERS:
        conv_rows(args, layer, ((b, c, hw, hw), (oc, c // groups, 3, 3)),
                  stride, groups, (True, True, True), rng)


# ----------------------------------------------------------------------------
# the training step


def simple_cnn(lib_nn, flatten):
    """The lab's SimpleCNN built from ``lib_nn`` (ampc.nn or torch.nn)."""

    class SimpleCNN(lib_nn.Module):
        def __init__(self):
            super().__init__()
            self.features = lib_nn.Sequential(
                lib_nn.Conv2d(3, 32, kernel_size=3, padding=1),
                lib_nn.ReLU(),
                lib_nn.MaxPool2d(kernel_size=2, stride=2),
                lib_nn.Conv2d(32, 64, kernel_size=3, padding=1),
                lib_nn.ReLU(),
                lib_nn.MaxPool2d(kernel_size=2, stride=2),
            )
            self.classifier = lib_nn.Sequential(
                lib_nn.Linear(64 * 8 * 8, 512),
                lib_nn.ReLU(),
                lib_nn.Linear(512, 10),
            )

        def forward(self, x):
            x = self.features(x)
            x = flatten(x, 1)
            return self.classifier(x)

    return SimpleCNN()


def copy_weights(src, dst):
    """ampc model -> torch model, parameter by parameter."""
    with torch.no_grad():
        for (n, p), (tn, tp) in zip(src.named_parameters(),
                                    dst.named_parameters()):
            assert n == tn, (n, tn)
            tp.copy_(torch.from_numpy(p.detach().float().numpy()))


def ampc_step_fn(model, x, y):
    criterion = nn.CrossEntropyLoss()
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def torch_step_fn(model, x, y):
    criterion = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def section_train_step(args):
    batch = args.batch
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, size=batch)
    ampc.manual_seed(0)
    base = simple_cnn(nn, ampc.flatten)
    state = {k: v.clone() for k, v in base.state_dict().items()}

    tbase = None
    if torch is not None:
        tbase = simple_cnn(torch.nn, torch.flatten)
        copy_weights(base, tbase)
        with torch.no_grad():
            tl = torch.nn.CrossEntropyLoss()(tbase(torch.from_numpy(x)),
                                             torch.from_numpy(y)).item()
        with ampc.no_grad():
            al = nn.CrossEntropyLoss()(base(ampc.tensor(x)),
                                       ampc.tensor(y)).item()
        if abs(al - tl) > 1e-4 * max(1.0, abs(tl)):
            raise SystemExit(
                f"validation failed: ampc loss {al!r} != torch loss {tl!r}")
        print(f"validated: float32 loss on one batch, ampc {al:.6f}, "
              f"torch {tl:.6f}")

    print(f"\nSimpleCNN training step (forward + loss + backward + SGD "
          f"momentum), batch {batch}, 3x32x32")
    head = f"{'dtype':<10}{'ampc ms':>10}{'img/s':>9}"
    if torch is not None:
        head += f"{'torch ms':>11}{'img/s':>9}{'torch/ampc':>12}"
    print(head)
    for name in ("float32", "float16", "bfloat16"):
        dt = getattr(ampc, name)
        model = simple_cnn(nn, ampc.flatten)
        model.load_state_dict(state)
        model.to(dt)
        step = ampc_step_fn(model, ampc.tensor(x).to(dt), ampc.tensor(y))
        best, _ = timed(step, args.repeat)
        row = f"{name:<10}{best * 1e3:>10.1f}{batch / best:>9.0f}"
        if torch is not None:
            tdt = getattr(torch, name)
            tmodel = simple_cnn(torch.nn, torch.flatten)
            tmodel.load_state_dict(tbase.state_dict())
            tmodel.to(tdt)
            tstep = torch_step_fn(tmodel, torch.from_numpy(x).to(tdt),
                                  torch.from_numpy(y))
            tbest, _ = timed(tstep, args.repeat)
            row += (f"{tbest * 1e3:>11.1f}{batch / tbest:>9.0f}"
                    f"{tbest / best:>11.2f}x")
        print(row, flush=True)


def section_pool(args):
    """Average pooling forward + backward at a ResNet stage's shape, each
    validated against torch (or NumPy's mean for the global pool)."""
    b = args.batch
    shape = (b, 64, 16, 16)
    print(f"\naverage pooling {shape}: forward + backward, ms")
    print(f"{'op':<34}{'ampc':>8}{'torch':>8}{'ampc/torch':>12}")
    xs = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    cases = [("avg_pool2d 2x2", lambda F, x: F.avg_pool2d(x, 2)),
             ("avg_pool2d 3x3 s2 p1", lambda F, x: F.avg_pool2d(x, 3, 2, 1)),
             ("adaptive_avg_pool2d 1", lambda F, x: F.adaptive_avg_pool2d(
                 x, 1)),
             ("adaptive_avg_pool2d (5, 7)", lambda F, x: F.adaptive_avg_pool2d(
                 x, (5, 7)))]
    for name, op in cases:
        x = ampc.tensor(xs, requires_grad=True)
        y = op(ampc.nn.functional, x)
        if torch is not None:
            tx = torch.from_numpy(xs).requires_grad_()
            want = op(torch.nn.functional, tx).detach().numpy()
        else:
            want = xs.mean(axis=(2, 3), keepdims=True) if name.endswith(
                " 1") else None
        if want is not None:
            check(name, y.detach().numpy(), want, "float32")
        g = ampc.ones(*y.shape)

        def step(x=x, g=g):
            op(ampc.nn.functional, x).backward(g)
        ms = best_time(step, args) * 1e3
        row = f"{name:<34}{ms:>8.2f}"
        if torch is not None:
            tg = torch.ones(*y.shape)

            def tstep(tx=tx, tg=tg):
                op(torch.nn.functional, tx).backward(tg)
            tms = best_time(tstep, args) * 1e3
            row += f"{tms:>8.2f}{ms / tms:>12.2f}"
        print(row, flush=True)


def _activation_cases():
    """(label, ampc function, torch function name, exact float64 formula,
    input domain for _on_domain) of the activation section."""
    import math
    erfc = np.vectorize(math.erfc)
    F = ampc.nn.functional
    return (
        ("gelu", F.gelu, "nn.functional.gelu",
         lambda v: v * 0.5 * erfc(-v / math.sqrt(2.0)), None),
        ("gelu tanh", lambda x: F.gelu(x, approximate="tanh"),
         "nn.functional.gelu", None, None),
        ("silu", F.silu, "nn.functional.silu",
         lambda v: v / (1.0 + np.exp(-v)), None),
        ("sigmoid", ampc.sigmoid, "sigmoid",
         lambda v: 1.0 / (1.0 + np.exp(-v)), None),
        ("tanh", ampc.tanh, "tanh", np.tanh, None),
        ("exp", ampc.exp, "exp", np.exp, None),
        ("log", ampc.log, "log", np.log, "positive"),
        ("sin", ampc.sin, "sin", np.sin, None),
        ("cos", ampc.cos, "cos", np.cos, None),
        ("log1p", ampc.log1p, "log1p", np.log1p, "positive"),
        ("expm1", ampc.expm1, "expm1", np.expm1, None),
        ("log2", ampc.log2, "log2", np.log2, "positive"),
        ("log10", ampc.log10, "log10", np.log10, "positive"),
        ("erf", ampc.erf, "erf", np.vectorize(math.erf), None),
        ("erfc", ampc.erfc, "erfc", erfc, None),
        ("tan", ampc.tan, "tan", np.tan, None),
        ("asin", ampc.asin, "asin", np.arcsin, "unit"),
        ("acos", ampc.acos, "acos", np.arccos, "unit"),
        ("atan", ampc.atan, "atan", np.arctan, None),
        ("sinh", ampc.sinh, "sinh", np.sinh, None),
        ("cosh", ampc.cosh, "cosh", np.cosh, None),
        ("asinh", ampc.asinh, "asinh", np.arcsinh, None),
        ("acosh", ampc.acosh, "acosh", np.arccosh, "above 1"),
        ("atanh", ampc.atanh, "atanh", np.arctanh, "unit"),
    )


def _on_domain(normal, domain):
    """Standard normal float32 samples moved onto an op's domain: all of
    them (None), positive, inside (-1, 1) or above 1."""
    if domain == "positive":
        return np.abs(normal) + np.float32(0.01)
    if domain == "unit":
        return np.tanh(normal) * np.float32(0.99)
    if domain == "above 1":
        return np.abs(normal) + np.float32(1.01)
    return normal


def _torch_fn(dotted, label):
    fn = torch
    for part in dotted.split("."):
        fn = getattr(fn, part)
    if label == "gelu tanh":
        return lambda x: fn(x, approximate="tanh")
    return fn


def section_activation(args):
    """GELU (exact and tanh), SiLU, sigmoid, tanh, exp, log and the unary
    math (sin, cos, log1p, expm1, log2, log10, erf, erfc, tan, asin, ...)
    forward + backward on (batch, 4096) float32, each validated against
    torch (or the exact formula)."""
    shape = (args.batch, 4096)
    print(f"\nactivations {shape} float32: forward + backward, ms")
    print(f"{'op':<34}{'ampc':>8}{'torch':>8}{'ampc/torch':>12}")
    normal = np.random.default_rng(0).standard_normal(shape).astype(
        np.float32)
    for label, fn, tname, exact, domain in _activation_cases():
        xs = _on_domain(normal, domain)
        x = ampc.tensor(xs, requires_grad=True)
        y = fn(x)
        if torch is not None:
            tfn = _torch_fn(tname, label)
            tx = torch.from_numpy(xs).requires_grad_()
            check(label, y.detach().numpy(), tfn(tx).detach().numpy(),
                  "float32")
        elif exact is not None:
            check(label, y.detach().numpy()[:64], exact(
                xs[:64].astype(np.float64)), "float32")
        g = ampc.ones(*shape)

        def step(x=x, g=g, fn=fn):
            fn(x).backward(g)
        ms = best_time(step, args) * 1e3
        row = f"{label:<34}{ms:>8.2f}"
        if torch is not None:
            tg = torch.ones(*shape)

            def tstep(tx=tx, tg=tg, tfn=tfn):
                tfn(tx).backward(tg)
            tms = best_time(tstep, args) * 1e3
            row += f"{tms:>8.2f}{ms / tms:>12.2f}"
        print(row, flush=True)


def section_unary(args):
    """The unary element-wise ops of the activation section, forward only
    (the kernel alone), on (batch, 4096) float32 beside torch's."""
    shape = (args.batch, 4096)
    print(f"\nunary ops {shape} float32: forward, ms")
    print(f"{'op':<34}{'ampc':>8}{'torch':>8}{'ampc/torch':>12}")
    normal = np.random.default_rng(0).standard_normal(shape).astype(
        np.float32)
    for label, fn, tname, exact, domain in _activation_cases():
        if "." in tname:
            continue                    # the nn.functional activations
        xs = _on_domain(normal, domain)
        x = ampc.tensor(xs)
        ms = best_time(lambda x=x, fn=fn: fn(x), args) * 1e3
        row = f"{label:<34}{ms:>8.2f}"
        if torch is not None:
            tx, tfn = torch.from_numpy(xs), _torch_fn(tname, label)
            check(label, fn(x).numpy(), tfn(tx).numpy(), "float32")
            tms = best_time(lambda tx=tx, tfn=tfn: tfn(tx), args) * 1e3
            row += f"{tms:>8.2f}{ms / tms:>12.2f}"
        print(row, flush=True)


def _layer_cases(b):
    """(label, input shape, op(F, x, params), params shapes) of the layers
    section: a ResNet stage's image and a speech/text model's sequence."""
    return (
        ("group_norm 32 groups", (b, 64, 16, 16),
         lambda F, x, p: F.group_norm(x, 32, *p), [(64,), (64,)]),
        ("interpolate nearest x2", (b, 64, 16, 16),
         lambda F, x, p: F.interpolate(x, scale_factor=2), []),
        ("interpolate bilinear x2", (b, 64, 16, 16),
         lambda F, x, p: F.interpolate(x, scale_factor=2, mode="bilinear"),
         []),
        ("pad reflect 1", (b, 64, 16, 16),
         lambda F, x, p: F.pad(x, (1, 1, 1, 1), mode="reflect"), []),
        ("conv1d 64->64 k3 p1", (b // 4, 64, 256),
         lambda F, x, p: F.conv1d(x, *p, padding=1), [(64, 64, 3), (64,)]),
        ("conv_transpose2d 64->32 k4 s2 p1", (b // 4, 64, 16, 16),
         lambda F, x, p: F.conv_transpose2d(x, *p, stride=2, padding=1),
         [(64, 32, 4, 4), (32,)]),
    )


def section_layers(args):
    """group_norm, interpolate (nearest, bilinear), reflect pad, conv1d and
    conv_transpose2d forward + backward (the input's and parameters'
    gradients) in float32, each validated against torch."""
    print("\nlayers float32: forward + backward, ms")
    print(f"{'op':<34}{'ampc':>8}{'torch':>8}{'ampc/torch':>12}")
    rng = np.random.default_rng(0)
    for name, shape, op, pshapes in _layer_cases(args.batch):
        xs = rng.standard_normal(shape).astype(np.float32)
        ps = [rng.standard_normal(s).astype(np.float32) * 0.1
              for s in pshapes]
        x = ampc.tensor(xs, requires_grad=True)
        p = [ampc.tensor(v, requires_grad=True) for v in ps]
        y = op(ampc.nn.functional, x, p)
        g = ampc.ones(*y.shape)

        def step(x=x, p=p, g=g, op=op):
            op(ampc.nn.functional, x, p).backward(g)
        ms = best_time(step, args) * 1e3
        row = f"{name:<34}{ms:>8.2f}"
        if torch is not None:
            tx = torch.from_numpy(xs).requires_grad_()
            tp = [torch.from_numpy(v).requires_grad_() for v in ps]
            check(name, y.detach().numpy(),
                  op(torch.nn.functional, tx, tp).detach().numpy(),
                  "float32")
            tg = torch.ones(*y.shape)

            def tstep(tx=tx, tp=tp, tg=tg, op=op):
                op(torch.nn.functional, tx, tp).backward(tg)
            tms = best_time(tstep, args) * 1e3
            row += f"{tms:>8.2f}{ms / tms:>12.2f}"
        print(row, flush=True)


def section_rnn(args):
    """The recurrent layers (256 -> 256, 2 layers) forward + backward on
    (T=50, N=32, 256) float32, with torch's weights, each validated against
    torch first."""
    shape = (50, 32, 256)
    print(f"\nrecurrent layers 256->256 x2 on {shape} float32: forward + "
          "backward, ms")
    print(f"{'op':<34}{'ampc':>8}{'torch':>8}{'ampc/torch':>12}")
    xs = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for name in ("LSTM", "GRU", "RNN"):
        model = getattr(nn, name)(256, 256, 2)
        x = ampc.tensor(xs, requires_grad=True)
        if torch is not None:
            tmodel = getattr(torch.nn, name)(256, 256, 2)
            model.load_state_dict({k: ampc.tensor(v.numpy()) for k, v in
                                   tmodel.state_dict().items()})
            tx = torch.from_numpy(xs).requires_grad_()
            check(name, model(x)[0].detach().numpy(),
                  tmodel(tx)[0].detach().numpy(), "float32")

        def step(x=x, model=model):
            model(x)[0].sum().backward()
        ms = best_time(step, args) * 1e3
        row = f"{name:<34}{ms:>8.2f}"
        if torch is not None:
            def tstep(tx=tx, tmodel=tmodel):
                tmodel(tx)[0].sum().backward()
            tms = best_time(tstep, args) * 1e3
            row += f"{tms:>8.2f}{ms / tms:>12.2f}"
        print(row, flush=True)


def _encoder_step(lib, layer, x, y):
    opt = lib.optim.SGD(layer.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(layer(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def section_attention(args):
    """SDPA forward + backward and a TransformerEncoderLayer training step
    (dropout 0, batch_first), float32, each checked against torch."""
    print("\nattention, float32: ms")
    print(f"{'op':<44}{'ampc':>8}{'torch':>8}{'ampc/torch':>12}")
    rng = np.random.default_rng(0)
    qkv = [rng.standard_normal((32, 8, 128, 64)).astype(np.float32)
           for _ in range(3)]
    libs = [ampc] + ([torch] if torch is not None else [])
    for causal in (False, True):
        row = f"{'sdpa fwd+bwd (32, 8, 128, 64)' + (' causal' * causal):<44}"
        outs, times = [], []
        for lib in libs:
            x = [lib.tensor(a, requires_grad=True) for a in qkv]

            def step(lib=lib, x=x):
                out = lib.nn.functional.scaled_dot_product_attention(
                    *x, is_causal=causal)
                out.sum().backward()
                return out
            outs.append(step().detach().numpy())
            times.append(best_time(step, args) * 1e3)
        if len(outs) == 2:
            check("sdpa", outs[0], outs[1], "float32")
        print(row + "".join(f"{t:>8.1f}" for t in times)
              + (f"{times[0] / times[1]:>12.2f}" if len(times) == 2 else ""))
    xs = rng.standard_normal((32, 128, 256)).astype(np.float32)
    ys = rng.standard_normal((32, 128, 256)).astype(np.float32)
    ampc.manual_seed(0)
    layers = [lib.nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0,
                                             batch_first=True)
              for lib in libs]
    if len(libs) == 2:
        copy_weights(layers[0], layers[1])
    steps = [_encoder_step(lib, layer, lib.tensor(xs), lib.tensor(ys))
             for lib, layer in zip(libs, layers)]
    losses = [s().item() for s in steps]
    if len(losses) == 2:
        check("encoder layer loss", np.array(losses[0]), losses[1],
              "float32")
    times = [best_time(s, args) * 1e3 for s in steps]
    print(f"{'TransformerEncoderLayer step (32, 128, 256)':<44}"
          + "".join(f"{t:>8.1f}" for t in times)
          + (f"{times[0] / times[1]:>12.2f}" if len(times) == 2 else ""),
          flush=True)


SECTIONS = {"peak": section_peak, "gemm": section_gemm, "conv": section_conv,
            "grouped": section_grouped, "pool": section_pool,
            "activation": section_activation, "unary": section_unary,
            "layers": section_layers, "rnn": section_rnn,
            "train_step": section_train_step,
            "attention": section_attention}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help="comma-separated: " + ", ".join(SECTIONS))
    p.add_argument("--cpu-clock", action="store_true",
                   help="peak, gemm and conv on one thread each, timed by "
                        "the thread's CPU clock (for a shared machine)")
    args = p.parse_args()
    if args.cpu_clock:
        ampc.set_num_threads(1)
        if torch is not None:
            torch.set_num_threads(1)
    print(f"ampc {ampc.__version__}, CPU level "
          f"{ampc._C.cpu_capability()}"
          + (f"; torch {torch.__version__}, {torch.get_num_threads()} "
             "threads" if torch is not None else "; torch not installed"))
    for name in args.sections.split(","):
        if name not in SECTIONS:
            p.error(f"unknown section {name!r}; the sections are "
                    f"{', '.join(SECTIONS)}")
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
