"""``detect_overflow(model)``: which layer's output, or the gradient of which
layer's output, first held inf or NaN (beyond PyTorch; user_needs.md A11).

GradScaler knows *that* a step overflowed, and ``scaler.stats()`` names the
parameters whose gradients did; this finds *where* it began.  Inside the
context every module's output is checked after its forward (a forward
hook), and the gradient of that output when backward reaches it (a tensor
hook): counts of inf and NaN in one fused pass, and the largest magnitude,
as a fraction of the dtype's largest finite value so that a float16 layer
near 65504 shows before it overflows.  Each check reads a few numbers back
to the host, so the run is slower; it is a debugging tool.

>>> import math, ampc
>>> from ampc import nn
>>> model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
>>> with ampc.amp.detect_overflow(model) as report:
...     _ = model(ampc.tensor([[1.0, math.inf]]))
>>> report.first_nonfinite().module
'0'
"""
import collections
import math

from .. import _C
from .._finfo import finfo
from ..autograd import no_grad

__all__ = ["OverflowRecord", "OverflowReport", "detect_overflow"]

_TB = _C.TensorBase
_FLOATS = ("float32", "float16", "bfloat16")
_MAX = {name: finfo(getattr(_C, name)).max for name in _FLOATS}


class OverflowRecord(collections.namedtuple(
        "OverflowRecord",
        "phase module kind dtype absmax inf nan input_absmax")):
    """One check: ``phase`` is "forward" (the module's output) or
    "backward" (the gradient of that output); ``absmax`` the largest
    finite-or-not magnitude (NaN when a NaN is present); ``input_absmax``
    the largest magnitude among the forward's floating inputs (None in
    backward)."""

    __slots__ = ()

    @property
    def finite(self):
        return self.inf == 0 and self.nan == 0

    @property
    def headroom_used(self):
        """``absmax`` as a fraction of the dtype's largest finite value."""
        return self.absmax / _MAX[self.dtype]

    def __str__(self):
        what = "output" if self.phase == "forward" else "grad of output"
        s = (f"{self.phase:8s} {self.module or '(model)'} ({self.kind}) "
             f"{what} {self.dtype}: absmax {self.absmax:.4g}")
        if self.dtype != "float32" and math.isfinite(self.absmax):
            s += f" ({self.headroom_used:.1%} of max)"
        if not self.finite:
            s += f", {self.inf} inf, {self.nan} nan"
        if self.input_absmax is not None:
            s += f"; input absmax {self.input_absmax:.4g}"
        return s


def _float_tensors(value):
    if isinstance(value, _TB):
        if value.dtype.name in _FLOATS:
            yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _float_tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _float_tensors(v)


def _absmax(t):
    if t.numel() == 0:
        return 0.0
    return float(t.detach().abs().max().item())


def _inf_nan(tensors):
    """Inf and NaN counts over ``tensors``: one fused pass per device that
    writes nothing, so a checked output that autograd saved for backward
    (a ReLU's, say) keeps its version."""
    inf = nan = 0
    by_device = {}
    for t in tensors:
        by_device.setdefault(str(t.device), []).append(t)
    for group in by_device.values():
        for counts in _C._amp_count_nonfinite(group):
            inf += counts[0]
            nan += counts[1]
    return inf, nan


class OverflowReport:
    """What ``detect_overflow`` saw: ``records`` (the last ``keep`` checks,
    in the order they ran), ``first_nonfinite(phase)`` and, for each phase,
    the checks just before the first non-finite one (``context(phase)``).
    ``str(report)`` summarises both phases."""

    def __init__(self, keep, context):
        self.records = collections.deque(maxlen=keep)
        # the checks of the pass (one forward, or one backward) under way:
        # a context never reaches into an earlier pass
        self._this_pass = collections.deque(maxlen=context)
        self._first = {}

    def _new_pass(self):
        self._this_pass.clear()

    def _add(self, rec):
        if self._this_pass and self._this_pass[-1].phase != rec.phase:
            self._new_pass()
        if not rec.finite and rec.phase not in self._first:
            self._first[rec.phase] = (rec, list(self._this_pass))
        self._this_pass.append(rec)
        self.records.append(rec)

    def first_nonfinite(self, phase="forward"):
        """The first check of ``phase`` ("forward" or "backward") that found
        inf or NaN, or None."""
        if phase not in ("forward", "backward"):
            raise ValueError(
                f"first_nonfinite(): phase must be 'forward' or 'backward', "
                f"got {phase!r}")
        hit = self._first.get(phase)
        return hit[0] if hit else None

    def context(self, phase="forward"):
        """The checks of ``phase`` that ran just before its first
        non-finite one (empty when there was none)."""
        hit = self._first.get(phase)
        return list(hit[1]) if hit else []

    def clear(self):
        self.records.clear()
        self._this_pass.clear()
        self._first.clear()

    def _explain(self, phase):
        rec = self.first_nonfinite(phase)
        if rec is None:
            return f"{phase}: every checked value was finite"
        name = rec.module or "(model)"
        if phase == "forward":
            if rec.input_absmax is not None and \
                    not math.isfinite(rec.input_absmax):
                why = ("its input was already non-finite: the data (or "
                       "code outside the model's modules) brought it in")
            elif rec.dtype != "float32" and rec.inf and \
                    rec.input_absmax is not None:
                why = (f"its {rec.dtype} output overflowed (the largest "
                       f"{rec.dtype} value is {_MAX[rec.dtype]:.6g}); run "
                       "this layer in float32 (e.g. ampc.amp.register_op("
                       "..., policy='fp32') or autocast(enabled=False))")
                if rec.dtype == "float16":
                    why += ", or use bfloat16 (float32's range)"
            else:
                why = "the layer itself produced it from finite inputs"
            head = f"forward: first non-finite output at '{name}' " \
                   f"({rec.kind}): {why}"
        else:
            head = (f"backward: the gradient first became non-finite at the "
                    f"output of '{name}' ({rec.kind}): ")
            before = self.context(phase)
            if before:
                last = before[-1]
                head += ("the backward of the layer that consumes that "
                         "output made it (the last gradient checked before, "
                         f"finite, was that of '{last.module or '(model)'}' "
                         f"({last.kind})'s output)")
            else:
                head += ("it arrived so from the loss, outside the model: "
                         "with a GradScaler, the scaled loss's gradient "
                         f"overflows {rec.dtype} (the scale is too large; "
                         "the scaler skips the step and backs off)")
        lines = [head] + [f"  {r}" for r in self.context(phase)] + \
            [f"> {rec}"]
        return "\n".join(lines)

    def __str__(self):
        return self._explain("forward") + "\n" + self._explain("backward")

    def __repr__(self):
        return (f"<OverflowReport: {len(self.records)} records, first "
                f"non-finite forward: {self.first_nonfinite('forward')}, "
                f"backward: {self.first_nonfinite('backward')}>")


class detect_overflow:
    """Watch every module of ``model`` for inf/NaN: the forward outputs and
    the gradients of those outputs.  Use as a context manager (the hooks go
    at its exit) or call ``remove()``.  ``abort=True`` raises a
    ``FloatingPointError`` at the first non-finite check, with the report's
    summary; ``keep`` bounds ``report.records``; ``context`` is how many
    checks before the first non-finite one the summary shows.

    Layers that ``Sequential`` would fuse (Conv2d/Linear + ReLU [+
    MaxPool2d]) run one by one while watched, with the same results.
    """

    def __init__(self, model, *, abort=False, keep=10000, context=5):
        self.report = OverflowReport(keep, context)
        self._abort = abort
        self._handles = [model.register_forward_pre_hook(
            lambda module, args: self.report._new_pass())]
        for name, module in model.named_modules():
            self._handles.append(module.register_forward_hook(
                self._forward_hook(name, type(module).__name__)))

    def _check(self, rec):
        self.report._add(rec)
        if self._abort and not rec.finite:
            raise FloatingPointError(
                "detect_overflow: " + self.report._explain(rec.phase))

    def _forward_hook(self, name, kind):
        def hook(module, args, output):
            outs = list(_float_tensors(output))
            if not outs:
                return None
            ins = list(_float_tensors(args))
            with no_grad():
                inf, nan = _inf_nan(outs)
                absmax = max(_absmax(t) for t in outs)
                in_max = max((_absmax(t) for t in ins), default=None)
            self._check(OverflowRecord("forward", name, kind,
                                       outs[0].dtype.name, absmax, inf, nan,
                                       in_max))
            # (the gradient hooks go with the graph; after remove() they
            # do nothing)
            for t in outs:
                if t.requires_grad and t.grad_fn is not None:
                    t.register_hook(self._grad_hook(name, kind))
            return None
        return hook

    def _grad_hook(self, name, kind):
        def hook(grad):
            if not self._handles:
                return None
            with no_grad():
                inf, nan = _inf_nan([grad])
                absmax = _absmax(grad)
            self._check(OverflowRecord("backward", name, kind,
                                       grad.dtype.name, absmax, inf, nan,
                                       None))
            return None
        return hook

    def remove(self):
        """Unregister the hooks: nothing more is checked, in forward or in
        a backward still to come."""
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def __enter__(self):
        return self.report

    def __exit__(self, *exc):
        self.remove()
