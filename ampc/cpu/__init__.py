"""ampc.cpu: CPU-specific names, for scripts written against torch.cpu.

>>> import ampc
>>> ampc.cpu.is_available()
True
"""
from . import amp  # noqa: F401


def is_available():
    """The CPU is always available."""
    return True


def device_count():
    """One CPU device, as torch.cpu.device_count() reports."""
    return 1
