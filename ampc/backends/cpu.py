"""``ampc.backends.cpu``: the CPU dispatch level in use and per-slot
introspection, so tests (and users) can see which kernel variant runs.

>>> import ampc
>>> ampc.backends.cpu.capability() in ("avx512", "avx2", "ref")
True
"""
from .. import _C

__all__ = ["capability", "best_level", "levels", "kernel_variant",
           "kernel_slots", "features"]

_LEVELS = ("ref", "avx2", "avx512")


def capability():
    """The SIMD level in use: 'avx512', 'avx2' or 'ref' (portable C)."""
    return _C.cpu_capability()


def best_level():
    """The highest level this CPU supports."""
    return _C.cpu_best_level()


def levels():
    """Every level this CPU can run, lowest first.

    >>> import ampc
    >>> ampc.backends.cpu.levels()[0]
    'ref'
    """
    best = best_level()
    return list(_LEVELS[:_LEVELS.index(best) + 1])


def kernel_variant(slot):
    """The level of the variant that runs for a kernel slot, e.g.
    ``kernel_variant('binary') -> 'avx2'``."""
    if not isinstance(slot, str):
        raise TypeError(
            "kernel_variant(): argument 'slot' must be a str, but got "
            f"{type(slot).__name__}")
    if slot not in kernel_slots():
        raise ValueError(
            f"kernel_variant(): unknown slot '{slot}'; the slots are "
            f"{', '.join(kernel_slots())}")
    return _C.kernel_variant(slot)


def kernel_slots():
    """The names of every kernel slot."""
    return list(_C.kernel_slots())


def features():
    """The CPU features found at import: a dict name -> bool."""
    return dict(_C.cpu_features())
