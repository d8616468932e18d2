"""Writes examples/amp_lab.ipynb, the notebook that walks through the lab
with ampc: the data, one FP32 and one AMP step, why the loss is scaled, the
lab's table and plots on small sizes, the scaler backing off from an
overflow, the practice questions' mistakes caught by ampc, and ampc's
overflow finder, scale-aware clip and layer-by-layer timings.

    python examples/make_amp_lab_notebook.py            # cells only
    python examples/make_amp_lab_notebook.py --execute  # with outputs

--execute runs it with nbclient (pip install nbclient nbformat ipykernel)
in a scratch folder, so that it uses the built-in FakeCIFAR10 and leaves
no files behind.  tests/test_notebook.py checks that the notebook holds
exactly these cells and that it runs cleanly from top to bottom.
"""
import argparse
import os
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOK = os.path.join(HERE, "amp_lab.ipynb")

# (kind, source): the notebook, cell by cell.
CELLS = [
    ("markdown", """\
# The mixed-precision lab, with ampc

The lab trains a small CNN on CIFAR-10 in FP32, then again with automatic \
mixed precision (AMP: `autocast` around the forward pass, `GradScaler` \
around backward and the optimizer step), and compares time and memory. \
ampc runs the lab's PyTorch code after changing only its imports \
(`import ampc as torch`), on its own C engine, on the CPU as well as on a GPU.

This notebook walks through it on small sizes (well under a minute on 2 \
CPU cores). The full comparison is one command: `python -m ampc.lab` (a \
quick run), or `python -m ampc.lab --preset lab` (the lab's 5 epochs of \
50,000 images)."""),
    ("code", """\
import warnings

import ampc as torch
import ampc.nn as nn
import ampc.optim as optim
from ampc.lab import PRECISIONS, Lab, LabConfig, SimpleCNN, load_data
from ampc.lab.report import format_table, summary_lines

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
print(f"ampc {torch.__version__} on {device}; CPU kernels "
      f"{torch.backends.cpu.capability()}, "
      f"{torch.get_num_threads()} threads")"""),
    ("markdown", """\
## 1. The data

`load_data` reads CIFAR-10 from `./data/cifar-10-batches-py` (torchvision's \
layout) when it is there; otherwise it says so in one line and uses \
`FakeCIFAR10`, a built-in CIFAR-shaped set that a CNN can learn. The lab's \
transform turns each image into a float32 (3, 32, 32) tensor in [-1, 1]."""),
    ("code", """\
data = load_data("./data", train_size=6144, test_size=1024)
if data.note:
    print(data.note)
print(data.describe())
images, labels = next(iter(torch.utils.data.DataLoader(data.train,
                                                       batch_size=64)))
print(images.shape, images.dtype, labels[:10].tolist())"""),
    ("code", """\
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("pip install matplotlib to see the pictures and plots")
if plt is not None:
    fig, axes = plt.subplots(1, 10, figsize=(10, 1.4), dpi=72)
    for ax, img, label in zip(axes, images, labels.tolist()):
        ax.imshow((img.permute(1, 2, 0).numpy() + 1) / 2,
                  interpolation="nearest")
        ax.set_title(data.train.classes[label], fontsize=8)
        ax.axis("off")
    plt.show()"""),
    ("markdown", """\
## 2. One step in FP32, one with AMP

The lab's three AMP changes: a `GradScaler`, `autocast` around the forward \
pass and the loss, and the scaler around backward, step and update. Inside \
`autocast` the convolutions and linear layers run in float16 while the loss \
is computed in float32; the weights and their gradients stay float32."""),
    ("code", """\
torch.manual_seed(0)
model = SimpleCNN().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
inputs, labels = images.to(device), labels.to(device)

# FP32: the baseline step
optimizer.zero_grad()
outputs = model(inputs)
loss = criterion(outputs, labels)
loss.backward()
optimizer.step()
print(f"FP32      outputs {outputs.dtype}, loss {loss.dtype}, "
      f"{loss.item():.4f}")

# AMP CHANGE 1: a GradScaler
scaler = torch.amp.GradScaler(device.type)
optimizer.zero_grad()
# AMP CHANGE 2: autocast around the forward pass
with torch.autocast(device.type, dtype=torch.float16):
    outputs = model(inputs)
    loss = criterion(outputs, labels)
print(f"AMP fp16  outputs {outputs.dtype}, loss {loss.dtype}, "
      f"{loss.item():.4f}")
# AMP CHANGE 3: the scaler around backward, step and update
scaled = scaler.scale(loss)
print(f"scaled loss {scaled.item():.1f} = loss x {scaler.get_scale():g}")
scaled.backward()
w = model.classifier[0].weight
print(f"weight {w.dtype}, its gradient {w.grad.dtype}")
scaler.step(optimizer)
scaler.update()
stats = scaler.stats()
print({k: stats[k] for k in ("steps", "skipped_steps", "scale")})"""),
    ("markdown", """\
Why scale the loss: float16's smallest positive value is 2<sup>-24</sup> \
(about 6e-8), so small gradients flush to zero. Multiplied by the scale \
(65536 here) they survive, and `scaler.step` divides them back before the \
update. bfloat16 keeps float32's exponent range, so it needs no scaler."""),
    ("code", """\
g = torch.tensor([1e-3, 1e-6, 1e-8, 1e-9])
print("float16          ", g.half().float().tolist())
print("float16 x 65536  ", ((g * 65536).half().float() / 65536).tolist())
print("bfloat16         ", g.bfloat16().float().tolist())"""),
    ("markdown", """\
## 3. The lab: FP32, AMP fp16 and AMP bf16

`Lab` trains a fresh SimpleCNN per precision from the same initial weights \
and batch order, and measures what `python -m ampc.lab` prints: training \
time, time per epoch, images per second, ampc's peak tensor memory \
(`ampc.max_memory_allocated()`, reset between runs), the process's peak \
resident memory, the final training loss, the test accuracy, and what the \
scaler did. Each AMP run's cells say how it compares with FP32."""),
    ("code", """\
config = LabConfig(epochs=2, batch_size=128, device=str(device),
                   precisions=("fp32", "fp16", "bf16"))
lab = Lab(config, data, progress=False)
for name in config.precisions:
    r = lab.run_one(PRECISIONS[name])
    print(f"{r.label}: {r.train_time_s:.1f} s, "
          f"test accuracy {100 * r.test_accuracy:.1f}%")
print()
print(format_table(lab.results, config.epochs))
print()
print("\\n".join(summary_lines(lab.results)))"""),
    ("markdown", """\
Peak tensor memory falls with AMP because the activations saved for \
backward are half the size. The time depends on the machine: on a GPU with \
Tensor Cores float16 matrix products are much faster; on a CPU the gain \
comes from moving half the bytes, and from bfloat16 dot products where the \
CPU has them (AVX-512 BF16). Small runs like this one are noisy: \
`python -m ampc.lab` measures on more data."""),
    ("code", """\
if plt is not None:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for r, style in zip(lab.results, ["-", "--", ":"]):
        ax.plot(range(1, r.steps + 1), r.loss_curve, linestyle=style,
                label=r.label)
    ax.set_title("training loss per step")
    ax.set_xlabel("step")
    ax.legend()
    plt.show()"""),
    ("markdown", """\
The three curves nearly lie on top of each other: with the same weights and \
batches, AMP trains like FP32."""),
    ("markdown", """\
## 4. The scaler backing off from an overflow

Started with a scale far too large, the float16 gradients overflow: each \
such step is skipped (the weights are not touched) and the scale halved, \
until it fits; after `growth_interval` good steps it doubles again. \
`scaler.stats(model)` names the layers whose gradients held inf or NaN."""),
    ("code", """\
torch.manual_seed(0)
model = SimpleCNN().to(device)
optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**22,
                              growth_interval=3)
loader = torch.utils.data.DataLoader(data.train, batch_size=64, shuffle=True)
scales, skipped = [], []
for step, (inputs, labels) in zip(range(1, 11), loader):
    inputs, labels = inputs.to(device), labels.to(device)
    optimizer.zero_grad()
    with torch.autocast(device.type, dtype=torch.float16):
        loss = criterion(model(inputs), labels)
    scales.append(scaler.get_scale())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    stats = scaler.stats(model)
    skipped.append(stats["last_step_skipped"])
    what = ("skipped, overflow in " + ", ".join(sorted(stats["overflow"]))
            if skipped[-1] else "applied")
    print(f"step {step:2d}  scale {scales[-1]:>9.0f}  {what}")
print(f"{stats['skipped_steps']} of {stats['steps']} steps skipped; "
      f"scale now {scaler.get_scale():g}")"""),
    ("code", """\
if plt is not None:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    steps = range(1, len(scales) + 1)
    ax.step(steps, scales, where="mid", label="loss scale")
    ax.plot([s for s, k in zip(steps, skipped) if k],
            [v for v, k in zip(scales, skipped) if k], "x", color="tab:red",
            label="skipped step (inf/NaN gradients)")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("step")
    ax.legend()
    plt.show()"""),
    ("markdown", """\
## 5. The practice questions' mistakes, caught

Each cell below makes one mistake from the practice questions; ampc stops \
it, or warns once, with a message that says what to do instead. `caught` \
runs a step and prints what ampc said."""),
    ("code", """\
def caught(step):
    \"\"\"Run step() and print ampc's exception or warnings.\"\"\"
    raised = False
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            step()
        except Exception as e:
            raised = True
            print(f"{type(e).__name__}: {e}")
    for w in said:
        print(f"{w.category.__name__}: {w.message}")
    if not (raised or said):
        print("no error, no warning")


def setup(scaled=True):
    \"\"\"A fresh model, optimizer and scaler, and one batch's loss under
    float16 autocast, backpropagated through the scaler when scaled.\"\"\"
    torch.manual_seed(0)
    model = SimpleCNN().to(device)
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type)
    with torch.autocast(device.type, dtype=torch.float16):
        loss = criterion(model(inputs), labels)
    (scaler.scale(loss) if scaled else loss).backward()
    return model, optimizer, scaler"""),
    ("markdown", """\
**`autocast(device=...)`** (question 2, option C): autocast takes a device \
*type*."""),
    ("code", """\
def step():
    with torch.autocast(device="cpu"):
        pass

caught(step)"""),
    ("markdown", """\
**An integer autocast dtype** (question 2, option D, `torch.int32`; ampc's \
integer dtype is int64): autocast runs ops in a floating-point dtype."""),
    ("code", """\
def step():
    with torch.autocast(device_type=device.type, dtype=torch.int64):
        pass

caught(step)"""),
    ("markdown", """\
**Clipping before `unscale_`** (question 5, option C): the gradients are \
still multiplied by the scale, so `max_norm` would clip them far too hard."""),
    ("code", """\
def step():
    model, optimizer, scaler = setup()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(optimizer)
    scaler.update()

caught(step)"""),
    ("markdown", """\
**`unscale_` twice** in one iteration: the second would divide by the scale \
again."""),
    ("code", """\
def step():
    model, optimizer, scaler = setup()
    scaler.unscale_(optimizer)
    scaler.unscale_(optimizer)

caught(step)"""),
    ("markdown", """\
**`zero_grad` between backward and step** (question 5, option A): the \
gradients are gone before the scaler can check and apply them."""),
    ("code", """\
def step():
    model, optimizer, scaler = setup()
    optimizer.zero_grad()
    scaler.step(optimizer)

caught(step)"""),
    ("markdown", """\
**Step without scaling** (question 4): `loss.backward()` instead of \
`scaler.scale(loss).backward()`, then `scaler.step`."""),
    ("code", """\
def step():
    model, optimizer, scaler = setup(scaled=False)
    scaler.step(optimizer)

caught(step)"""),
    ("markdown", """\
**A GradScaler with bfloat16 autocast**: not wrong, but useless: bfloat16 \
has float32's range, so there is nothing to rescue and the scaling only \
costs time. ampc warns once."""),
    ("code", """\
def step():
    torch.manual_seed(0)
    model = SimpleCNN().to(device)
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = criterion(model(inputs), labels)
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()

caught(step)"""),
    ("markdown", """\
**The right order** (question 5, option D): `unscale_`, then clip, then \
`step` and `update`. Nothing to report."""),
    ("code", """\
def step():
    model, optimizer, scaler = setup()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(optimizer)
    scaler.update()

caught(step)"""),
    ("markdown", """\
## 6. Beyond PyTorch: where an overflow began, a clip that knows the scale

`torch.amp.detect_overflow(model)` checks every layer's output and the \
gradient of that output, and says where inf/NaN first appeared; here the \
too-large scale of section 4 overflows a float16 gradient in backward. \
`scaler.clip_grad_norm_(optimizer, max_norm)` is `unscale_` plus \
`clip_grad_norm_` in one call, and returns the true (unscaled) norm to log."""),
    ("code", """\
torch.manual_seed(0)
model = SimpleCNN().to(device)
optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**40)
with torch.amp.detect_overflow(model) as report:
    with torch.autocast(device.type, dtype=torch.float16):
        loss = criterion(model(inputs), labels)
    scaler.scale(loss).backward()
print(report)
optimizer.zero_grad()
scaler = torch.amp.GradScaler(device.type)
with torch.autocast(device.type, dtype=torch.float16):
    loss = criterion(model(inputs), labels)
scaler.scale(loss).backward()
norm = scaler.clip_grad_norm_(optimizer, max_norm=1.0)
print(f"gradient norm before clipping: {norm.item():.4f} "
      f"(the scale was {scaler.get_scale():g})")"""),
    ("markdown", """\
`torch.amp.layer_report(model, inputs)` times a training step layer by \
layer and notes what keeps a layer off the GPU's tensor cores (on the CPU, \
that 16-bit math runs at float32's speed)."""),
    ("code", """\
print(torch.amp.layer_report(model, inputs, steps=2))"""),
    ("markdown", """\
## 7. From the command line

```bash
python -m ampc.lab                  # the quick run: minutes on 2 cores
python -m ampc.lab --preset lab     # the lab's settings: 5 epochs, 50,000
python -m ampc.lab --precision fp32,bf16 --json lab.json --plot lab.png
python -m ampc.lab --layers         # one step, timed layer by layer
```

The lab's two scripts, unchanged but for their imports, are beside this \
notebook: `fp32_baseline.py` and `amp_optimized.py`."""),
]


def build():
    """The notebook as an nbformat NotebookNode (no outputs)."""
    import nbformat
    from nbformat import v4
    nb = v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python",
                       "name": "python3"},
        "language_info": {"name": "python"},
    }
    for kind, source in CELLS:
        cell = (v4.new_markdown_cell(source) if kind == "markdown"
                else v4.new_code_cell(source))
        # Stable ids keep the file's diff small between regenerations.
        cell["id"] = f"cell-{len(nb.cells):02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def execute(nb, timeout=300):
    """Run ``nb`` in a scratch folder with nbclient; returns it."""
    from nbclient import NotebookClient
    with tempfile.TemporaryDirectory() as scratch:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": scratch}}).execute()
    return nb


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execute", action="store_true",
                        help="run the notebook and keep its outputs")
    parser.add_argument("--output", default=NOTEBOOK)
    args = parser.parse_args()
    import nbformat
    nb = build()
    if args.execute:
        execute(nb)
    nbformat.write(nb, args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
