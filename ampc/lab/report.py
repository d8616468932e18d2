"""The lab's output: the comparison table (metrics down, runs across, each
AMP run's improvement over FP32 in its cells, as in the lab's own table),
the JSON of every figure, and the PNG of the loss curves and loss scale.

>>> from ampc.lab.report import change
>>> change(75.0, 48.0, "faster", "slower")
'~36% faster'
>>> change(1.8, 1.1, "less", "more")
'~39% less'
"""
import json
import math
import os
import tempfile

__all__ = ["change", "format_bytes", "improvements", "format_table",
           "summary_lines", "report_dict", "write_json", "require_matplotlib",
           "write_plot"]

_DASH = "-"


# ----------------------------------------------------------------------------
# figures as text


def change(baseline, value, better, worse):
    """How much ``value`` improves on ``baseline`` where smaller is better
    (time, memory), as the lab writes it: 75 s -> 48 s is "~36% faster".

    >>> change(100.0, 103.0, "less", "more")
    '~3% more'
    >>> change(100.0, 100.2, "less", "more")
    'about the same'
    """
    frac = 1.0 - value / baseline
    pct = round(abs(frac) * 100)
    if pct == 0:
        return "about the same"
    return f"~{pct}% {better if frac > 0 else worse}"


def format_bytes(n):
    """Bytes in MiB (GiB from 10 GiB up).

    >>> format_bytes(193273528)
    '184.3 MiB'
    """
    if n is None:
        return _DASH
    if n >= 10 * 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.1f} MiB"


def _seconds(s):
    return _DASH if s is None else f"{s:.1f} s"


def _baseline(results):
    """The FP32 run that measured something, or None."""
    for r in results:
        if r.precision == "fp32" and r.images:
            return r
    return None


def improvements(result, baseline):
    """(time, memory) of ``result`` against ``baseline`` as fractions
    saved (0.36: 36% less time per image), None where either is missing.
    Time compares images per second, so that it holds for runs that were
    interrupted at different points too."""
    if baseline is None or result is baseline:
        return None, None
    time_frac = mem_frac = None
    if result.images_per_s and baseline.images_per_s:
        time_frac = 1.0 - baseline.images_per_s / result.images_per_s
    if result.peak_memory_bytes and baseline.peak_memory_bytes:
        mem_frac = 1.0 - result.peak_memory_bytes / \
            baseline.peak_memory_bytes
    return time_frac, mem_frac


def _run_header(r, baseline):
    head = r.label + (" (baseline)" if r is baseline else "")
    return head + (" [stopped]" if r.status == "interrupted" else "")


def _epochs_done(r):
    partial = r.steps - sum(e.batches for e in r.epochs)
    text = f"{len(r.epochs)} of {r.epochs_planned}"
    if partial:
        text += f" + {partial} batch{'es' if partial != 1 else ''}"
    if r.status == "interrupted" and r.stage == "testing":
        text += ", stopped while testing"
    return text


def format_table(results, epochs):
    """The comparison table as text: one column per run, one row per
    metric; ``epochs`` is the number each run was asked for."""
    baseline = _baseline(results)
    rows = [("Metric", [_run_header(r, baseline) for r in results])]
    if any(r.status != "done" for r in results):
        rows.append(("Epochs done", [_epochs_done(r) for r in results]))

    def with_change(text, r, which, better, worse):
        time_frac, mem_frac = improvements(r, baseline)
        frac = time_frac if which == "time" else mem_frac
        if frac is None or text == _DASH:
            return text
        return f"{text} ({change(1.0, 1.0 - frac, better, worse)})"

    rows.append((f"Training time ({epochs} epoch{'s' if epochs != 1 else ''})",
                 [with_change(_seconds(r.train_time_s if r.steps else None),
                              r, "time", "faster", "slower")
                  for r in results]))
    rows.append(("Time per epoch", [_seconds(r.s_per_epoch)
                                    for r in results]))
    rows.append(("Images per second",
                 [_DASH if r.images_per_s is None
                  else f"{r.images_per_s:,.0f}" for r in results]))
    mem_label = "Peak GPU memory" if any(
        getattr(r, "device", "cpu").startswith("cuda") for r in results) \
        else "Peak tensor memory"
    rows.append((mem_label,
                 [with_change(format_bytes(r.peak_memory_bytes), r,
                              "memory", "less", "more") for r in results]))
    rss_label = "Peak RSS (process)"
    if any(r.rss_since_start for r in results):
        rss_label = "Peak RSS (process, so far)"
    rows.append((rss_label, [format_bytes(r.peak_rss_bytes)
                             for r in results]))
    rows.append(("Final train loss",
                 [_DASH if r.final_train_loss is None
                  else f"{r.final_train_loss:.3f}" for r in results]))
    rows.append(("Test accuracy",
                 [_DASH if r.test_accuracy is None
                  else f"{100 * r.test_accuracy:.1f}%" for r in results]))
    rows.append(("Loss scale (final)",
                 [f"{r.final_scale:g}" if r.scaler and r.final_scale
                  is not None else _DASH for r in results]))
    rows.append(("Skipped steps",
                 [f"{r.skipped_steps} of {r.steps}" if r.scaler and
                  r.skipped_steps is not None else _DASH
                  for r in results]))
    widths = [max(len(row[0]) for row in rows)]
    for i in range(len(results)):
        widths.append(max(len(row[1][i]) for row in rows))
    lines = []
    for k, (name, cells) in enumerate(rows):
        parts = [name.ljust(widths[0])]
        parts += [c.ljust(w) for c, w in zip(cells, widths[1:])]
        lines.append("  ".join(parts).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary_lines(results):
    """The sentences under the table: each AMP run against FP32, and what
    each GradScaler did."""
    baseline = _baseline(results)
    lines = []
    for r in results:
        if r is baseline or not r.images:
            continue
        t, m = improvements(r, baseline)
        if t is None and m is None:
            continue
        parts = []
        if t is not None:
            parts.append(change(1.0, 1.0 - t, "faster", "slower"))
        if m is not None:
            parts.append(change(1.0, 1.0 - m, "less", "more")
                         + " peak tensor memory")
        lines.append(f"{r.label} vs FP32: {', '.join(parts)}.")
    if baseline is None and any(r.images for r in results):
        lines.append("No FP32 run to compare with: add fp32 to "
                     "--precision.")
    for r in results:
        if not r.scaler or r.skipped_steps is None:
            continue
        if r.skipped_steps:
            what = (f"{r.skipped_steps} skipped (inf/NaN in the gradients: "
                    "the update was not applied and the scale halved)")
        else:
            what = "none skipped (no inf/NaN in the gradients)"
        lines.append(f"GradScaler ({r.label}): {r.steps} steps, {what}; "
                     f"final scale {r.final_scale:g}.")
    return lines


# ----------------------------------------------------------------------------
# JSON


def _finite(x):
    """JSON has no NaN or inf: those become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _run_dict(r, baseline):
    t, m = improvements(r, baseline)
    return {
        "precision": r.precision,
        "label": r.label,
        "description": r.description,
        "status": r.status,
        "stage": r.stage,
        "epochs_planned": r.epochs_planned,
        "epochs_completed": len(r.epochs),
        "steps": r.steps,
        "images": r.images,
        "train_time_s": r.train_time_s,
        "cpu_time_s": r.cpu_time_s,
        "s_per_epoch": r.s_per_epoch,
        "images_per_s": r.images_per_s,
        "device": r.device,
        "peak_memory_bytes": r.peak_memory_bytes,
        "peak_rss_bytes": r.peak_rss_bytes,
        "peak_rss_since_process_start": r.rss_since_start,
        "final_train_loss": _finite(r.final_train_loss),
        "test_accuracy": r.test_accuracy,
        "test_loss": _finite(r.test_loss),
        "test_images": r.test_images,
        "time_saved_vs_fp32": t,
        "memory_saved_vs_fp32": m,
        "grad_scaler": r.scaler,
        "skipped_steps": r.skipped_steps,
        "final_scale": r.final_scale,
        "epochs": [{
            "epoch": e.epoch, "batches": e.batches, "images": e.images,
            "time_s": e.time_s, "images_per_s": e.images_per_s,
            "train_loss": _finite(e.train_loss),
            "skipped_steps": e.skipped_steps, "scale": e.scale,
        } for e in r.epochs],
        "loss_curve": [_finite(v) for v in r.loss_curve],
        "scale_curve": list(r.scale_curve),
    }


def report_dict(results, settings, environment, interrupted=False):
    """Every figure as plain data: the settings, the environment, and per
    run its totals, its epochs, its loss per step and its scale per step
    (``time_saved_vs_fp32`` 0.36 is "~36% faster")."""
    baseline = _baseline(results)
    return {
        "settings": settings,
        "environment": environment,
        "interrupted": interrupted,
        "runs": [_run_dict(r, baseline) for r in results],
    }


def _write_atomic(path, write):
    """Write through a temporary file in the same folder, then rename: an
    interruption never leaves a half-written file at ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ampc-lab-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json(path, report):
    """Write ``report`` (from ``report_dict``) to ``path``."""
    data = json.dumps(report, indent=2, allow_nan=False).encode() + b"\n"
    _write_atomic(path, lambda f: f.write(data))


# ----------------------------------------------------------------------------
# the plot


def require_matplotlib():
    """Import matplotlib with the Agg backend (files only, no display);
    ImportError saying how to install it where it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "--plot needs matplotlib, which is not installed: pip install "
            "matplotlib (or pip install -e \".[lab]\" in ampc's folder)") \
            from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _smooth(values, window):
    """Centred moving mean over ``window`` steps (NaN/inf steps left out),
    so that the smooth curve does not lag behind the raw one."""
    half = window // 2
    finite = [v if v is not None and math.isfinite(v) else None
              for v in values]
    out = []
    for i in range(len(finite)):
        near = [v for v in finite[max(0, i - half):i + half + 1]
                if v is not None]
        out.append(sum(near) / len(near) if near else float("nan"))
    return out


def write_plot(path, results):
    """A PNG with two panels: the training loss per step of every run
    (thin: per step; thick: a moving mean), and the loss scale per step of
    the runs with a GradScaler, skipped steps marked."""
    plt = require_matplotlib()
    fig, (ax_loss, ax_scale) = plt.subplots(
        1, 2, figsize=(12, 4.5), constrained_layout=True)
    # Runs from the same weights often overlap: distinct dashes keep each
    # one visible.
    styles = ["-", "--", ":"]
    for k, r in enumerate(r for r in results if r.loss_curve):
        steps = range(1, len(r.loss_curve) + 1)
        window = max(1, len(r.loss_curve) // 25)
        line, = ax_loss.plot(steps, r.loss_curve, alpha=0.25, linewidth=0.8)
        ax_loss.plot(steps, _smooth(r.loss_curve, window),
                     color=line.get_color(), linewidth=2.0,
                     linestyle=styles[k % len(styles)], label=r.label)
    ax_loss.set_title("Training loss")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy")
    if ax_loss.lines:
        ax_loss.legend()
    scaled = [r for r in results if r.scaler and r.scale_curve]
    for r in scaled:
        steps = list(range(1, len(r.scale_curve) + 1))
        ax_scale.step(steps, r.scale_curve, where="post", label=r.label)
        # A step whose scale fell was skipped (inf/NaN gradients).
        drops = [i for i in range(1, len(r.scale_curve))
                 if r.scale_curve[i] < r.scale_curve[i - 1]]
        if drops:
            ax_scale.plot([steps[i] for i in drops],
                          [r.scale_curve[i] for i in drops], "x",
                          color="tab:red", label=f"{r.label}: skipped step")
    ax_scale.set_title("GradScaler loss scale")
    ax_scale.set_xlabel("step")
    if scaled:
        ax_scale.set_yscale("log", base=2)
        ax_scale.legend()
    else:
        ax_scale.text(0.5, 0.5, "no run with a GradScaler\n(add fp16 to "
                      "--precision)", ha="center", va="center",
                      transform=ax_scale.transAxes)
    _write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=100))
    plt.close(fig)
