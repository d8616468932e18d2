"""``ampc.backends.cudnn``: how conv2d runs on CUDA tensors, with PyTorch's
meanings and defaults.

- ``enabled`` (True): CUDA convolutions run through cuDNN; False runs
  them as im2col and a cuBLAS GEMM instead (slower, deterministic).
- ``benchmark`` (False): choose each shape's algorithm by timing every
  candidate once (``cudnnFind``), instead of cuDNN's heuristics.
- ``deterministic`` (False): use only algorithms whose results do not vary
  from run to run.
- ``allow_tf32`` (True, as PyTorch): float32 convolutions may use TF32
  tensor cores.

Either way the algorithm is chosen once per shape, dtype, direction and
setting and then cached (``algorithm_cache_info()``).

>>> import ampc
>>> ampc.backends.cudnn.benchmark
False
>>> with ampc.backends.cudnn.flags(benchmark=True):
...     ampc.backends.cudnn.benchmark
True
"""
import collections
import contextlib
import sys
import types

from .. import _C, _build_config

# the four flags are properties of the module's class (below)
__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32",  # noqa: F822
           "is_available", "version", "flags", "algorithm_cache_info",
           "clear_algorithm_cache"]

AlgorithmCacheInfo = collections.namedtuple(
    "AlgorithmCacheInfo", ["entries", "hits", "misses"])
AlgorithmCacheInfo.__doc__ = """The conv2d algorithm cache: cached
algorithms, and lookups that found one (hits) or had to choose (misses)."""

_FLAGS = ("enabled", "benchmark", "deterministic", "allow_tf32")


def is_available():
    """True when ampc was built with cuDNN.

    >>> import ampc
    >>> ampc.backends.cudnn.is_available() in (True, False)
    True
    """
    return bool(_build_config.CUDA and _build_config.CUDNN)


def version():
    """cuDNN's run-time version as an int (PyTorch's form: 90100 for
    9.1.0), or None without cuDNN.

    >>> import ampc
    >>> v = ampc.backends.cudnn.version()
    >>> v is None or v >= 90000
    True
    """
    return _C._cudnn_version()


def algorithm_cache_info():
    """How many conv2d algorithms are cached, and the cache's hits and
    misses since the last clear.

    >>> import ampc
    >>> ampc.backends.cudnn.algorithm_cache_info().entries >= 0
    True
    """
    return AlgorithmCacheInfo(*_C._cudnn_algo_cache())


def clear_algorithm_cache():
    """Forgets every chosen conv2d algorithm and zeroes the counters.

    >>> import ampc
    >>> ampc.backends.cudnn.clear_algorithm_cache()
    """
    _C._cudnn_algo_cache(clear=True)


@contextlib.contextmanager
def flags(enabled=None, benchmark=None, deterministic=None,
          allow_tf32=None):
    """Sets the flags given for the ``with`` block, then restores them all.

    >>> import ampc
    >>> with ampc.backends.cudnn.flags(deterministic=True):
    ...     ampc.backends.cudnn.deterministic
    True
    """
    module = sys.modules[__name__]
    saved = {f: getattr(module, f) for f in _FLAGS}
    try:
        for name, value in (("enabled", enabled), ("benchmark", benchmark),
                            ("deterministic", deterministic),
                            ("allow_tf32", allow_tf32)):
            if value is not None:
                setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _flag(name):
    key = "cudnn_" + name

    def get(module):
        return _C._linalg_cuda_flags()[key]

    def set_(module, value):
        if not isinstance(value, bool):
            raise TypeError(f"ampc.backends.cudnn.{name} must be a bool, "
                            f"got {type(value).__name__}")
        _C._set_linalg_cuda_flags(**{key: value})

    return property(get, set_, doc=f"cuDNN setting '{name}'.")


class _CudnnModule(types.ModuleType):
    """The module, with its flags as properties that reach the C side."""

    enabled = _flag("enabled")
    benchmark = _flag("benchmark")
    deterministic = _flag("deterministic")
    allow_tf32 = _flag("allow_tf32")


sys.modules[__name__].__class__ = _CudnnModule
