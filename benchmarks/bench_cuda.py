"""GPU benchmarks of ampc beside torch, on the same GPU in the same run.

1. The lab's training step (SimpleCNN from ampc/lab/model.py, batch 256,
   data already on the GPU, SGD momentum 0.9) in FP32, AMP float16
   (autocast + GradScaler) and AMP bfloat16 (autocast), eagerly and
   replayed from a CUDA graph (the graphed step uses SGD(fused=True), so
   the scaler's skip decision stays on the device and the step has no host
   sync).  ms per step.  The AMP steps again with the weights' 16-bit
   copies kept (``ampc.amp.keep_weight_casts``), so that no weight is cast.
2. The fused unscale-and-inf-check (``_amp_foreach_non_finite_check_and_
   unscale_``: every gradient multiplied by 1/scale in place, inf/NaN
   flagged, one launch) in GB/s (bytes read + written), against a
   device-to-device copy of the same bytes.
3. float16 GEMM at 8192^3 (``ampc.matmul``) in TFLOP/s.

Each ampc variant is validated before it is timed (against the CPU, or
NumPy).  Timing: warm-up, then ``--repeat`` samples, each the mean of a
block of back-to-back calls between two ampc.cuda.synchronize() (torch:
torch.cuda.synchronize()); the median sample is reported.  The issue's
targets are printed beside the measurements.  Not a test: run it by hand
or through tools/gpu_check.sh.

    python benchmarks/bench_cuda.py [--quick] [--repeat 7] [--batch 256]
                                    [--json PATH]
"""
import argparse
import inspect
import json
import statistics
import sys
import time

import numpy as np

import ampc

try:
    import torch
    if not torch.cuda.is_available():
        torch = None
except ImportError:  # torch is optional: its columns are left out
    torch = None

# the lab's SimpleCNN: conv1 w/b, conv2 w/b, fc1 w/b, fc2 w/b
LAB_SIZES = (864, 32, 18432, 64, 2097152, 512, 5120, 10)
PRECISIONS = ("fp32", "fp16", "bf16")

TARGET_AMP = 1.5        # AMP step at least 1.5x faster than FP32
TARGET_UNSCALE = 0.80   # fused unscale at 80% of copy bandwidth


# ----------------------------------------------------------------------------
# timing


def median_time(fn, sync, repeat, inner):
    """Median over ``repeat`` samples of the mean time of ``inner``
    back-to-back calls of fn, bracketed by sync() (seconds)."""
    fn()
    sync()
    samples = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def ampc_sync():
    ampc.cuda.synchronize()


def torch_sync():
    torch.cuda.synchronize()


def has_fused_sgd():
    """True when ampc.optim.SGD takes fused= (the device-side skip)."""
    return "fused" in inspect.signature(ampc.optim.SGD).parameters


# ----------------------------------------------------------------------------
# 1. the training step


def torch_simple_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(4096, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10))


def make_step(lib, model, x, y, precision, fused, device="cuda",
              keep=False):
    """(step, body, optimizer) for one SimpleCNN training step of ``lib``
    (ampc or torch) in ``precision`` on ``device`` ("cuda" or "cpu"):
    ``step`` zeroes the gradients then runs ``body`` (forward, backward,
    optimizer step, scaler update), which is what a graph captures.
    ``keep``: ampc keeps the weights' 16-bit copies
    (``ampc.amp.keep_weight_casts``), rewritten by the SGD step."""
    kwargs = {"fused": True} if fused else {}
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, **kwargs)
    crit = lib.nn.CrossEntropyLoss()
    scaler = lib.amp.GradScaler(device) if precision == "fp16" else None
    dtype = {"fp16": lib.float16, "bf16": lib.bfloat16}.get(precision)
    if keep:
        ampc.amp.keep_weight_casts(model, dtype=dtype)
    # NOTE: torch's autocast weight cache must be off under graph capture
    # (its cached casts would outlive the capture); ampc's cache lives
    # only inside one autocast region, so it needs no such switch.
    ac_kwargs = {"cache_enabled": False} if lib is not ampc else {}

    def body():
        with lib.autocast(device, dtype=dtype or lib.bfloat16,
                          enabled=dtype is not None, **ac_kwargs):
            loss = crit(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss

    def step():
        opt.zero_grad(set_to_none=True)
        return body()
    return step, body, opt


def graphed(lib, step, body, opt):
    """A replay function for ``body`` captured in a CUDA graph after three
    eager warm-up steps, as torch's documentation does it."""
    if lib is torch:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            body()
    else:
        for _ in range(3):
            step()
        g = ampc.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with ampc.cuda.graph(g):
            body()
    return g.replay


def batch_data(batch):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    ys = rng.integers(0, 10, batch).astype(np.int64)
    return xs, ys


def validate_step(xs, ys, precision):
    """ampc's first training-step loss on the GPU equals the CPU's (same
    weights, same batch) within the precision's tolerance."""
    from ampc.lab.model import SimpleCNN
    losses = []
    for dev in ("cpu", "cuda"):
        ampc.manual_seed(0)
        model = SimpleCNN().to(dev)
        step, _, _ = make_step(ampc, model, ampc.tensor(xs, device=dev),
                               ampc.tensor(ys, device=dev), precision,
                               fused=False, device=dev)
        # float32 convolutions without TF32 (on by default, as in torch),
        # so the check is as tight as the float32 sums allow
        with ampc.backends.cudnn.flags(allow_tf32=False):
            losses.append(step().item())
    tol = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2}[precision]
    if not abs(losses[0] - losses[1]) <= tol * max(1.0, abs(losses[0])):
        raise AssertionError(
            f"{precision} step: loss {losses[1]} on cuda, {losses[0]} on "
            "cpu")


def training_steps(batch, repeat, inner, log):
    xs, ys = batch_data(batch)
    fused = has_fused_sgd()
    rows = {}
    for precision in PRECISIONS:
        row = rows[precision] = {}
        try:
            training_step(precision, xs, ys, fused, repeat, inner, log, row)
        except Exception as e:  # noqa: BLE001 - the other figures go on
            row["error"] = f"{type(e).__name__}: {e}"
            log(f"  {precision} step: {row['error']}")
    return rows, fused


def training_step(precision, xs, ys, fused, repeat, inner, log, row):
    """Fills ``row`` with one precision's figures (what was measured stays
    when a later part raises)."""
    from ampc.lab.model import SimpleCNN
    validate_step(xs[:16], ys[:16], precision)
    ampc.manual_seed(0)
    model = SimpleCNN().to("cuda")
    x = ampc.tensor(xs, device="cuda")
    y = ampc.tensor(ys, device="cuda")
    step, body, opt = make_step(ampc, model, x, y, precision, fused)
    row["ampc_eager_ms"] = median_time(step, ampc_sync, repeat,
                                       inner) * 1e3
    try:
        replay = graphed(ampc, step, body, opt)
        row["ampc_graph_ms"] = median_time(replay, ampc_sync, repeat,
                                           inner) * 1e3
    except RuntimeError as e:
        row["ampc_graph_ms"] = None
        log(f"  ampc {precision} graph: not captured: {e}")
    if precision != "fp32":
        kept_steps(precision, xs, ys, fused, repeat, inner, log, row)
    if torch is not None:
        torch.manual_seed(0)
        tmodel = torch_simple_cnn().cuda()
        tx = torch.from_numpy(xs).cuda()
        ty = torch.from_numpy(ys).cuda()
        try:
            made = make_step(torch, tmodel, tx, ty, precision,
                             fused=True)
        except (TypeError, RuntimeError):
            # an older torch without fused SGD on CUDA
            made = make_step(torch, tmodel, tx, ty, precision,
                             fused=False)
        tstep, tbody, topt = made
        row["torch_eager_ms"] = median_time(tstep, torch_sync, repeat,
                                            inner) * 1e3
        try:
            treplay = graphed(torch, tstep, tbody, topt)
            row["torch_graph_ms"] = median_time(
                treplay, torch_sync, repeat, inner) * 1e3
        except RuntimeError as e:
            row["torch_graph_ms"] = None
            log(f"  torch {precision} graph: not captured: {e}")


def kept_steps(precision, xs, ys, fused, repeat, inner, log, row):
    """The AMP step again with kept weight casts: eager and graphed ms,
    and the copies' bytes."""
    from ampc.lab.model import SimpleCNN
    ampc.manual_seed(0)
    model = SimpleCNN().to("cuda")
    step, body, opt = make_step(ampc, model, ampc.tensor(xs, device="cuda"),
                                ampc.tensor(ys, device="cuda"), precision,
                                fused, keep=True)
    row["kept_eager_ms"] = median_time(step, ampc_sync, repeat, inner) * 1e3
    try:
        replay = graphed(ampc, step, body, opt)
        row["kept_graph_ms"] = median_time(replay, ampc_sync, repeat,
                                           inner) * 1e3
    except RuntimeError as e:
        log(f"  ampc {precision} kept-casts graph: not captured: {e}")
    # the copies go with the model's parameters


# ----------------------------------------------------------------------------
# 2. the fused unscale-and-check against a device-to-device copy


def validate_unscale(dtype):
    """The CUDA kernel's output and found_inf equal the CPU kernel's, with
    inf planted in the last element of the last tensor."""
    rng = np.random.default_rng(1)
    vals = [rng.standard_normal(n).astype(np.float32) for n in LAB_SIZES]
    vals[-1][-1] = np.inf
    out = {}
    for dev in ("cpu", "cuda"):
        grads = [ampc.tensor(v, device=dev).to(dtype) for v in vals]
        found = ampc.zeros((), device=dev)
        inv = ampc.full((), 0.25, device=dev)
        ampc._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        out[dev] = ([g.float().cpu().numpy() for g in grads], found.item())
    assert out["cuda"][1] == out["cpu"][1] == 1.0, "found_inf differs"
    for a, b in zip(out["cuda"][0], out["cpu"][0]):
        assert np.array_equal(a, b, equal_nan=True), "unscale differs"


def unscale_bandwidth(total, dtype_name, repeat, inner):
    """GB/s of the fused unscale over 8 tensors of ``total`` elements in
    all (the lab's proportions), of a D2D copy of the same bytes, and
    torch's same kernel."""
    dtype = getattr(ampc, dtype_name)
    validate_unscale(dtype)
    scale = total / sum(LAB_SIZES)
    sizes = [max(1, int(n * scale)) for n in LAB_SIZES]
    n = sum(sizes)
    nbytes = 2 * n * dtype.itemsize          # read + write
    grads = [ampc.ones(k, dtype=dtype, device="cuda") for k in sizes]
    found = ampc.zeros((), device="cuda")
    # Alternate x0.5 and x2 so the values neither drift nor denormalise.
    invs = [ampc.full((), 0.5, device="cuda"),
            ampc.full((), 2.0, device="cuda")]
    state = {"i": 0}

    def unscale():
        state["i"] ^= 1
        ampc._amp_foreach_non_finite_check_and_unscale_(grads, found,
                                                        invs[state["i"]])

    row = {"elements": n, "dtype": dtype_name}
    row["ampc_GBs"] = nbytes / median_time(unscale, ampc_sync, repeat,
                                           inner) / 1e9
    src = ampc.ones(n, dtype=dtype, device="cuda")
    dst = ampc.empty(n, dtype=dtype, device="cuda")
    row["copy_GBs"] = nbytes / median_time(lambda: dst.copy_(src),
                                           ampc_sync, repeat, inner) / 1e9
    if torch is not None:
        tdt = getattr(torch, dtype_name)
        tg = [torch.ones(k, dtype=tdt, device="cuda") for k in sizes]
        tf = torch.zeros((), device="cuda")
        th = [torch.full((), 0.5, device="cuda"),
              torch.full((), 2.0, device="cuda")]

        def tunscale():
            state["i"] ^= 1
            torch._amp_foreach_non_finite_check_and_unscale_(
                tg, tf, th[state["i"]])
        row["torch_GBs"] = nbytes / median_time(tunscale, torch_sync,
                                                repeat, inner) / 1e9
        tsrc = torch.ones(n, dtype=tdt, device="cuda")
        tdst = torch.empty_like(tsrc)
        row["torch_copy_GBs"] = nbytes / median_time(
            lambda: tdst.copy_(tsrc), torch_sync, repeat, inner) / 1e9
    return row


# ----------------------------------------------------------------------------
# 3. float16 GEMM


def validate_gemm():
    """A float16 product of odd sizes on the GPU against NumPy's float64
    product of the same (rounded) operands."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((257, 129)).astype(np.float16)
    b = rng.standard_normal((129, 65)).astype(np.float16)
    got = ampc.matmul(ampc.tensor(a, device="cuda"),
                      ampc.tensor(b, device="cuda")).float().cpu().numpy()
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(got - want) / (np.abs(want) + 1.0)
    assert err.max() < 1e-2, f"fp16 GEMM off by {err.max()}"


def gemm_tflops(size, repeat, inner):
    validate_gemm()
    flops = 2.0 * size ** 3
    a = ampc.randn(size, size, device="cuda").half()
    b = ampc.randn(size, size, device="cuda").half()
    row = {"size": size}
    row["ampc_TFLOPs"] = flops / median_time(lambda: ampc.matmul(a, b),
                                             ampc_sync, repeat, inner) / 1e12
    if torch is not None:
        ta = torch.randn(size, size, device="cuda", dtype=torch.float16)
        tb = torch.randn(size, size, device="cuda", dtype=torch.float16)
        row["torch_TFLOPs"] = flops / median_time(
            lambda: torch.matmul(ta, tb), torch_sync, repeat, inner) / 1e12
    return row


# ----------------------------------------------------------------------------
# the report


def _f(v, fmt):
    """v formatted by fmt ("9.2f"), or "n/a" in the same width."""
    if v is None:
        width = fmt.split(".")[0]
        return format("n/a", ">" + width) if width else "n/a"
    return format(v, fmt)


def _mark(ok):
    return "n/a" if ok is None else ("MET" if ok else "MISSED")


def report(steps, fused, unscale, gemm, batch, out):
    def say(text=""):
        print(text, file=out)

    say(f"\n== SimpleCNN training step, batch {batch}, data on the GPU "
        "(ms per step, median) ==")
    if not fused:
        say("  (ampc.optim.SGD has no fused=True: the graphed AMP fp16 step "
            "syncs in scaler.step and may not capture)")
    head = (f"{'precision':<10}{'ampc eager':>11}{'ampc graph':>11}"
            f"{'torch eager':>12}{'torch graph':>12}{'AMP speed-up':>14}")
    say(head)
    fp32 = steps["fp32"]
    targets = []
    for name, r in steps.items():
        speed = None
        if r.get("error"):
            say(f"{name:<10}failed: {r['error'][:200]}")
        if name != "fp32" and r.get("ampc_eager_ms") and \
                fp32.get("ampc_eager_ms"):
            speed = fp32["ampc_eager_ms"] / r["ampc_eager_ms"]
            targets.append((f"AMP {name} >= {TARGET_AMP}x FP32 (eager)",
                            speed, speed >= TARGET_AMP))
        if name != "fp32" and r.get("ampc_graph_ms") and \
                fp32.get("ampc_graph_ms"):
            gspeed = fp32["ampc_graph_ms"] / r["ampc_graph_ms"]
            targets.append((f"AMP {name} >= {TARGET_AMP}x FP32 (graph)",
                            gspeed, gspeed >= TARGET_AMP))
        say(f"{name:<10}{_f(r.get('ampc_eager_ms'), '11.2f')}"
            f"{_f(r.get('ampc_graph_ms'), '11.2f')}"
            f"{_f(r.get('torch_eager_ms'), '12.2f')}"
            f"{_f(r.get('torch_graph_ms'), '12.2f')}"
            f"{_f(speed, '13.2f') + 'x' if speed else '':>14}")
        for mode in ("eager", "graph"):
            mine, theirs = r.get(f"ampc_{mode}_ms"), r.get(f"torch_{mode}_ms")
            if mine and theirs:
                targets.append((f"ampc {name} {mode} step faster than torch",
                                theirs / mine, mine < theirs))
    say("\n== AMP step with kept weight casts (ampc.amp.keep_weight_casts;"
        " ms, and the ratio to the step above) ==")
    for name, r in steps.items():
        for mode in ("eager", "graph"):
            kept, plain = r.get(f"kept_{mode}_ms"), r.get(f"ampc_{mode}_ms")
            if kept:
                say(f"{name:<10}{mode:<7}{kept:9.2f}"
                    f"{_f(plain / kept if plain else None, '9.2f')}x")
    say("\n== fused unscale-and-inf-check vs device-to-device copy "
        "(GB/s, read + write) ==")
    say(f"{'dtype':<10}{'elements':>12}{'ampc':>9}{'copy':>9}{'ampc/copy':>11}"
        f"{'torch':>9}{'torch copy':>11}")
    for r in unscale:
        frac = r["ampc_GBs"] / r["copy_GBs"]
        targets.append((f"unscale {r['dtype']} >= {TARGET_UNSCALE:.0%} of "
                        "copy bandwidth", frac, frac >= TARGET_UNSCALE))
        say(f"{r['dtype']:<10}{r['elements']:>12,}{r['ampc_GBs']:>9.0f}"
            f"{r['copy_GBs']:>9.0f}{frac:>11.2f}"
            f"{_f(r.get('torch_GBs'), '9.0f')}"
            f"{_f(r.get('torch_copy_GBs'), '11.0f')}")
    say(f"\n== float16 GEMM {gemm['size']}^3 (TFLOP/s) ==")
    if gemm.get("error"):
        say(f"failed: {gemm['error'][:200]}")
    else:
        say(f"ampc {gemm['ampc_TFLOPs']:.0f}   torch "
            f"{_f(gemm.get('torch_TFLOPs'), '.0f')}")
    say("\n== the issue's targets ==")
    for label, value, ok in targets:
        say(f"  {label:<48} {value:7.2f}  {_mark(ok)}")
    return targets


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="fewer repeats and smaller unscale buffers (for "
                    "tools/gpu_check.sh: about a minute)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="timed samples per figure (default 7; quick 3)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", metavar="PATH",
                    help="also write every figure to PATH")
    args = ap.parse_args(argv)
    if not ampc.cuda.is_available():
        print("bench_cuda.py: no CUDA GPU is available (ampc.cuda."
              "is_available() is False)", file=sys.stderr)
        return 2
    repeat = args.repeat or (3 if args.quick else 7)
    step_inner = 10 if args.quick else 25
    big = 64 * 2**20 if args.quick else 256 * 2**20
    ampc.backends.cudnn.benchmark = True
    if torch is not None:
        torch.backends.cudnn.benchmark = True

    def log(text):
        print(text, file=sys.stderr)

    torch_text = torch.__version__ if torch is not None \
        else "n/a (no torch with CUDA)"
    print(f"ampc {ampc.__version__} on {ampc.cuda.get_device_name()}; "
          f"torch {torch_text}", flush=True)
    # Each part on its own: one that raises (a failed validation, an ampc
    # error) is reported, and the others are still measured.
    steps, fused = training_steps(args.batch, repeat, step_inner, log)
    errors = [r["error"] for r in steps.values() if r.get("error")]
    unscale = []
    for total, name, inner in ((sum(LAB_SIZES), "float32", 50),
                               (big, "float32", 10), (big, "float16", 10)):
        try:
            unscale.append(unscale_bandwidth(total, name, repeat, inner))
        except Exception as e:  # noqa: BLE001
            errors.append(f"unscale {name}: {type(e).__name__}: {e}")
            log(errors[-1])
    try:
        gemm = gemm_tflops(8192, repeat, 5 if args.quick else 10)
    except Exception as e:  # noqa: BLE001
        gemm = {"size": 8192, "error": f"{type(e).__name__}: {e}"}
        errors.append("gemm: " + gemm["error"])
        log(errors[-1])
    targets = report(steps, fused, unscale, gemm, args.batch, sys.stdout)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": ampc.cuda.get_device_name(),
                       "torch": torch.__version__ if torch else None,
                       "batch": args.batch, "fused_sgd": fused,
                       "steps": steps, "unscale": unscale, "gemm": gemm,
                       "targets": [{"target": t, "value": v, "met": ok}
                                   for t, v, ok in targets],
                       "errors": errors}, f, indent=1)
    if errors:
        print(f"\nbench_cuda.py: {len(errors)} part(s) failed:\n  "
              + "\n  ".join(e[:300] for e in errors), file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
