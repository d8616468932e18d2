"""``suggest_autocast()``: the autocast dtype, and whether a GradScaler is
needed, that suit this machine, with the reason (user_needs.md: an
automatic dtype choice that explains itself).

>>> import ampc
>>> choice = ampc.amp.suggest_autocast("cpu")
>>> choice.dtype, choice.use_grad_scaler
(ampc.bfloat16, False)
"""
import collections

from .. import _C
from .. import cuda as _cuda

__all__ = ["AutocastChoice", "suggest_autocast"]


class AutocastChoice(collections.namedtuple(
        "AutocastChoice", "device_type dtype use_grad_scaler reason")):
    """What ``suggest_autocast`` chose: use ``autocast(device_type,
    dtype=dtype)``, with a ``GradScaler(device_type)`` when
    ``use_grad_scaler``; ``reason`` says why."""

    __slots__ = ()

    def __str__(self):
        scaler = " with a GradScaler" if self.use_grad_scaler else \
            " (no GradScaler)"
        return (f"autocast('{self.device_type}', dtype={self.dtype})"
                f"{scaler}: {self.reason}")


def _cuda_choice():
    if not _cuda.is_available():
        raise RuntimeError(
            "suggest_autocast(): device_type 'cuda', but no CUDA GPU is "
            "usable here; pass 'cpu' (or None to choose the device)")
    p = _cuda.get_device_properties(_cuda.current_device())
    gpu = f"{p.name} (compute capability {p.major}.{p.minor})"
    if p.major >= 8:
        return AutocastChoice(
            "cuda", _C.bfloat16, False,
            f"{gpu} has bfloat16 tensor cores: bfloat16 runs as fast as "
            "float16 and keeps float32's exponent range, so gradients do "
            "not underflow and no loss scaling is needed")
    if p.major >= 7:
        return AutocastChoice(
            "cuda", _C.float16, True,
            f"{gpu} has float16 tensor cores but no bfloat16 arithmetic: "
            "float16, whose small exponent range needs a GradScaler to "
            "keep small gradients from flushing to zero")
    return AutocastChoice(
        "cuda", _C.float16, True,
        f"{gpu} has no tensor cores: float16 halves the activations' "
        "memory but will not make matrix products faster; it needs a "
        "GradScaler")


def _cpu_choice():
    return AutocastChoice(
        "cpu", _C.bfloat16, False,
        "ampc's CPU kernels widen bfloat16 to float32 inside their "
        "matrix products on every CPU level (even with AVX512_BF16, whose "
        "dot product runs at half the float32 rate), so bfloat16 runs at "
        "about float32's speed while storing activations in half the "
        "bytes, and its float32 exponent range needs no GradScaler "
        "(float16 runs as fast but needs one)")


def suggest_autocast(device_type=None):
    """The autocast dtype for ``device_type`` ('cuda', 'cpu', or None:
    the GPU when one is usable, else the CPU), as an ``AutocastChoice``
    whose ``str()`` reads as advice.

    On a GPU: bfloat16 without a scaler from compute capability 8.0
    (Ampere) on, else float16 with a GradScaler.  On the CPU: bfloat16
    without a scaler.
    """
    if device_type is None:
        device_type = "cuda" if _cuda.is_available() else "cpu"
    if device_type == "cuda":
        return _cuda_choice()
    if device_type == "cpu":
        return _cpu_choice()
    raise ValueError(
        "suggest_autocast(): device_type must be 'cuda', 'cpu' or None, "
        f"got {device_type!r}")
