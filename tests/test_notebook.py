"""examples/amp_lab.ipynb: it holds the cells its generator writes, and it
runs cleanly from top to bottom under nbclient (skipped where nbclient,
nbformat or ipykernel is not installed), showing the lab's table and the
messages ampc gives for the practice questions' mistakes."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "examples", "amp_lab.ipynb")
GENERATOR = os.path.join(ROOT, "examples", "make_amp_lab_notebook.py")

# What each part of the notebook must show: the table, the scaler backing
# off, and ampc's message for each mistake.
EXPECTED = [
    "FakeCIFAR10 (built in): 6,144 training / 1,024 test images",
    "outputs ampc.float16, loss ampc.float32, ",
    "FP32 (baseline)",
    "Peak tensor memory",
    "AMP fp16 vs FP32:",
    "skipped, overflow in",
    "TypeError: autocast() got an unexpected keyword argument 'device'",
    "TypeError: autocast(): dtype must be a floating point dtype",
    "UserWarning: clip_grad_norm_(): these gradients come from a loss "
    "scaled by GradScaler",
    "RuntimeError: unscale_() has already been called on this optimizer",
    "AssertionError: No inf checks were recorded for this optimizer.",
    "AssertionError: Attempted step but _scale is None.",
    "UserWarning: GradScaler is not needed with bfloat16 autocast",
    "no error, no warning",
]


def _generator():
    spec = importlib.util.spec_from_file_location("make_amp_lab_notebook",
                                                  GENERATOR)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _text(nb):
    """All stream and error text the notebook's cells printed."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                parts.append(out.text)
            elif out.output_type == "error":
                parts.append(f"{out.ename}: {out.evalue}")
    return "".join(parts)


def test_notebook_is_the_generators():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    want = _generator().CELLS
    assert [(c.cell_type, c.source) for c in nb.cells] == list(want)


def test_notebook_runs_top_to_bottom(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    # A scratch folder: no ./data there, so the notebook uses the built-in
    # FakeCIFAR10, and whatever it writes stays there.
    client = nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}})
    client.execute()           # raises CellExecutionError on any error
    errors = [out for cell in nb.cells for out in cell.get("outputs", [])
              if out.output_type == "error"]
    assert not errors
    text = _text(nb)
    for expected in EXPECTED:
        assert expected in text, expected
    assert "Traceback" not in text
