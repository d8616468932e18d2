"""ampc.cpu.amp: the older spellings of CPU autocast and GradScaler
(torch.cpu.amp).

``ampc.cpu.amp.autocast(...)`` is ``ampc.autocast("cpu", ...)`` and
``ampc.cpu.amp.GradScaler(...)`` is ``ampc.amp.GradScaler("cpu", ...)``;
both warn, as PyTorch does, that the spelling is deprecated.
"""
import warnings

from .. import _C
from .._dtype_device import bfloat16
from .._C import GradScaler as _GradScaler


class autocast(_C.autocast):
    """Deprecated: use ``ampc.autocast("cpu", ...)``.

    >>> import warnings, ampc
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     ctx = ampc.cpu.amp.autocast()
    >>> ctx.device, ctx.fast_dtype
    ('cpu', ampc.bfloat16)
    """

    def __new__(cls, enabled=True, dtype=bfloat16, cache_enabled=True):
        warnings.warn(
            "`ampc.cpu.amp.autocast(args...)` is deprecated. Please use "
            "`ampc.amp.autocast('cpu', args...)` instead.",
            FutureWarning, stacklevel=2)
        return super().__new__(cls, "cpu", dtype=dtype, enabled=enabled,
                               cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """Deprecated: use ``ampc.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        warnings.warn(
            "`ampc.cpu.amp.GradScaler(args...)` is deprecated. Please use "
            "`ampc.amp.GradScaler('cpu', args...)` instead.",
            FutureWarning, stacklevel=2)
        super().__init__("cpu", init_scale=init_scale,
                         growth_factor=growth_factor,
                         backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
