"""``ampc.cuda.amp``: the older, device-specific spellings of ``autocast``
and ``GradScaler``, kept working with PyTorch's deprecation warning.

>>> import warnings, ampc
>>> with warnings.catch_warnings(record=True) as w:
...     warnings.simplefilter("always")
...     scaler = ampc.cuda.amp.GradScaler()
>>> sorted({c.category.__name__ for c in w})[0]
'FutureWarning'
"""
import warnings

from .. import _C
from .._dtype_device import float16
from ..amp import GradScaler as _GradScaler
from ..amp import OptState  # noqa: F401  (as torch.cuda.amp.grad_scaler)
from ..amp import custom_ops as _custom_ops

__all__ = ["autocast", "custom_bwd", "custom_fwd", "GradScaler"]


class autocast(_C.autocast):
    """Deprecated: ``ampc.cuda.amp.autocast(args...)`` is
    ``ampc.autocast("cuda", args...)``.  Where CUDA is unusable it warns and
    disables itself, as ``ampc.autocast("cuda")`` does.

    >>> import warnings, ampc
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     ctx = ampc.cuda.amp.autocast()
    >>> ctx.device, ctx.fast_dtype
    ('cuda', ampc.float16)
    """

    def __new__(cls, enabled=True, dtype=float16, cache_enabled=True):
        warnings.warn(
            "`ampc.cuda.amp.autocast(args...)` is deprecated. Please use "
            "`ampc.amp.autocast('cuda', args...)` instead.",
            FutureWarning, stacklevel=2)
        return super().__new__(cls, "cuda", dtype=dtype, enabled=enabled,
                               cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``ampc.cuda.amp.GradScaler(args...)`` is
    ``ampc.amp.GradScaler("cuda", args...)``, deprecated as in PyTorch.
    Where CUDA is unusable it warns and disables itself, so a script written
    for the GPU still runs.

    >>> import warnings, ampc
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     s = ampc.cuda.amp.GradScaler(init_scale=128.0)
    >>> isinstance(s, ampc.amp.GradScaler)
    True
    """

    def __init__(self, init_scale=2.0**16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        warnings.warn(
            "`ampc.cuda.amp.GradScaler(args...)` is deprecated. Please use "
            "`ampc.amp.GradScaler('cuda', args...)` instead.",
            FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale=init_scale,
                         growth_factor=growth_factor,
                         backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated: ``ampc.cuda.amp.custom_fwd(args...)`` is
    ``ampc.amp.custom_fwd(args..., device_type="cuda")``."""
    warnings.warn(
        "`ampc.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
        "`ampc.amp.custom_fwd(args..., device_type='cuda')` instead.",
        FutureWarning, stacklevel=2)
    return _custom_ops.custom_fwd(fwd, device_type="cuda",
                                  cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """Deprecated: ``ampc.cuda.amp.custom_bwd(bwd)`` is
    ``ampc.amp.custom_bwd(bwd, device_type="cuda")``."""
    warnings.warn(
        "`ampc.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
        "`ampc.amp.custom_bwd(args..., device_type='cuda')` instead.",
        FutureWarning, stacklevel=2)
    return _custom_ops.custom_bwd(bwd, device_type="cuda")
