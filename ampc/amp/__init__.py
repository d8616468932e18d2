"""``ampc.amp``: automatic mixed precision.

``autocast`` and ``GradScaler`` are implemented in C (``csrc/autocast.c``,
``csrc/grad_scaler.c``) with PyTorch's ``torch.amp`` behaviour; the scaler
adds ``stats()``/``watch()`` and misuse diagnostics.  ``OptState`` is its
per-optimizer stage enum.  ``suggest_autocast()`` says which dtype (and
whether a scaler) suits this machine, and why.  ``custom_fwd`` /
``custom_bwd`` bring custom autograd Functions under autocast, as PyTorch's;
``register_op`` gives any function an autocast policy; ``detect_overflow``
finds the layer where inf/NaN first appeared; ``layer_report`` times a
training step layer by layer and says what keeps AMP from being faster;
``autocast_cache_info`` says how much memory the weight-cast cache holds;
``keep_weight_casts`` keeps persistent 16-bit weight copies instead, which
the optimizers refresh in their fused step.

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
import collections

from .. import _C
from .._C import GradScaler, OptState
from .._C import autocast  # csrc/autocast.c: the same object as ampc.autocast
from .advice import AutocastChoice, suggest_autocast
from .custom_ops import custom_bwd, custom_fwd, register_op
from .overflow import OverflowRecord, OverflowReport, detect_overflow
from .perf import LayerReport, LayerTiming, layer_report
from .weight_casts import KeptWeightCasts, keep_weight_casts


class CastCacheInfo(collections.namedtuple("CastCacheInfo",
                                           "entries bytes by_device")):
    """What autocast's weight-cast cache holds now: how many casts, their
    bytes in all and per device ("cpu", "cuda:0")."""

    __slots__ = ()


def autocast_cache_info():
    """The weight-cast cache's size (beyond PyTorch; user_needs A7): inside
    an autocast region each float32 weight that requires grad is cast to
    the autocast dtype once and kept until the outermost region exits,
    which costs this much memory; ``autocast(..., cache_enabled=False)``
    trades it for a cast at every use.

    >>> import ampc
    >>> lin = ampc.nn.Linear(64, 32)
    >>> with ampc.autocast("cpu", dtype=ampc.bfloat16):
    ...     _ = lin(ampc.ones(2, 64))
    ...     ampc.amp.autocast_cache_info()
    CastCacheInfo(entries=2, bytes=4160, by_device={'cpu': 4160})
    >>> ampc.amp.autocast_cache_info().entries
    0
    """
    by_device = {}
    # views of kept weight casts (keep_weight_casts) cost nothing here
    kept = {k.data_ptr() for k in _C._kept_weight_casts()}
    tensors = [t for t in _C._autocast_cache_tensors()
               if t.data_ptr() not in kept]
    for t in tensors:
        dev = str(t.device)
        by_device[dev] = by_device.get(dev, 0) + t.numel() * t.element_size()
    return CastCacheInfo(len(tensors), sum(by_device.values()), by_device)


def is_autocast_available(device_type):
    """True when autocast supports ``device_type`` ("cpu" and "cuda"; as
    PyTorch, whether or not a GPU is present).

    >>> is_autocast_available("cpu")
    True
    """
    from .._dtype_device import device
    return device(device_type).type in ("cpu", "cuda")


__all__ = ["AutocastChoice", "CastCacheInfo", "GradScaler", "KeptWeightCasts",
           "LayerReport", "LayerTiming", "OptState", "OverflowRecord",
           "OverflowReport", "autocast", "autocast_cache_info",
           "custom_bwd", "custom_fwd", "detect_overflow",
           "is_autocast_available", "keep_weight_casts", "layer_report",
           "register_op", "suggest_autocast"]
