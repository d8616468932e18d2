"""``ampc.backends``: which kernels run (``ampc.backends.cpu``)."""
from . import cpu

__all__ = ["cpu"]
