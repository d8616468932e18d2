"""Training and measuring the lab's runs: the SimpleCNN trained in FP32, in
AMP float16 (autocast + GradScaler) and in AMP bfloat16 (autocast alone),
each from the same initial weights and batch order, timed per epoch, with
ampc's peak tensor memory (on the GPU for --device cuda), the process's
peak RSS, the loss per step, the loss scale per step, and the test
accuracy.

On a GPU, batches come from pinned memory and are copied with
non_blocking=True, the losses and scales of the steps stay on the device
and are read in one copy every few dozen steps (a read waits for the GPU,
so reading every step would stall the queue of work), and each epoch's
time is taken after ampc.cuda.synchronize().

>>> from ampc.lab.data import load_data
>>> from ampc.lab.runner import Lab, LabConfig
>>> data = load_data("fake", train_size=64, test_size=32)
>>> lab = Lab(LabConfig(epochs=1, batch_size=32, precisions=("fp16",)),
...           data, progress=False)
>>> [r.status for r in lab.run()]
['done']
"""
import gc
import resource
import sys
import time
from dataclasses import dataclass, field

from .. import _C, autocast, bfloat16, cuda, empty, float16, float32
from .. import manual_seed, no_grad, zeros
from .. import max_memory_allocated, reset_peak_memory_stats
from .. import device as _device
from .. import nn, optim
from ..amp import GradScaler
from ..utils.data import DataLoader, Generator
from .model import SimpleCNN
from .progress import EpochProgress

__all__ = ["Precision", "PRECISIONS", "parse_precisions", "LabConfig",
           "EpochStats", "RunResult", "Lab"]

# On a GPU, the steps whose loss (and scale) are read from the device in
# one copy: few enough reads to keep the GPU's queue full, often enough
# for a live progress bar.
GPU_READ_EVERY = 32


# ----------------------------------------------------------------------------
# what a run is


@dataclass(frozen=True)
class Precision:
    """One way of training: ``name`` as given to --precision, ``label`` as
    the table shows it, the autocast dtype (None: no autocast) and whether
    a GradScaler scales the loss.

    >>> PRECISIONS["fp16"].describe()
    'autocast float16 + GradScaler'
    """

    name: str
    label: str
    autocast_dtype: object
    scaler: bool

    def describe(self):
        if self.autocast_dtype is None:
            return "float32 throughout"
        text = f"autocast {self.autocast_dtype.name}"
        return text + " + GradScaler" if self.scaler else text


# bfloat16 has float32's exponent range, so its gradients do not underflow
# and need no loss scaling; float16's do (below 2**-24 they flush to 0).
PRECISIONS = {
    "fp32": Precision("fp32", "FP32", None, False),
    "fp16": Precision("fp16", "AMP fp16", float16, True),
    "bf16": Precision("bf16", "AMP bf16", bfloat16, False),
}


def parse_precisions(text):
    """"fp32,fp16" -> ("fp32", "fp16"): names from PRECISIONS, in the
    order given, each once; ValueError naming a bad one.

    >>> parse_precisions("bf16, fp32,bf16")
    ('bf16', 'fp32')
    """
    names = []
    for part in str(text).split(","):
        name = part.strip().lower()
        if not name:
            continue
        if name not in PRECISIONS:
            raise ValueError(
                f"unknown precision {part.strip()!r}: choose from "
                f"{', '.join(PRECISIONS)} (comma-separated, e.g. "
                "fp32,fp16)")
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError(
            f"no precision given: choose from {', '.join(PRECISIONS)}")
    return tuple(names)


@dataclass
class LabConfig:
    """The settings of a lab run (the defaults are the quick run; the lab's
    own are ``epochs=5, batch_size=256`` on all 50,000 images).

    >>> LabConfig().lr
    0.01
    """

    epochs: int = 2
    batch_size: int = 256
    lr: float = 0.01
    momentum: float = 0.9
    precisions: tuple = ("fp32", "fp16", "bf16")
    device: str = "cpu"
    workers: int = 0
    seed: int = 0


# ----------------------------------------------------------------------------
# what a run measured


@dataclass
class EpochStats:
    """One finished epoch: wall time (data loading included, as in the
    lab's scripts), images, mean batch loss, skipped steps, and the loss
    scale at its end (None without a GradScaler)."""

    epoch: int
    batches: int
    images: int
    time_s: float
    train_loss: float
    skipped_steps: int = 0
    scale: float = None

    @property
    def images_per_s(self):
        return self.images / self.time_s if self.time_s > 0 else 0.0


@dataclass
class RunResult:
    """Everything one run measured, updated as it goes, so that an
    interrupted run still reports what it did.  ``status`` is "running",
    "done" or "interrupted"; ``stage`` is "training" or "testing".
    """

    precision: str
    label: str
    description: str
    epochs_planned: int
    epochs: list = field(default_factory=list)
    loss_curve: list = field(default_factory=list)
    scale_curve: list = field(default_factory=list)
    steps: int = 0
    images: int = 0
    train_time_s: float = 0.0
    # The process's CPU time (user + system) over the same steps: on a
    # machine shared with other jobs it varies less than the wall time.
    cpu_time_s: float = 0.0
    peak_memory_bytes: int = None
    peak_rss_bytes: int = None
    # True where the OS cannot restart the peak RSS count: the figure is
    # then the process's peak since it started.
    rss_since_start: bool = False
    test_accuracy: float = None
    test_loss: float = None
    test_images: int = 0
    scaler: bool = False
    skipped_steps: int = None
    final_scale: float = None
    status: str = "running"
    stage: str = "training"
    device: str = "cpu"

    @property
    def finished(self):
        return self.status == "done"

    @property
    def s_per_epoch(self):
        """Mean wall time of the finished epochs (None before the first)."""
        if not self.epochs:
            return None
        return sum(e.time_s for e in self.epochs) / len(self.epochs)

    @property
    def images_per_s(self):
        if self.train_time_s <= 0:
            return None
        return self.images / self.train_time_s

    @property
    def final_train_loss(self):
        """The mean batch loss of the last finished epoch (of the batches
        so far when none finished)."""
        if self.epochs:
            return self.epochs[-1].train_loss
        if self.loss_curve:
            return sum(self.loss_curve) / len(self.loss_curve)
        return None


# ----------------------------------------------------------------------------
# peak resident memory of the process


def _reset_peak_rss():
    """Restart the kernel's peak-RSS count of this process (Linux: writing
    5 to /proc/self/clear_refs resets VmHWM).  False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cpu_time():
    """This process's user + system CPU time so far (s)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss():
    """This process's peak resident set in bytes (VmHWM, else
    getrusage's ru_maxrss: KiB on Linux, bytes on macOS)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


# ----------------------------------------------------------------------------
# the runs


class Lab:
    """Runs ``config.precisions`` in order on ``data`` (a ``LabData``),
    one ``RunResult`` each in ``results``.  ``progress`` shows a bar per
    epoch on ``stream`` (stderr).  Ctrl-C (KeyboardInterrupt) propagates
    out of ``run()`` with ``results`` holding what was measured, the run
    in progress marked "interrupted".

    >>> from ampc.lab.data import load_data
    >>> lab = Lab(LabConfig(epochs=1, batch_size=16, precisions=("fp32",)),
    ...           load_data("fake", train_size=32, test_size=16),
    ...           progress=False)
    >>> r = lab.run()[0]
    >>> r.steps, r.images, r.test_images
    (2, 32, 16)
    """

    def __init__(self, config, data, progress=True, stream=None):
        self.config = config
        self.data = data
        self.device = _device(config.device)
        self.progress = progress
        self.stream = stream
        self.results = []

    def run(self):
        """Train and test every precision of the config; the results."""
        for name in self.config.precisions:
            self.run_one(PRECISIONS[name])
        return self.results

    def _loader(self, dataset, shuffle):
        cfg = self.config
        gen = Generator().manual_seed(cfg.seed) if shuffle else None
        # Workers kept for the whole run: forking new ones each epoch
        # makes the next training steps pay copy-on-write page faults on
        # all of this process's memory (~0.8 s per fork for the lab's
        # model on 2 cores), which would be timed as training.
        # On a GPU, batches in pinned (page-locked) memory make the copy
        # to the device a queued DMA (non_blocking=True in the loops).
        return DataLoader(dataset, batch_size=cfg.batch_size,
                          shuffle=shuffle, num_workers=cfg.workers,
                          persistent_workers=cfg.workers > 0,
                          generator=gen, pin_memory=self._on_gpu)

    @property
    def _on_gpu(self):
        return self.device.type == "cuda"

    def _synchronize(self):
        """Wait for the GPU's queued work (nothing on the CPU), so that a
        clock read afterwards times work done, not work queued."""
        if self._on_gpu:
            cuda.synchronize(str(self.device))

    def run_one(self, precision):
        """Train a fresh SimpleCNN with ``precision`` and test it."""
        cfg = self.config
        result = RunResult(precision.name, precision.label,
                           precision.describe(), cfg.epochs,
                           scaler=precision.scaler, device=str(self.device))
        self.results.append(result)
        scaler = None
        try:
            # The previous run's model, optimizer state and batches must
            # be gone before the peak counts restart, or they would count
            # here; and so must the allocator's cache of freed blocks,
            # which would otherwise stay resident (RSS) and make this
            # run's first steps cheaper than the previous run's.
            gc.collect()
            self._synchronize()
            _C.empty_cache()
            if self._on_gpu:
                cuda.reset_peak_memory_stats(str(self.device))
            else:
                reset_peak_memory_stats(str(self.device))
            result.rss_since_start = not _reset_peak_rss()
            # Every run starts from the same weights and sees the same
            # batches.
            manual_seed(cfg.seed)
            model = SimpleCNN().to(self.device)
            optimizer = optim.SGD(model.parameters(), lr=cfg.lr,
                                  momentum=cfg.momentum)
            if precision.scaler:
                scaler = GradScaler(self.device.type)
            train_loader = self._loader(self.data.train, shuffle=True)
            for epoch in range(1, cfg.epochs + 1):
                self._train_epoch(result, epoch, model, optimizer, scaler,
                                  precision, train_loader)
            self._record_peaks(result)
            result.stage = "testing"
            self._test(result, model, precision)
            result.status = "done"
        finally:
            if result.status != "done":
                result.status = "interrupted"
                if result.peak_memory_bytes is None:
                    self._record_peaks(result)
            if scaler is not None:
                stats = scaler.stats()
                result.skipped_steps = stats["skipped_steps"]
                result.final_scale = scaler.get_scale()
        return result

    def _record_peaks(self, result):
        if self._on_gpu:
            result.peak_memory_bytes = cuda.max_memory_allocated(
                str(self.device))
        else:
            result.peak_memory_bytes = max_memory_allocated(str(self.device))
        result.peak_rss_bytes = _peak_rss()

    def _train_epoch(self, result, epoch, model, optimizer, scaler,
                     precision, loader):
        """One pass over the training set; the lab's loop, with
        autocast and the scaler where ``precision`` asks for them."""
        criterion = nn.CrossEntropyLoss()
        dev = self.device
        on_gpu = self._on_gpu
        bar = EpochProgress(len(loader),
                            f"{precision.label} epoch {epoch}/"
                            f"{self.config.epochs}",
                            stream=self.stream, enabled=self.progress)
        skipped_before = scaler.stats()["skipped_steps"] if scaler else 0
        time_before = result.train_time_s
        cpu_before = result.cpu_time_s
        tally = {"batches": 0, "images": 0, "loss_sum": 0.0}
        # GPU only: the device buffers the losses (and scales) of the steps
        # not read yet are copied into, and the batch sizes of those steps.
        if on_gpu:
            loss_buf = zeros(GPU_READ_EVERY, dtype=float32, device=dev)
            scale_buf = empty(GPU_READ_EVERY, dtype=float32, device=dev) \
                if scaler is not None else None
        pending = []

        def record(values, scales, sizes):
            # Book steps whose loss values reached the host.
            for k, (value, n) in enumerate(zip(values, sizes)):
                tally["batches"] += 1
                tally["images"] += n
                tally["loss_sum"] += value
                result.loss_curve.append(value)
                if scales is not None:
                    result.scale_curve.append(scales[k])
                result.steps += 1
                result.images += n
                elapsed = time.perf_counter() - start
                result.train_time_s = time_before + elapsed
                result.cpu_time_s = cpu_before + _cpu_time() - cpu_start
                bar.update(loss=tally["loss_sum"] / tally["batches"],
                           images_per_s=tally["images"] / elapsed)

        def read_pending():
            # One device-to-host copy for all pending steps (it waits for
            # the GPU to finish them).
            if not pending:
                return
            n = len(pending)
            values = loss_buf[:n].tolist()
            scales = scale_buf[:n].tolist() if scale_buf is not None \
                else None
            sizes = list(pending)
            pending.clear()
            record(values, scales, sizes)

        model.train()
        self._synchronize()
        start = time.perf_counter()
        cpu_start = _cpu_time()
        try:
            for inputs, labels in loader:
                inputs = inputs.to(dev, non_blocking=on_gpu)
                labels = labels.to(dev, non_blocking=on_gpu)
                optimizer.zero_grad()
                if precision.autocast_dtype is None:
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                    loss.backward()
                    optimizer.step()
                else:
                    with autocast(dev.type, dtype=precision.autocast_dtype):
                        outputs = model(inputs)
                        loss = criterion(outputs, labels)
                    if scaler is not None:
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        loss.backward()
                        optimizer.step()
                n = labels.shape[0]
                if on_gpu:
                    slot = len(pending)
                    loss_buf[slot].copy_(loss.detach())
                    if scale_buf is not None:
                        # update() rewrites the scale tensor in place: copy
                        # the value this step ended with.
                        scale_buf[slot].copy_(scaler._get_scale_async())
                    pending.append(n)
                    if len(pending) == GPU_READ_EVERY:
                        read_pending()
                else:
                    record([loss.item()],
                           [scaler.get_scale()] if scaler else None, [n])
            read_pending()
        finally:
            if pending:
                # Interrupted: book the steps the GPU has done, unless the
                # GPU itself failed (the exception in flight says so).
                try:
                    read_pending()
                except RuntimeError:
                    pending.clear()
            bar.close()
        if tally["batches"] == 0:
            return
        # The last read waited for the GPU: the clock has the whole epoch.
        result.train_time_s = time_before + time.perf_counter() - start
        result.epochs.append(EpochStats(
            epoch, tally["batches"], tally["images"],
            result.train_time_s - time_before,
            tally["loss_sum"] / tally["batches"],
            (scaler.stats()["skipped_steps"] - skipped_before)
            if scaler else 0,
            scaler.get_scale() if scaler else None))

    def _test(self, result, model, precision):
        """Accuracy and mean loss on the test set, under the run's
        autocast (as the model would be used).  On a GPU the sums stay on
        the device until the end (one read, not two per batch)."""
        if len(self.data.test) == 0:
            return
        criterion = nn.CrossEntropyLoss(reduction="sum")
        dev = self.device
        on_gpu = self._on_gpu
        correct, total, loss_sum = 0, 0, 0.0
        model.eval()
        with no_grad():
            for inputs, labels in self._loader(self.data.test, False):
                inputs = inputs.to(dev, non_blocking=on_gpu)
                labels = labels.to(dev, non_blocking=on_gpu)
                with autocast(dev.type, dtype=precision.autocast_dtype,
                              enabled=precision.autocast_dtype is not None):
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                hits = (outputs.argmax(1) == labels).sum()
                if on_gpu:
                    # Device tensors: float32 and int64 running sums.
                    loss_sum = loss.float() + loss_sum
                    correct = hits + correct
                else:
                    loss_sum += loss.item()
                    correct += hits.item()
                total += labels.shape[0]
        model.train()
        if on_gpu:
            loss_sum = float(loss_sum.item())
            correct = int(correct.item())
        result.test_images = total
        result.test_accuracy = correct / total
        result.test_loss = loss_sum / total
