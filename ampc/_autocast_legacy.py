"""PyTorch's older autocast state functions, one per device type, kept for
scripts that still call them: each warns as PyTorch does and forwards to
the device-type form (``is_autocast_enabled("cpu")`` and friends).

>>> import warnings, ampc
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     ampc.get_autocast_cpu_dtype()
ampc.bfloat16
"""
import warnings

from . import _C

__all__ = ["is_autocast_cpu_enabled", "get_autocast_cpu_dtype",
           "get_autocast_gpu_dtype", "set_autocast_cpu_enabled",
           "set_autocast_cpu_dtype", "set_autocast_gpu_dtype"]


def _deprecated(old, new):
    warnings.warn(f"ampc.{old} is deprecated. Please use ampc.{new} "
                  "instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled():
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return _C.is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return _C.get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return _C.get_autocast_dtype("cuda")


def set_autocast_cpu_enabled(enabled):
    _deprecated("set_autocast_cpu_enabled(enabled)",
                "set_autocast_enabled('cpu', enabled)")
    _C.set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype):
    _deprecated("set_autocast_cpu_dtype(dtype)",
                "set_autocast_dtype('cpu', dtype)")
    _C.set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype):
    _deprecated("set_autocast_gpu_dtype(dtype)",
                "set_autocast_dtype('cuda', dtype)")
    _C.set_autocast_dtype("cuda", dtype)
