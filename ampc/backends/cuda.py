"""``ampc.backends.cuda``: how matrix products run on CUDA tensors, with
PyTorch's meaning and default.

``matmul.allow_tf32`` (default False): float32 ``linear``/``matmul`` on a
GPU may use TF32 tensor cores (10-bit mantissa products, float32 sums),
several times faster and about 1e-3 relative error.  Float16 and bfloat16
operands always use tensor cores with float32 accumulation.

>>> import ampc
>>> ampc.backends.cuda.matmul.allow_tf32
False
"""
from .. import _C, _build_config

__all__ = ["matmul", "is_built"]


def is_built():
    """True when ampc was built with CUDA and cuBLAS (a GPU may still be
    missing; see ``ampc.cuda.is_available()``).

    >>> import ampc
    >>> ampc.backends.cuda.is_built() in (True, False)
    True
    """
    return bool(_build_config.CUDA and
                (_build_config.CUBLAS or _build_config.CUBLASLT))


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got "
                        f"{type(value).__name__}")


class _MatmulFlags:
    """``ampc.backends.cuda.matmul``: the cuBLAS settings.

    >>> import ampc
    >>> ampc.backends.cuda.matmul.allow_tf32 = True
    >>> ampc.backends.cuda.matmul.allow_tf32 = False
    """

    __slots__ = ()

    @property
    def allow_tf32(self):
        """Float32 products may use TF32 tensor cores (default False)."""
        return _C._linalg_cuda_flags()["matmul_allow_tf32"]

    @allow_tf32.setter
    def allow_tf32(self, value):
        _check_bool("ampc.backends.cuda.matmul.allow_tf32", value)
        _C._set_linalg_cuda_flags(matmul_allow_tf32=value)

    def __setattr__(self, name, value):
        if name != "allow_tf32":
            raise AttributeError(
                f"ampc.backends.cuda.matmul has no setting '{name}'; the "
                "one setting is allow_tf32")
        object.__setattr__(self, name, value)

    def __repr__(self):
        return f"ampc.backends.cuda.matmul(allow_tf32={self.allow_tf32})"


matmul = _MatmulFlags()
