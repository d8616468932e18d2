"""``python -m ampc.lab``: the command line of the lab.  Parses and checks
the options, picks the device and the data, runs the lab, and prints the
table (also after Ctrl-C, with what was measured so far; exit code 130).

>>> from ampc.lab.cli import build_parser
>>> build_parser().parse_args(["--epochs", "3"]).epochs
3
"""
import argparse
import os
import platform
import sys
import time

from .. import __version__, get_num_threads
from .. import backends, cuda
from .data import load_data, CIFAR10_TRAIN, CIFAR10_TEST
from .report import (format_bytes, format_table, summary_lines, report_dict,
                     require_matplotlib, write_json, write_plot)
from .runner import PRECISIONS, Lab, LabConfig, parse_precisions

__all__ = ["PRESETS", "build_parser", "main"]

# The quick default takes about a minute on a 2-core AVX-512 CPU (about
# 3,000 images/s per run there; a few minutes where other jobs share the
# cores); "lab" is the lab's own settings (its scripts' 5 epochs, all
# 50,000 images, batch 256 and 4 loader workers).
PRESETS = {
    "quick": {"epochs": 2, "batch_size": 256, "train_size": 20000,
              "test_size": 5000, "workers": 0},
    "lab": {"epochs": 5, "batch_size": 256, "train_size": None,
            "test_size": None, "workers": 4},
}


def _int_at_least(low):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer, got {text!r}") from None
        if value < low:
            what = "positive" if low == 1 else f">= {low}"
            raise argparse.ArgumentTypeError(
                f"must be {what}, got {value}")
        return value
    return parse


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a positive finite number, got {text}")
    return value


def _precisions(text):
    try:
        return parse_precisions(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser():
    """The argument parser of ``python -m ampc.lab``."""
    quick = PRESETS["quick"]
    p = argparse.ArgumentParser(
        prog="python -m ampc.lab",
        description=(
            "The mixed-precision lab: train the lab's SimpleCNN on CIFAR-10 "
            "in FP32, in AMP float16 (autocast + GradScaler) and in AMP "
            "bfloat16 (autocast), then compare time, throughput, peak "
            "memory, loss and accuracy.  The default is a quick run "
            f"({quick['epochs']} epochs of {quick['train_size']:,} images); "
            "--preset lab runs the lab's own settings (5 epochs of all "
            "50,000 images, batch 256)."),
        epilog=(
            "CIFAR-10 is read from DATA/cifar-10-batches-py (torchvision's "
            "layout, the folder inside cifar-10-python.tar.gz); without it "
            "the lab uses the built-in FakeCIFAR10 and says so.  Ctrl-C "
            "stops the lab and prints what was measured so far."))
    p.add_argument("--preset", choices=sorted(PRESETS), default="quick",
                   help="quick (default): a few minutes on a 2-core CPU; "
                   "lab: the lab's settings. Options given explicitly "
                   "override the preset")
    p.add_argument("--device", default="auto",
                   help="auto (default: cuda when a GPU is usable, else "
                   "cpu), cpu or cuda")
    p.add_argument("--precision", type=_precisions,
                   default=tuple(PRECISIONS),
                   help="the runs, comma-separated, from "
                   f"{','.join(PRECISIONS)} (default: all three)")
    p.add_argument("--data", default="./data",
                   help="folder holding cifar-10-batches-py (default "
                   "./data), or 'fake' for the built-in FakeCIFAR10")
    p.add_argument("--download", action="store_true",
                   help="download CIFAR-10 into --data when it is not there "
                   "(170 MB, checked against its MD5 sums)")
    p.add_argument("--epochs", type=_int_at_least(1),
                   help=f"epochs per run (quick: {quick['epochs']}, lab: 5)")
    p.add_argument("--batch-size", type=_int_at_least(1),
                   help="images per batch (default 256)")
    p.add_argument("--lr", type=_positive_float, default=0.01,
                   help="SGD learning rate (default 0.01; momentum 0.9)")
    p.add_argument("--train-size", type=_int_at_least(1),
                   help="training images used (quick: "
                   f"{quick['train_size']:,}; lab: all 50,000)")
    p.add_argument("--test-size", type=_int_at_least(0),
                   help=f"test images used (quick: {quick['test_size']:,}; "
                   "lab: all 10,000; 0 skips testing)")
    p.add_argument("--workers", type=_int_at_least(0),
                   help="DataLoader worker processes (quick: 0, lab: 4)")
    p.add_argument("--seed", type=_int_at_least(0), default=0,
                   help="seed of the initial weights and batch order "
                   "(default 0; every run uses the same)")
    p.add_argument("--json", metavar="PATH",
                   help="write every figure (per run, per epoch, loss and "
                   "scale per step) to PATH")
    p.add_argument("--plot", metavar="PATH",
                   help="write a PNG of the loss curves and the loss scale "
                   "to PATH (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars")
    p.add_argument("--layers", action="store_true",
                   help="instead of training, time one training step of "
                   "the SimpleCNN layer by layer for each --precision at "
                   "--batch-size on --device (ampc.amp.layer_report): "
                   "each layer's share of the step and what keeps it off "
                   "the tensor cores")
    return p


def _print_layer_reports(args, device, batch_size):
    """--layers: ampc.amp.layer_report of the lab's step, per precision."""
    from .. import amp, manual_seed, randn
    from .model import SimpleCNN
    manual_seed(args.seed)
    model = SimpleCNN().to(device)
    x = randn(batch_size, 3, 32, 32, device=device)
    for name in args.precision:
        print(f"{PRECISIONS[name].label}, batch {batch_size}:")
        print(amp.layer_report(model, x,
                               dtype=PRECISIONS[name].autocast_dtype))
        print()
    return 0


def _resolve_device(parser, text):
    """'auto' -> 'cuda' or 'cpu'; 'cuda' only where a GPU is usable."""
    text = text.strip().lower()
    if text == "auto":
        return "cuda" if cuda.is_available() else "cpu"
    if text == "cpu":
        return "cpu"
    if text == "cuda" or text.startswith("cuda:"):
        if not cuda.is_built():
            why = ("this ampc was built without CUDA (nvcc was not found "
                   "when it was installed)")
        elif not cuda.is_available():
            why = "no CUDA GPU was found (ampc.cuda.device_count() is 0)"
        else:
            return text
        parser.error(f"--device {text}: {why}; use --device cpu, or "
                     "--device auto, which picks the GPU when there is one")
    parser.error(f"--device: expected auto, cpu or cuda, got {text!r}")


def _check_output(parser, option, path):
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        parser.error(f"{option} {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        parser.error(f"{option} {path}: is a folder; give a file name")


def _settings(args, preset):
    """The options in force: explicit ones, else the preset's."""
    def pick(name):
        value = getattr(args, name)
        return preset[name] if value is None else value
    return {name: pick(name) for name in
            ("epochs", "batch_size", "train_size", "test_size", "workers")}


def _environment(device):
    env = {
        "ampc_version": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "cpu_level": backends.cpu.capability(),
        "threads": get_num_threads(),
        "cuda_available": cuda.is_available(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if device.startswith("cuda"):
        env["gpu"] = cuda.get_device_name(device)
    return env


def _device_line(env):
    if env["device"].startswith("cuda"):
        return f"device {env['device']} ({env.get('gpu', 'GPU')})"
    return (f"device cpu ({env['cpu_level']} kernels, {env['threads']} "
            f"thread{'s' if env['threads'] != 1 else ''})")


def _run_line(r):
    """One line per finished run, printed as it ends."""
    parts = [f"{r.train_time_s:.1f} s"]
    if r.images_per_s:
        parts.append(f"{r.images_per_s:,.0f} img/s")
    parts.append(f"peak {format_bytes(r.peak_memory_bytes)}")
    if r.final_train_loss is not None:
        parts.append(f"loss {r.final_train_loss:.3f}")
    if r.test_accuracy is not None:
        parts.append(f"test accuracy {100 * r.test_accuracy:.1f}%")
    if r.scaler and r.skipped_steps is not None:
        parts.append(f"{r.skipped_steps} skipped step"
                     f"{'s' if r.skipped_steps != 1 else ''}, scale "
                     f"{r.final_scale:g}")
    return f"{r.label}: " + ", ".join(parts)


def main(argv=None):
    """Run the lab with command-line ``argv``; the exit code (0, 1 on an
    error, 2 on a bad option, 130 after Ctrl-C)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    device = _resolve_device(parser, args.device)
    if args.download and args.data == "fake":
        parser.error("--download fetches CIFAR-10; it cannot be combined "
                     "with --data fake")
    for option, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            _check_output(parser, option, path)
    if args.plot:
        try:
            require_matplotlib()
        except ImportError as e:
            parser.error(str(e))
    is_lab = args.preset == "lab"
    s = _settings(args, PRESETS[args.preset])
    if args.layers:
        return _print_layer_reports(args, device, s["batch_size"])
    out = sys.stdout

    def say(text=""):
        print(text, file=out, flush=True)

    try:
        data = load_data(args.data, s["train_size"], s["test_size"],
                         download=args.download)
    except KeyboardInterrupt:
        say("\nInterrupted (Ctrl-C) before training began.")
        return 130
    except (RuntimeError, ValueError, OSError) as e:
        print(f"python -m ampc.lab: error: {e}", file=sys.stderr)
        return 1
    config = LabConfig(epochs=s["epochs"], batch_size=s["batch_size"],
                       lr=args.lr, precisions=args.precision, device=device,
                       workers=s["workers"], seed=args.seed)
    env = _environment(device)
    if data.note:
        say(data.note)
    say(f"ampc lab: the lab's SimpleCNN on {data.describe()}")
    say(f"  {config.epochs} epoch{'s' if config.epochs != 1 else ''}, "
        f"batch {config.batch_size}, SGD lr {config.lr:g} momentum "
        f"{config.momentum:g}, seed {config.seed}, {config.workers} loader "
        f"worker{'s' if config.workers != 1 else ''}; {_device_line(env)}")
    say("  runs: " + ", ".join(
        f"{PRECISIONS[n].label} ({PRECISIONS[n].describe()})"
        for n in config.precisions))
    full = (is_lab and s["train_size"] is None and s["test_size"] is None
            and s["epochs"] == 5 and s["batch_size"] == 256)
    lab_settings = (f"5 epochs of all {CIFAR10_TRAIN:,} training images, "
                    f"{CIFAR10_TEST:,} test images, batch 256")
    if args.preset == "quick" and s == PRESETS["quick"]:
        reminder = ("This is the quick run; python -m ampc.lab --preset lab "
                    f"runs the lab's full settings ({lab_settings}).")
    else:
        reminder = ("These are not the lab's settings; python -m ampc.lab "
                    f"--preset lab runs them ({lab_settings}).")
    if not full:
        say("  " + reminder)
    say()

    lab = Lab(config, data, progress=not args.no_progress)
    interrupted = False
    done = 0
    try:
        for name in config.precisions:
            lab.run_one(PRECISIONS[name])
            say(_run_line(lab.results[-1]))
            done += 1
    except KeyboardInterrupt:
        interrupted = True
        # The bar's line may still be open on the terminal.
        sys.stderr.flush()
        say()
        say("Interrupted (Ctrl-C): the table shows what was measured so far"
            f" ({done} of {len(config.precisions)} run"
            f"{'s' if len(config.precisions) != 1 else ''} finished).")

    results = [r for r in lab.results if r.steps]
    say()
    if results:
        say(format_table(results, config.epochs))
        lines = summary_lines(results)
        if lines:
            say()
            for line in lines:
                say(line)
    else:
        say("Nothing was measured: the first training step had not "
            "finished.")
    if args.json:
        settings = dict(s, lr=config.lr, momentum=config.momentum,
                        precisions=list(config.precisions),
                        preset=args.preset, seed=config.seed,
                        data=data.source, data_root=data.root)
        write_json(args.json, report_dict(lab.results, settings, env,
                                          interrupted=interrupted))
        say(f"Figures written to {args.json}")
    if args.plot:
        write_plot(args.plot, lab.results)
        say(f"Plot written to {args.plot}")
    if not full and not interrupted:
        say()
        say(reminder)
    return 130 if interrupted else 0
