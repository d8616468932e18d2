"""ampc.cpu.amp: the older spelling of CPU autocast (torch.cpu.amp).

``ampc.cpu.amp.autocast(...)`` is ``ampc.autocast("cpu", ...)`` and warns,
as PyTorch does, that the spelling is deprecated.
"""
import warnings

from .. import _C
from .._dtype_device import bfloat16


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
