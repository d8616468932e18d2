"""The lab's two scripts, examples/fp32_baseline.py and
examples/amp_optimized.py, run unchanged (only their imports differ from
the lab's) to completion on a small CIFAR-10 folder in the real file
format, with ``download=True`` fetching nothing."""
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

import ampc
from ampc.vision.datasets import CIFAR10, FakeCIFAR10

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
SCRIPTS = ["fp32_baseline.py", "amp_optimized.py"]
IMPORTS = [
    "import ampc as torch",
    "import ampc.nn as nn",
    "import ampc.optim as optim",
    "import ampc.vision as torchvision",
    "import ampc.vision.transforms as transforms",
    "import time",
]
# An address where nothing listens: were a script to try a download, it
# would fail at once instead of fetching CIFAR-10.
NO_DOWNLOAD = "http://127.0.0.1:9/cifar-10-python.tar.gz"


# ----------------------------------------------------------------------------
# a small CIFAR-10 folder


def write_cifar_folder(root, per_batch, seed=0):
    """root/cifar-10-batches-py with the seven files of the official
    archive, in its format (pickled dicts with bytes keys, 'data' rows
    (N, 3072) uint8 in CHW order, 'labels'), ``per_batch`` images each,
    drawn from FakeCIFAR10 so that a model can learn them.  Returns the
    folder."""
    folder = os.path.join(root, CIFAR10.base_folder)
    os.makedirs(folder, exist_ok=True)
    splits = {"train": FakeCIFAR10(train=True, size=5 * per_batch,
                                   seed=seed),
              "test": FakeCIFAR10(train=False, size=per_batch, seed=seed)}
    names = [(name, "train", k) for k, (name, _) in
             enumerate(CIFAR10.train_list)]
    names += [(CIFAR10.test_list[0][0], "test", 0)]
    for name, split, k in names:
        ds = splits[split]
        lo, hi = k * per_batch, (k + 1) * per_batch
        rows = ds.data[lo:hi].transpose(0, 3, 1, 2).reshape(-1, 3072)
        entry = {b"batch_label": f"{split} batch {k + 1}".encode(),
                 b"labels": list(ds.targets[lo:hi]),
                 b"data": np.ascontiguousarray(rows),
                 b"filenames": [b"img_%d.png" % i for i in range(lo, hi)]}
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump(entry, f, protocol=2)
    meta = {b"num_cases_per_batch": per_batch,
            b"label_names": [c.encode() for c in FakeCIFAR10.classes],
            b"num_vis": 3072}
    with open(os.path.join(folder, CIFAR10.meta["filename"]), "wb") as f:
        pickle.dump(meta, f, protocol=2)
    return folder


def _snapshot(folder):
    return {name: os.stat(os.path.join(folder, name)).st_mtime_ns
            for name in sorted(os.listdir(folder))}


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory):
    """A working folder holding ./data/cifar-10-batches-py (150 images per
    batch file: 750 for training, 3 batches of the scripts' 256)."""
    work = tmp_path_factory.mktemp("lab")
    write_cifar_folder(str(work / "data"), per_batch=150)
    return work


def _run(script, cwd):
    env = dict(os.environ, AMPC_CIFAR10_URL=NO_DOWNLOAD)
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script)], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=180)


# ----------------------------------------------------------------------------
# the scripts are the lab's, imports aside


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_change_only_the_imports(script):
    with open(os.path.join(EXAMPLES, script)) as f:
        lines = f.read().splitlines()
    assert lines[:len(IMPORTS)] == IMPORTS
    body = "\n".join(lines[len(IMPORTS):])
    # Everything else is PyTorch code, written against torch's names.
    assert "ampc" not in body
    assert not re.search(r"^\s*(import|from)\s", body, re.M)
    for name in ("torch.utils.data.DataLoader", "torchvision.datasets.CIFAR10",
                 "download=True", "class SimpleCNN(nn.Module)",
                 "torch.device(\"cuda:0\" if torch.cuda.is_available() else "
                 "\"cpu\")"):
        assert name in body


def test_amp_script_has_the_three_amp_changes():
    with open(os.path.join(EXAMPLES, "amp_optimized.py")) as f:
        src = f.read()
    for line in ("scaler = torch.cuda.amp.GradScaler()",
                 "with torch.cuda.amp.autocast():",
                 "scaler.scale(loss).backward()",
                 "scaler.step(optimizer)",
                 "scaler.update()"):
        assert line in src


# ----------------------------------------------------------------------------
# and they run


@pytest.mark.parametrize("script, start, end", [
    ("fp32_baseline.py", "Starting FP32 baseline training...",
     "Finished FP32 Training in"),
    ("amp_optimized.py", "Starting AMP optimized training...",
     "Finished AMP Training in"),
])
def test_script_runs_to_completion(lab_dir, script, start, end):
    folder = os.path.join(str(lab_dir), "data", CIFAR10.base_folder)
    before = _snapshot(folder)
    proc = _run(script, str(lab_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == start
    m = re.fullmatch(re.escape(end) + r" (\d+\.\d\d) seconds", out[-1])
    assert m, proc.stdout
    assert float(m.group(1)) > 0
    # download=True found the files and fetched nothing: no archive, no
    # change to the folder, nothing said about downloading.
    assert _snapshot(folder) == before
    assert not os.path.exists(os.path.join(str(lab_dir), "data",
                                           CIFAR10.filename))
    assert "Download" not in proc.stderr
    assert "Traceback" not in proc.stderr
    if script == "amp_optimized.py":
        # PyTorch's behaviour on a machine without a GPU: the old
        # spellings warn that they are deprecated, and the scaler for
        # "cuda" warns and disables itself, so the script still runs.
        assert "FutureWarning" in proc.stderr
        if not ampc.cuda.is_available():
            assert "CUDA is not available" in proc.stderr


def _example_rows(script, row):
    """The rows matching ``row`` that examples/``script`` prints in three
    steps of batch 16 (it must exit cleanly)."""
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), "--steps", "3",
         "--batch", "16"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return re.findall(row, out.stdout)


def test_gradient_penalty_example_runs():
    """examples/gradient_penalty.py: PyTorch's AMP gradient-penalty recipe
    (create_graph through the lab's CNN under a GradScaler) trains a few
    steps with finite losses and norms."""
    rows = _example_rows("gradient_penalty.py",
                         r"step +(\d+) +loss ([\d.]+) +grad norm ([\d.]+) +"
                         r"scale (\d+)")
    assert [r[0] for r in rows] == ["0", "2"]
    assert all(0 < float(r[1]) < 10 and 0 < float(r[2]) < 1e3
               for r in rows)


def test_dcgan_example_runs():
    """examples/dcgan_amp.py: PyTorch's AMP recipe for two models and two
    optimizers sharing one GradScaler (ConvTranspose2d generator, Conv2d
    discriminator) trains a few steps with finite losses."""
    rows = _example_rows("dcgan_amp.py",
                         r"step +(\d+) +loss D ([\d.]+) +loss G ([\d.]+) +"
                         r"scale (\d+)")
    assert [r[0] for r in rows] == ["0", "2"]
    assert all(0 < float(r[1]) < 10 and 0 < float(r[2]) < 20
               for r in rows)
