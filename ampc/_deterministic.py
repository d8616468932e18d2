"""``ampc.use_deterministic_algorithms`` and friends: PyTorch's switch for
deterministic algorithms, and its debug-mode spelling.

In the mode the ops whose CUDA kernels have a faster nondeterministic
form take their deterministic one: ``index_put_`` with
``accumulate=True`` on float32 and advanced-index writes with a repeated
index (sorted by destination, each destination written in index order:
``index_add_``, ``x[idx] += v``, ``index_put_``, the gradients of
indexing, embedding, embedding_bag, nearest upsampling and the pads),
``scatter_reduce`` with float 'sum', 'mean' or 'prod' (so
``scatter_add_`` too), and conv2d, which keeps to deterministic cuDNN
algorithms (``ampc.backends.cudnn.deterministic`` does that alone, as in
PyTorch).  On the CPU a repeated
index's plain writes land in index order.  Every other ampc kernel is
deterministic already (the interpolation and pooling backwards gather,
the losses and reductions sum in a fixed order), so no op is left to raise
PyTorch's "does not have a deterministic implementation" error and
``warn_only`` only changes what is reported back.  With
``ampc.utils.deterministic.fill_uninitialized_memory`` (True by default)
``empty`` fills floats with NaN and integers with their largest value, as
PyTorch's.

>>> import ampc
>>> ampc.use_deterministic_algorithms(True)
>>> ampc.are_deterministic_algorithms_enabled()
True
>>> ampc.use_deterministic_algorithms(False)
"""
from . import _C

__all__ = ["use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled",
           "set_deterministic_debug_mode", "get_deterministic_debug_mode"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Whether ops must use deterministic algorithms (``mode``, a bool);
    ``warn_only`` would make an op without one warn instead of raise.

    >>> import ampc
    >>> ampc.use_deterministic_algorithms(True, warn_only=True)
    >>> ampc.is_deterministic_algorithms_warn_only_enabled()
    True
    >>> ampc.use_deterministic_algorithms(False)
    """
    _C._set_deterministic_algorithms(mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled():
    """True while ``use_deterministic_algorithms(True)`` is in force."""
    return _C._deterministic_algorithms()[0]


def is_deterministic_algorithms_warn_only_enabled():
    """True while the mode was set with ``warn_only=True``."""
    return _C._deterministic_algorithms()[1]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """``use_deterministic_algorithms`` by name or number: 'default' (0)
    off, 'warn' (1) on with warn_only, 'error' (2) on.

    >>> import ampc
    >>> ampc.set_deterministic_debug_mode("error")
    >>> ampc.get_deterministic_debug_mode()
    2
    >>> ampc.set_deterministic_debug_mode(0)
    """
    if type(debug_mode) not in (str, int):
        raise TypeError(
            f"debug_mode must be str or int, but got {type(debug_mode)}")
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                "invalid value of debug_mode, expected one of `default`, "
                f"`warn`, `error`, but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError("invalid value of debug_mode, expected 0, 1, or "
                           f"2, but got {debug_mode}")
    _C._set_deterministic_algorithms(debug_mode != 0,
                                     warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """0, 1 or 2: see ``set_deterministic_debug_mode``."""
    mode, warn_only = _C._deterministic_algorithms()
    return 0 if not mode else (1 if warn_only else 2)
