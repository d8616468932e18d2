"""The mixed-precision lab, ``python -m ampc.lab``: the lab's SimpleCNN
trained in FP32, in AMP float16 (autocast + GradScaler) and in AMP bfloat16
(autocast), compared in time, throughput, peak memory, loss and accuracy.

The pieces, one concern per module: ``model`` (SimpleCNN), ``data``
(CIFAR-10 or the built-in FakeCIFAR10), ``runner`` (training and
measuring), ``progress`` (the per-epoch bar), ``report`` (table, JSON,
plot) and ``cli`` (the command line).

>>> from ampc.lab import Lab, LabConfig, load_data
>>> lab = Lab(LabConfig(epochs=1, batch_size=32, precisions=("bf16",)),
...           load_data("fake", train_size=64, test_size=32),
...           progress=False)
>>> r = lab.run()[0]
>>> r.label, r.steps, 0.0 <= r.test_accuracy <= 1.0
('AMP bf16', 2, True)
"""
from .model import SimpleCNN
from .data import LabData, load_data
from .runner import (PRECISIONS, EpochStats, Lab, LabConfig, Precision,
                     RunResult)
from .report import format_table, report_dict, write_json, write_plot
from .cli import main

__all__ = ["SimpleCNN", "LabData", "load_data", "PRECISIONS", "Precision",
           "LabConfig", "EpochStats", "RunResult", "Lab", "format_table",
           "report_dict", "write_json", "write_plot", "main"]
