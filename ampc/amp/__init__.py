"""``ampc.amp``: automatic mixed precision.

``autocast`` and ``GradScaler`` are implemented in C (``csrc/autocast.c``,
``csrc/grad_scaler.c``) with PyTorch's ``torch.amp`` behaviour; the scaler
adds ``stats()``/``watch()`` and misuse diagnostics.  ``OptState`` is its
per-optimizer stage enum.  ``suggest_autocast()`` says which dtype (and
whether a scaler) suits this machine, and why.  ``custom_fwd`` /
``custom_bwd`` bring custom autograd Functions under autocast, as PyTorch's;
``register_op`` gives any function an autocast policy; ``detect_overflow``
finds the layer where inf/NaN first appeared; ``layer_report`` times a
training step layer by layer and says what keeps AMP from being faster.

>>> import ampc
>>> scaler = ampc.amp.GradScaler("cpu", init_scale=1024.0)
>>> w = ampc.ones(3, requires_grad=True)
>>> opt = ampc.optim.SGD([w], lr=0.1)
>>> scaler.scale((w * 2.0).sum()).backward()
>>> w.grad[0].item()
2048.0
>>> scaler.step(opt)
>>> scaler.update()
>>> round(w[0].item(), 6)
0.8
"""
from .._C import GradScaler, OptState
from .._C import autocast  # csrc/autocast.c: the same object as ampc.autocast
from .advice import AutocastChoice, suggest_autocast
from .custom_ops import custom_bwd, custom_fwd, register_op
from .overflow import OverflowRecord, OverflowReport, detect_overflow
from .perf import LayerReport, LayerTiming, layer_report


def is_autocast_available(device_type):
    """True when autocast supports ``device_type`` ("cpu" and "cuda"; as
    PyTorch, whether or not a GPU is present).

    >>> is_autocast_available("cpu")
    True
    """
    from .._dtype_device import device
    return device(device_type).type in ("cpu", "cuda")


__all__ = ["AutocastChoice", "GradScaler", "LayerReport", "LayerTiming",
           "OptState", "OverflowRecord", "OverflowReport", "autocast",
           "custom_bwd", "custom_fwd", "detect_overflow",
           "is_autocast_available", "layer_report",
           "register_op", "suggest_autocast"]
