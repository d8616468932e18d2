"""``layer_report(model, *inputs)``: where a training step's time goes,
layer by layer, and why AMP may not make it faster (beyond PyTorch;
user_needs.md A12 and "a performance report").

Each leaf layer's forward and backward are timed (the device synchronized
at every boundary, so the figures add up to the step), convolutions and
linear layers get their FLOP count and achieved GFLOP/s, and notes say what
stands between a layer and the tensor cores: 16-bit GEMM dimensions that
are not multiples of 8 (``conv1 C_in=3``, ``fc2 out_features=10``), float32
math where autocast is off, and on the CPU that 16-bit math runs at
float32's speed (ampc widens it), so AMP saves memory there, not time.

>>> import ampc
>>> from ampc import nn
>>> model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
>>> report = ampc.amp.layer_report(model, ampc.randn(16, 32), steps=1)
>>> [r.name for r in report.rows]
['0', '1', '2']
>>> report.rows[0].gflop > 0
True
"""
import collections
import statistics
import time

from .. import _C
from .. import cuda as _cuda

__all__ = ["LayerTiming", "LayerReport", "layer_report"]

_TB = _C.TensorBase


class LayerTiming(collections.namedtuple(
        "LayerTiming",
        "name kind out_shape dtype forward_ms backward_ms gflop notes")):
    """One leaf layer: median forward and backward milliseconds, the
    GFLOP of one forward + backward (0 for layers that are not GEMMs) and
    the notes about it."""

    __slots__ = ()

    @property
    def total_ms(self):
        return self.forward_ms + self.backward_ms

    @property
    def gflops(self):
        """Achieved GFLOP/s over forward + backward (0 without FLOPs)."""
        return self.gflop / (self.total_ms * 1e-3) if self.total_ms else 0.0


def _gemm_gflop(module, out, input_grad):
    """GFLOP of forward + backward of a Conv2d or Linear producing ``out``:
    the forward's GEMM, the weight gradient's, and the input gradient's
    when ``input_grad`` (a first layer's input needs none); 0 for anything
    else."""
    kind = type(module).__name__
    gemms = 3 if input_grad else 2
    if kind == "Conv2d":
        kh, kw = module.kernel_size
        per_out = 2 * (module.in_channels // getattr(module, "groups", 1)) \
            * kh * kw
        return gemms * per_out * out.numel() / 1e9
    if kind == "Linear":
        return gemms * 2 * module.in_features * out.numel() / 1e9
    return 0.0


def _first_float(value):
    """The first floating tensor in a module's output (a tensor, or a
    tuple/list such as ``(values, indices)``), or None."""
    if isinstance(value, _TB):
        return value if value.is_floating_point() else None
    if isinstance(value, (tuple, list)):
        for v in value:
            t = _first_float(v)
            if t is not None:
                return t
    return None


def _default_loss(out):
    t = _first_float(out)
    if t is None:
        raise ValueError(
            "layer_report(): the model's output holds no floating tensor "
            "to sum into a loss; pass loss_fn=")
    return t.float().sum()


def _alignment_notes(module, inputs, dtype, device_type):
    """What keeps a 16-bit GEMM layer off the tensor cores (dimensions not
    multiples of 8), or notes that it runs in float32."""
    kind = type(module).__name__
    if kind not in ("Conv2d", "Linear") or device_type != "cuda":
        return []
    if dtype is None or dtype.name == "float32":
        return ["float32 math: no 16-bit tensor cores (run it under "
                "autocast)"]
    groups = getattr(module, "groups", 1) if kind == "Conv2d" else 1
    if kind == "Linear":
        dims = {"in_features": module.in_features,
                "out_features": module.out_features}
    elif groups == 1:
        dims = {"C_in": module.in_channels, "C_out": module.out_channels}
    else:
        # a grouped convolution's GEMMs are one group's channels wide
        dims = {"C_in/groups": module.in_channels // groups,
                "C_out/groups": module.out_channels // groups}
    if kind == "Linear" and inputs and isinstance(inputs[0], _TB):
        rows = inputs[0].numel() // max(inputs[0].shape[-1], 1)
        dims = {"batch rows": rows, **dims}
    notes = []
    for name, n in dims.items():
        if n % 8:
            pad = (n + 7) // 8 * 8
            notes.append(f"{name}={n} is not a multiple of 8: {dtype.name} "
                         f"tensor cores need padding (to {pad}) or fall "
                         "back to slower kernels")
    return notes


class LayerReport:
    """``rows`` (a ``LayerTiming`` per leaf layer, in forward order),
    ``loss_ms`` (the loss and the backward that reaches the last layer),
    ``device_type``, ``dtype`` and general ``notes``; ``str(report)`` is a
    table with each layer's share of the step."""

    def __init__(self, rows, loss_ms, device_type, dtype, notes):
        self.rows = rows
        self.loss_ms = loss_ms
        self.device_type = device_type
        self.dtype = dtype
        self.notes = notes

    @property
    def total_ms(self):
        return sum(r.total_ms for r in self.rows) + self.loss_ms

    def __str__(self):
        total = self.total_ms or 1.0
        prec = self.dtype.name if self.dtype is not None else "float32"
        lines = [f"layer_report: {self.device_type}, autocast {prec}, "
                 f"{self.total_ms:.2f} ms per step (median)",
                 f"{'layer':<14}{'kind':<12}{'out dtype':<10}{'fwd ms':>8}"
                 f"{'bwd ms':>8}{'share':>7}{'GFLOP/s':>9}"]
        for r in self.rows:
            flops = f"{r.gflops:9.1f}" if r.gflop else f"{'':9}"
            lines.append(f"{r.name:<14.14}{r.kind:<12.12}{r.dtype:<10}"
                         f"{r.forward_ms:8.3f}{r.backward_ms:8.3f}"
                         f"{r.total_ms / total:7.1%}{flops}")
            lines.extend(f"{'':14}! {n}" for n in r.notes)
        lines.append(f"{'(loss)':<36}{'':8}{self.loss_ms:8.3f}"
                     f"{self.loss_ms / total:7.1%}")
        gemm = sum(r.total_ms for r in self.rows if r.gflop)
        lines.append(f"GEMM layers (conv, linear): {gemm / total:.0%} of the "
                     f"step; everything else: {1 - gemm / total:.0%}")
        lines.extend(f"! {n}" for n in self.notes)
        return "\n".join(lines)


def _device_of(model, inputs):
    for p in model.parameters():
        return p.device.type
    for t in inputs:
        if isinstance(t, _TB):
            return t.device.type
    return "cpu"


def layer_report(model, *inputs, dtype="auto", loss_fn=None, steps=5):
    """Time ``steps`` training steps of ``model`` on ``inputs`` (after one
    warm-up step) layer by layer, forward and backward, and return a
    ``LayerReport``.

    ``dtype``: the autocast dtype ("auto": autocast's default for the
    model's device; None: no autocast).  ``loss_fn(output)`` makes the
    loss (default: the sum, in float32, of the output or of its first
    floating tensor).  Gradients the model held
    before are put back afterwards.  Layers that ``Sequential`` would fuse
    run one by one while timed, and the device is synchronized at every
    layer boundary: absolute times are a little above a real step's, the
    shares are what to read.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(
            f"layer_report(): steps must be a positive int, got {steps!r}")
    device_type = _device_of(model, inputs)
    if dtype == "auto":
        dtype = _C.get_autocast_dtype(device_type)
    leaves = [(name, m) for name, m in model.named_modules()
              if not any(True for _ in m.children())]
    sync = (lambda: _cuda.synchronize()) if device_type == "cuda" else \
        (lambda: None)

    def now():
        sync()
        return time.perf_counter()

    fwd = collections.defaultdict(list)
    bwd = collections.defaultdict(list)
    meta = {}
    stamps = []         # (name, time) as output gradients arrive
    starts = {}
    handles = []

    def pre_hook(name):
        def hook(module, args):
            starts[name] = now()
        return hook

    def post_hook(name):
        def hook(module, args, output):
            fwd[name].append(now() - starts[name])
            out = _first_float(output)
            if name not in meta:
                notes = _alignment_notes(module, args, dtype, device_type)
                x = _first_float(args)
                meta[name] = (
                    type(module).__name__,
                    tuple(out.shape) if out is not None else (),
                    out.dtype.name if out is not None else "-",
                    _gemm_gflop(module, out, x is not None and
                                x.requires_grad) if out is not None else 0.0,
                    notes)
            if out is not None and out.requires_grad:
                out.register_hook(lambda g: stamps.append((name, now())))
        return hook

    for name, m in leaves:
        handles.append(m.register_forward_pre_hook(pre_hook(name)))
        handles.append(m.register_forward_hook(post_hook(name)))
    saved = [(p, p.grad) for p in model.parameters()]
    loss_times = []
    try:
        for p, _ in saved:
            p.grad = None           # (backward would add into the user's)
        for step in range(steps + 1):
            stamps.clear()
            with _C.autocast(device_type, dtype=dtype or _C.float32,
                             enabled=dtype is not None):
                out = model(*inputs)
                t_loss = now()
                loss = loss_fn(out) if loss_fn else _default_loss(out)
            loss.backward()
            end = now()
            for p in model.parameters():
                p.grad = None       # each step accumulates into fresh .grad
            if step == 0:
                fwd.clear()
                continue
            first = stamps[0][1] if stamps else end
            loss_times.append(first - t_loss)
            for k, (name, t) in enumerate(stamps):
                nxt = stamps[k + 1][1] if k + 1 < len(stamps) else end
                bwd[name].append(nxt - t)
    finally:
        for h in handles:
            h.remove()
        for p, g in saved:
            p.grad = g
    rows = []
    for name, _ in leaves:
        if name not in meta:
            continue
        kind, shape, odt, gflop, notes = meta[name]
        rows.append(LayerTiming(
            name, kind, shape, odt, statistics.median(fwd[name]) * 1e3,
            statistics.median(bwd[name]) * 1e3 if bwd[name] else 0.0,
            gflop, notes))
    notes = []
    if device_type == "cpu" and dtype is not None and \
            dtype.name != "float32":
        notes.append(f"on the CPU ampc computes {dtype.name} GEMMs in "
                     "float32 (no AMX): AMP halves the activations' memory "
                     "but does not make these layers faster")
    return LayerReport(rows, statistics.median(loss_times) * 1e3,
                       device_type, dtype, notes)
