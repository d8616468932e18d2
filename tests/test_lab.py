"""``python -m ampc.lab``: the table and the JSON of a tiny run of all three
precisions, the options and their errors, the data it picks (CIFAR-10, the
"not found" line, --data fake), Ctrl-C, the plot, the progress bars, and
the lab's model against the lab's own (torch, where installed)."""
import doctest
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import ampc
import ampc.lab
from ampc.lab import cli, data as lab_data, progress, report, runner
from ampc.lab.cli import main
from ampc.lab.model import SimpleCNN
from helpers import torch_or_skip
from test_examples import write_cifar_folder

TINY = ["--train-size", "256", "--test-size", "128", "--epochs", "1",
        "--batch-size", "64"]


def _default_sigint():
    # A shell starts background jobs with SIGINT ignored, and Python then
    # keeps ignoring it; the lab under test must see Ctrl-C as a person's
    # terminal would send it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _lab(*args, cwd=None, **kw):
    """``python -m ampc.lab args`` in a subprocess."""
    return subprocess.Popen(
        [sys.executable, "-m", "ampc.lab", *args], cwd=cwd,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=_default_sigint, **kw)


def _table(text):
    """{metric: [cells]} of the table in the lab's output."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("Metric "))
    widths = [len(d) for d in lines[start + 1].split("  ")]
    rows = {}
    for line in lines[start:]:
        if not line.strip():
            break
        if set(line) <= {"-", " "}:
            continue
        cells, pos = [], 0
        for w in widths:
            cells.append(line[pos:pos + w].strip())
            pos += w + 2
        rows[cells[0]] = cells[1:]
    return rows


# ----------------------------------------------------------------------------
# a tiny run of all three precisions


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One ``python -m ampc.lab`` run: 256 training / 128 test images of
    the built-in set (no CIFAR-10 under the working folder), 1 epoch,
    batch 64, FP32 + AMP fp16 + AMP bf16, with --json."""
    work = tmp_path_factory.mktemp("tiny")
    path = str(work / "figures.json")
    proc = _lab(*TINY, "--json", path, cwd=str(work), text=True)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    with open(path) as f:
        return out, json.load(f), str(work)


def test_tiny_run_says_cifar_not_found_in_one_line(tiny_run):
    out, _, work = tiny_run
    first = out.splitlines()[0]
    assert first.startswith("CIFAR-10 not found under ./data")
    assert "FakeCIFAR10" in first
    assert sum("not found" in line for line in out.splitlines()) == 1
    assert "FakeCIFAR10 (built in): 256 training / 128 test images" in out
    # The quick run says where the full lab is.
    assert "--preset lab" in out


def test_tiny_run_table(tiny_run):
    out, report_, _ = tiny_run
    rows = _table(out)
    assert rows["Metric"] == ["FP32 (baseline)", "AMP fp16", "AMP bf16"]
    for metric in ("Training time (1 epoch)", "Time per epoch",
                   "Images per second", "Peak tensor memory",
                   "Final train loss", "Test accuracy", "Loss scale (final)",
                   "Skipped steps"):
        assert metric in rows, metric
    # ", so far" where the OS cannot restart the peak-RSS count per run.
    assert "Peak RSS (process)" in rows \
        or "Peak RSS (process, so far)" in rows
    assert "Epochs done" not in rows            # nothing was interrupted
    runs = report_["runs"]
    for cells, run in zip(zip(*rows.values()), runs):
        cell = dict(zip(rows, cells))
        assert cell["Images per second"] == f"{run['images_per_s']:,.0f}"
        assert cell["Peak tensor memory"].startswith(
            report.format_bytes(run["peak_memory_bytes"]))
        assert cell["Final train loss"] == f"{run['final_train_loss']:.3f}"
        assert cell["Test accuracy"] == f"{100 * run['test_accuracy']:.1f}%"
        assert cell["Time per epoch"] == f"{run['s_per_epoch']:.1f} s"
    # Each AMP run's improvement over FP32, in time and memory, as the
    # lab's table writes it.
    pattern = r"\((~\d+% (faster|slower)|about the same)\)$"
    for cell in rows["Training time (1 epoch)"][1:]:
        assert re.search(pattern, cell), cell
    for cell in rows["Peak tensor memory"][1:]:
        assert re.search(r"\(~\d+% less\)$", cell), cell
    assert not re.search(r"\(", rows["Peak tensor memory"][0])
    # What the scaler did: only the fp16 run has one.
    fp16 = runs[1]
    assert rows["Loss scale (final)"] == ["-", f"{fp16['final_scale']:g}",
                                          "-"]
    assert rows["Skipped steps"] == [
        "-", f"{fp16['skipped_steps']} of 4", "-"]
    assert re.search(r"^AMP fp16 vs FP32: .*(faster|slower|same), ~\d+% less "
                     r"peak tensor memory\.$", out, re.M)
    assert re.search(r"^GradScaler \(AMP fp16\): 4 steps, ", out, re.M)


def test_tiny_run_json(tiny_run):
    _, rep, _ = tiny_run
    assert rep["interrupted"] is False
    s = rep["settings"]
    assert (s["epochs"], s["batch_size"], s["train_size"], s["test_size"]) \
        == (1, 64, 256, 128)
    assert s["precisions"] == ["fp32", "fp16", "bf16"]
    assert s["data"] == "fake"
    assert rep["environment"]["device"] == "cpu"
    runs = rep["runs"]
    assert [r["precision"] for r in runs] == ["fp32", "fp16", "bf16"]
    for r in runs:
        assert r["status"] == "done"
        assert (r["steps"], r["images"], r["test_images"]) == (4, 256, 128)
        assert r["epochs_completed"] == 1 and len(r["epochs"]) == 1
        epoch = r["epochs"][0]
        assert (epoch["batches"], epoch["images"]) == (4, 256)
        assert epoch["time_s"] == pytest.approx(r["train_time_s"])
        assert r["images_per_s"] == pytest.approx(256 / r["train_time_s"])
        cores = os.cpu_count() or 1
        assert 0 < r["cpu_time_s"] <= cores * r["train_time_s"] + 0.5
        assert len(r["loss_curve"]) == 4
        assert r["final_train_loss"] == pytest.approx(
            sum(r["loss_curve"]) / 4)
        assert 0.0 <= r["test_accuracy"] <= 1.0
        assert r["peak_memory_bytes"] > 0 and r["peak_rss_bytes"] > 0
    fp32, fp16, bf16 = runs
    # The same initial weights and the same first batch: the first losses
    # agree to the precision of the low dtype.
    assert fp16["loss_curve"][0] == pytest.approx(fp32["loss_curve"][0],
                                                  abs=0.02)
    assert bf16["loss_curve"][0] == pytest.approx(fp32["loss_curve"][0],
                                                  abs=0.05)
    # Half-size activations: both AMP runs peak lower than FP32.
    for amp in (fp16, bf16):
        assert amp["peak_memory_bytes"] < fp32["peak_memory_bytes"]
        assert amp["memory_saved_vs_fp32"] == pytest.approx(
            1 - amp["peak_memory_bytes"] / fp32["peak_memory_bytes"])
        assert amp["time_saved_vs_fp32"] == pytest.approx(
            1 - fp32["images_per_s"] / amp["images_per_s"])
    assert fp32["time_saved_vs_fp32"] is None
    # The scale curve: one value per step for the scaler's run only.
    assert fp16["grad_scaler"] and len(fp16["scale_curve"]) == 4
    assert fp16["scale_curve"][-1] == fp16["final_scale"]
    assert fp16["skipped_steps"] == fp16["epochs"][0]["skipped_steps"]
    assert fp32["scale_curve"] == [] and bf16["scale_curve"] == []
    assert fp32["skipped_steps"] is None and bf16["final_scale"] is None


# ----------------------------------------------------------------------------
# options


def _error(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main(list(args))
    assert e.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--epochs", "0"], "argument --epochs: must be positive, got 0"),
    (["--batch-size", "abc"],
     "argument --batch-size: expected an integer, got 'abc'"),
    (["--train-size", "-5"], "argument --train-size: must be positive"),
    (["--test-size", "-1"], "argument --test-size: must be >= 0"),
    (["--workers", "-1"], "argument --workers: must be >= 0"),
    (["--lr", "0"], "argument --lr: must be a positive finite number"),
    (["--lr", "nan"], "argument --lr: must be a positive finite number"),
    (["--precision", "fp32,fp8"],
     "unknown precision 'fp8': choose from fp32, fp16, bf16"),
    (["--precision", ","], "no precision given"),
    (["--preset", "full"], "argument --preset: invalid choice: 'full'"),
    (["--device", "tpu"], "--device: expected auto, cpu or cuda, got 'tpu'"),
    (["--download", "--data", "fake"],
     "--download fetches CIFAR-10; it cannot be combined with --data fake"),
    (["--json", "/nonexistent-folder/x.json"],
     "--json /nonexistent-folder/x.json: the folder /nonexistent-folder "
     "does not exist"),
    (["--plot", "/"], "is a folder"),
])
def test_bad_options(capsys, args, message):
    err = _error(capsys, *args)
    assert err.startswith("usage: python -m ampc.lab")
    assert message in err


def test_cuda_without_gpu_says_what_to_use(capsys):
    if ampc.cuda.is_available():
        pytest.skip("this machine has a usable GPU")
    err = _error(capsys, "--device", "cuda")
    assert "--device cuda: " in err
    assert ("no CUDA GPU was found" in err
            or "built without CUDA" in err)
    assert "use --device cpu" in err and "--device auto" in err


def test_auto_device_is_cpu_without_gpu():
    parser = cli.build_parser()
    want = "cuda" if ampc.cuda.is_available() else "cpu"
    assert cli._resolve_device(parser, "auto") == want
    assert cli._resolve_device(parser, "CPU") == "cpu"


def test_presets_and_explicit_options():
    parser = cli.build_parser()
    args = parser.parse_args([])
    assert cli._settings(args, cli.PRESETS[args.preset]) == {
        "epochs": 2, "batch_size": 256, "train_size": 20000,
        "test_size": 5000, "workers": 0}
    args = parser.parse_args(["--preset", "lab"])
    # The lab's scripts: 5 epochs of all the data, batch 256, 4 workers.
    assert cli._settings(args, cli.PRESETS["lab"]) == {
        "epochs": 5, "batch_size": 256, "train_size": None,
        "test_size": None, "workers": 4}
    args = parser.parse_args(["--preset", "lab", "--epochs", "1",
                              "--test-size", "0"])
    s = cli._settings(args, cli.PRESETS["lab"])
    assert (s["epochs"], s["test_size"], s["batch_size"]) == (1, 0, 256)
    assert parser.parse_args(["--precision", "bf16,FP32"]).precision == (
        "bf16", "fp32")


# ----------------------------------------------------------------------------
# data


SMALL = ["--precision", "fp32", "--train-size", "64", "--test-size", "32",
         "--batch-size", "32", "--epochs", "1", "--no-progress"]


def test_data_fake(capsys, tmp_path, monkeypatch):
    # A CIFAR-10 folder under ./data is ignored with --data fake.
    write_cifar_folder(str(tmp_path / "data"), per_batch=20)
    monkeypatch.chdir(tmp_path)
    assert main(["--data", "fake", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "not found" not in out
    assert out.splitlines()[0] == ("ampc lab: the lab's SimpleCNN on "
                                   "FakeCIFAR10 (built in): 64 training / "
                                   "32 test images")
    assert _table(out)["Metric"] == ["FP32 (baseline)"]
    assert "No FP32 run" not in out


def test_data_not_found_names_the_folder(capsys, tmp_path):
    assert main(["--data", str(tmp_path), *SMALL]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first == (
        f"CIFAR-10 not found under {tmp_path} (no "
        f"{os.path.join(str(tmp_path), 'cifar-10-batches-py')}); using the "
        "built-in FakeCIFAR10 (--download fetches CIFAR-10 there, --data "
        "PATH reads it from elsewhere)")


@pytest.mark.parametrize("inner", [False, True])
def test_data_cifar10_folder(capsys, tmp_path, inner):
    folder = write_cifar_folder(str(tmp_path), per_batch=40)
    where = folder if inner else str(tmp_path)
    assert main(["--data", where, "--precision", "fp16", "--train-size",
                 "150", "--test-size", "40", "--batch-size", "50",
                 "--epochs", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        f"ampc lab: the lab's SimpleCNN on CIFAR-10 from {tmp_path}: 150 "
        "training / 40 test images")
    assert "Skipped steps" in out
    data = lab_data.load_data(str(tmp_path))
    assert (len(data.train), len(data.test)) == (200, 40)


def test_download_option_fetches_into_data(capsys, tmp_path, monkeypatch):
    # --download hands download=True to CIFAR10, which fetches the archive
    # into --data when the files are missing (its download and checksums
    # are tested in test_vision.py); here a stand-in writes the folder.
    from ampc.vision.datasets import CIFAR10
    calls = []

    def fake_download(self):
        calls.append(self.root)
        if not os.path.isdir(self.folder):
            write_cifar_folder(self.root, per_batch=40)

    monkeypatch.setattr(CIFAR10, "download", fake_download)
    root = str(tmp_path / "fresh")
    assert main(["--data", root, "--download", *SMALL]) == 0
    out = capsys.readouterr().out
    assert calls == [root]
    assert "not found" not in out
    assert f"CIFAR-10 from {root}: 64 training / 32 test images" in out


def test_data_errors(capsys, tmp_path):
    write_cifar_folder(str(tmp_path), per_batch=10)
    assert main(["--data", str(tmp_path), "--train-size", "60",
                 *SMALL[:2]]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m ampc.lab: error: --train-size 60 is "
                          "more than the 50 images there")
    # A damaged file is an error that says how to repair it, not a
    # silent switch to the built-in set.
    with open(os.path.join(str(tmp_path), "cifar-10-batches-py",
                           "data_batch_3"), "wb") as f:
        f.write(b"not a pickle")
    assert main(["--data", str(tmp_path), *SMALL]) == 1
    err = capsys.readouterr().err
    assert "data_batch_3 is not a valid CIFAR-10 batch file" in err
    assert "download=True" in err


# ----------------------------------------------------------------------------
# Ctrl-C


def test_ctrl_c_prints_the_partial_table(tmp_path):
    path = str(tmp_path / "partial.json")
    # Many short epochs (4 batches each); one loader worker, so that its
    # shutdown is part of what is tested.
    proc = _lab("--data", "fake", "--train-size", "256", "--test-size",
                "64", "--batch-size", "64", "--epochs", "200", "--workers",
                "1", "--json", path, cwd=str(tmp_path))
    os.set_blocking(proc.stdout.fileno(), False)
    seen, deadline = b"", time.monotonic() + 120
    # Wait for the second epoch's progress, so that one epoch finished.
    while b"epoch 2/200" not in seen:
        assert proc.poll() is None, seen.decode()
        assert time.monotonic() < deadline, seen.decode()
        chunk = proc.stdout.read()
        seen += chunk or b""
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    os.set_blocking(proc.stdout.fileno(), True)
    rest, _ = proc.communicate(timeout=60)
    out = (seen + rest).decode()
    assert proc.returncode == 130, out
    assert "Interrupted (Ctrl-C): the table shows what was measured so far " \
        "(0 of 3 runs finished)." in out
    rows = _table(out)
    assert rows["Metric"] == ["FP32 (baseline) [stopped]"]
    done = rows["Epochs done"][0]
    m = re.fullmatch(r"(\d+) of 200( \+ \d+ batch(es)?)?", done)
    assert m and int(m.group(1)) >= 1, done
    assert rows["Test accuracy"] == ["-"]
    assert "Traceback" not in out
    with open(path) as f:
        rep = json.load(f)
    assert rep["interrupted"] is True
    run = rep["runs"][0]
    assert run["status"] == "interrupted"
    assert run["epochs_completed"] == int(m.group(1))
    assert run["steps"] == len(run["loss_curve"]) >= 4
    assert run["test_accuracy"] is None


# ----------------------------------------------------------------------------
# the plot and the progress bars


def test_plot_writes_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = str(tmp_path / "curves.png")
    assert main(["--data", "fake", "--precision", "fp32,fp16",
                 "--train-size", "64", "--test-size", "0", "--batch-size",
                 "32", "--epochs", "1", "--no-progress", "--plot",
                 path]) == 0
    assert f"Plot written to {path}" in capsys.readouterr().out
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), \
        int.from_bytes(head[20:24], "big")
    assert (width, height) == (1200, 450)


def test_plot_without_matplotlib_says_how_to_install(capsys, tmp_path,
                                                     monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = _error(capsys, "--plot", str(tmp_path / "x.png"))
    assert "--plot needs matplotlib, which is not installed: pip install " \
        "matplotlib" in err
    assert not os.path.exists(str(tmp_path / "x.png"))


def test_progress_falls_back_to_plain_text(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert not progress.have_tqdm()
    assert main(["--data", "fake", "--precision", "bf16", "--train-size",
                 "128", "--test-size", "0", "--batch-size", "32",
                 "--epochs", "2"]) == 0
    err = capsys.readouterr().err.splitlines()
    # Not a terminal: a line at each quarter of each epoch.
    assert len(err) == 8
    assert re.fullmatch(r"AMP bf16 epoch 1/2: 1/4 batches, loss \d\.\d{3}, "
                        r"\d+ img/s", err[0])
    assert err[7].startswith("AMP bf16 epoch 2/2: 4/4 batches")


def test_progress_uses_tqdm(capsys):
    pytest.importorskip("tqdm")
    assert main(["--data", "fake", "--precision", "fp32", "--train-size",
                 "64", "--test-size", "0", "--batch-size", "32",
                 "--epochs", "1"]) == 0
    err = capsys.readouterr().err
    assert "FP32 epoch 1/1: 100%" in err and "2/2" in err
    assert "img/s" in err


# ----------------------------------------------------------------------------
# pieces


def test_change_reads_like_the_lab():
    # The lab's own figures: 75 s -> 48 s, 1.8 GB -> 1.1 GB.
    assert report.change(75.0, 48.0, "faster", "slower") == "~36% faster"
    assert report.change(1.8, 1.1, "less", "more") == "~39% less"
    assert report.change(40.0, 50.0, "faster", "slower") == "~25% slower"
    assert report.change(10.0, 10.01, "faster", "slower") == "about the same"
    assert report.format_bytes(1.8 * 2**30) == "1843.2 MiB"
    assert report.format_bytes(12 * 2**30) == "12.0 GiB"


def test_model_is_the_labs(cpu_level):
    model = SimpleCNN()
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == {
        "features.0.weight": (32, 3, 3, 3), "features.0.bias": (32,),
        "features.3.weight": (64, 32, 3, 3), "features.3.bias": (64,),
        "classifier.0.weight": (512, 4096), "classifier.0.bias": (512,),
        "classifier.2.weight": (10, 512), "classifier.2.bias": (10,)}
    x = ampc.randn(3, 3, 32, 32)
    assert model(x).shape == (3, 10)
    # Against the lab's own model in torch with the same weights.
    torch = torch_or_skip()
    tnn = torch.nn
    ref = tnn.Sequential(
        tnn.Conv2d(3, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2, 2),
        tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2, 2),
        tnn.Flatten(), tnn.Linear(4096, 512), tnn.ReLU(),
        tnn.Linear(512, 10))
    sd = model.state_dict()
    names = ["features.0", "features.3", "classifier.0", "classifier.2"]
    for name, layer in zip(names, [ref[0], ref[3], ref[7], ref[9]]):
        layer.weight.data = torch.from_numpy(sd[name + ".weight"].numpy())
        layer.bias.data = torch.from_numpy(sd[name + ".bias"].numpy())
    want = ref(torch.from_numpy(x.numpy())).detach().numpy()
    got = model(x).detach().numpy()
    assert abs(got - want).max() < 1e-4


def test_runner_rejects_unknown_precision():
    with pytest.raises(ValueError, match="unknown precision 'int8'"):
        runner.parse_precisions("int8")


def test_docstrings():
    for mod in (ampc.lab, ampc.lab.model, lab_data, progress, report,
                runner, cli):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, mod.__name__


def test_layers_prints_a_layer_report_per_precision(capsys):
    assert main(["--layers", "--device", "cpu", "--batch-size", "4",
                 "--precision", "fp32,bf16"]) == 0
    out = capsys.readouterr().out
    assert out.count("layer_report: cpu, ") == 2
    assert "FP32, batch 4:" in out and "autocast bfloat16" in out
    for layer in ("features.0", "features.3", "classifier.0",
                  "classifier.2"):
        assert out.count(layer) == 2
    assert "GEMM layers (conv, linear): " in out
