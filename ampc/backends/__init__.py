"""``ampc.backends``: which kernels run (``ampc.backends.cpu``) and how
CUDA products and convolutions run (``ampc.backends.cuda``,
``ampc.backends.cudnn``)."""
from . import cpu, cuda, cudnn

__all__ = ["cpu", "cuda", "cudnn"]
