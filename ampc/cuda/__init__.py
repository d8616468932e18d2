"""``ampc.cuda``: is CUDA built and usable, how many GPUs, and the GPU's
memory counters (the same names as ``ampc.memory_allocated`` and friends).

>>> import ampc
>>> ampc.cuda.is_available() in (True, False)
True
"""
from .. import _C
from .._dtype_device import _device_str

__all__ = [
    "is_built", "is_available", "device_count", "current_device",
    "set_device", "synchronize", "manual_seed", "manual_seed_all",
    "get_rng_state", "set_rng_state", "get_rng_state_all",
    "set_rng_state_all",
    "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "reset_peak_memory_stats", "empty_cache",
    "mem_get_info", "get_device_name", "get_device_capability",
    "get_device_properties", "is_bf16_supported", "OutOfMemoryError",
    "Event", "Stream", "current_stream", "default_stream", "stream",
    "CUDAGraph", "graph", "is_current_stream_capturing",
]

#: Raised when a GPU allocation fails even after ampc emptied its cache
#: (a RuntimeError subclass, like ``torch.cuda.OutOfMemoryError``).  The
#: message gives the bytes asked for, the bytes free on the device and what
#: ampc holds; the process stays usable.
OutOfMemoryError = _C.OutOfMemoryError


def is_built():
    """True when this ampc was compiled with CUDA support.

    >>> import ampc
    >>> ampc.cuda.is_built() in (True, False)
    True
    """
    return bool(_C.cuda_is_built())


def device_count():
    """The number of usable GPUs (0 without a GPU, even in a CUDA build).

    >>> import ampc
    >>> ampc.cuda.device_count() >= 0
    True
    """
    return int(_C.cuda_device_count())


def is_available():
    """True when a GPU can be used.

    >>> import ampc
    >>> ampc.cuda.is_available() == (ampc.cuda.device_count() > 0)
    True
    """
    return device_count() > 0


def _check_available(fn):
    if not is_built():
        raise RuntimeError(
            f"ampc.cuda.{fn}(): ampc was built without CUDA support "
            "(nvcc was not found at build time, or AMPC_CUDA=0)")
    if not is_available():
        raise RuntimeError(
            f"ampc.cuda.{fn}(): no CUDA GPU is available (device_count() is "
            "0)")


def _cuda_index(fn, device):
    """The index of a device argument (None: the current device)."""
    _check_available(fn)
    if device is None:
        return int(_C.cuda_current_device())
    dev = _device_str(fn, device)
    if not dev.startswith("cuda"):
        raise ValueError(
            f"ampc.cuda.{fn}(): argument 'device' must be a CUDA device, "
            f"got '{dev}'")
    if dev == "cuda":
        return int(_C.cuda_current_device())
    index = int(dev.split(":")[1])
    if index >= device_count():
        raise RuntimeError(
            f"ampc.cuda.{fn}(): invalid device {dev}: there are "
            f"{device_count()} CUDA device(s)")
    return index


def _cuda_device(fn, device):
    return f"cuda:{_cuda_index(fn, device)}"


def current_device():
    """The index of this thread's current GPU (0 until set_device).

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     assert ampc.cuda.current_device() >= 0
    """
    _check_available("current_device")
    return int(_C.cuda_current_device())


def set_device(device):
    """Make ``device`` (an index, 'cuda:N' or an ampc.device) the current
    GPU of this thread: 'cuda' then means it.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     ampc.cuda.set_device(0)
    """
    _C.cuda_set_device(_cuda_index("set_device", device))


def synchronize(device=None):
    """Wait until the GPU has finished all work ampc queued on it (ampc's
    CUDA ops return before the GPU is done; reading a value, e.g. item(),
    waits by itself).

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     ampc.cuda.synchronize()
    """
    _C.cuda_synchronize(_cuda_index("synchronize", device))


def get_device_name(device=None):
    """The GPU's name, e.g. 'NVIDIA H200'.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     assert isinstance(ampc.cuda.get_device_name(), str)
    """
    return _C.cuda_device_name(_cuda_index("get_device_name", device))


def get_device_capability(device=None):
    """The GPU's compute capability as (major, minor): (9, 0) on an H100 or
    H200.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     major, minor = ampc.cuda.get_device_capability()
    """
    return tuple(_C.cuda_device_capability(
        _cuda_index("get_device_capability", device)))


class _CudaDeviceProperties:
    """What ``get_device_properties`` returns: the fields of PyTorch's that
    scripts print most (``name``, ``major``, ``minor``, ``total_memory`` in
    bytes, ``multi_processor_count``)."""

    def __init__(self, name, major, minor, total_memory,
                 multi_processor_count):
        self.name = name
        self.major = major
        self.minor = minor
        self.total_memory = total_memory
        self.multi_processor_count = multi_processor_count

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', "
                f"major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    """The GPU's name, compute capability, memory and multiprocessors.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     p = ampc.cuda.get_device_properties()
    ...     assert p.total_memory > 0 and p.multi_processor_count > 0
    """
    index = _cuda_index("get_device_properties", device)
    major, minor = _C.cuda_device_capability(index)
    total, sms = _C.cuda_device_memory(index)
    return _CudaDeviceProperties(_C.cuda_device_name(index), major, minor,
                                 total, sms)


def is_bf16_supported(including_emulation=True):
    """True when the current GPU computes in bfloat16 natively (compute
    capability 8.0 or later); False without a usable GPU.  ampc does not
    emulate bfloat16 on older GPUs, so ``including_emulation`` changes
    nothing.

    >>> import ampc
    >>> ampc.cuda.is_bf16_supported() in (True, False)
    True
    """
    if not is_available():
        return False
    return get_device_capability()[0] >= 8


def manual_seed(seed):
    """Seed the generator (one generator serves every device).

    >>> import ampc
    >>> ampc.cuda.manual_seed(0)
    """
    from .._creation import manual_seed as _seed
    _seed(seed)


manual_seed_all = manual_seed


def get_rng_state(device="cuda"):
    """The generator's state (one generator serves every device, so this is
    ``ampc.get_rng_state()``)."""
    from .._creation import get_rng_state as _get
    return _get()


def set_rng_state(new_state, device="cuda"):
    """Restore a state ``get_rng_state`` returned."""
    from .._creation import set_rng_state as _set
    _set(new_state)


def get_rng_state_all():
    """One state per device (``device_count()`` copies of the one
    generator's)."""
    return [get_rng_state() for _ in range(max(device_count(), 1))]


def set_rng_state_all(new_states):
    """Restore the states ``get_rng_state_all`` returned."""
    for state in new_states:
        set_rng_state(state)


def memory_allocated(device=None):
    """Bytes of live tensor storage on the GPU.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     before = ampc.cuda.memory_allocated()
    ...     x = ampc.empty(256, device="cuda")
    ...     assert ampc.cuda.memory_allocated() - before == 1024
    """
    return _C.memory_allocated(_cuda_device("memory_allocated", device))


def max_memory_allocated(device=None):
    """Peak bytes of live tensor storage on the GPU since the last reset.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     assert (ampc.cuda.max_memory_allocated()
    ...             >= ampc.cuda.memory_allocated())
    """
    return _C.max_memory_allocated(
        _cuda_device("max_memory_allocated", device))


def memory_reserved(device=None):
    """Bytes ampc's caching allocator holds from the driver on the GPU: live
    tensors, scratch space and cached free blocks.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     assert (ampc.cuda.memory_reserved()
    ...             >= ampc.cuda.memory_allocated())
    """
    return _C.cuda_memory_stats(_cuda_index("memory_reserved", device))[0]


def max_memory_reserved(device=None):
    """Peak of memory_reserved() since the last reset.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     assert (ampc.cuda.max_memory_reserved()
    ...             >= ampc.cuda.memory_reserved())
    """
    return _C.cuda_memory_stats(
        _cuda_index("max_memory_reserved", device))[1]


def reset_peak_memory_stats(device=None):
    """Restart the peaks (max_memory_allocated, max_memory_reserved) from
    the current values.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     ampc.cuda.reset_peak_memory_stats()
    """
    index = _cuda_index("reset_peak_memory_stats", device)
    _C.reset_peak_memory_stats(f"cuda:{index}")
    _C.cuda_reset_peak_reserved(index)


def empty_cache():
    """Return the cached free GPU blocks (and idle pinned host blocks) to
    the driver, so other processes can use the memory; live tensors are not
    touched.  memory_reserved() drops accordingly.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     ampc.cuda.empty_cache()
    """
    _check_available("empty_cache")
    _C.empty_cache()


def mem_get_info(device=None):
    """(free, total) bytes of the GPU, as the driver reports them (other
    processes' memory included).

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     free, total = ampc.cuda.mem_get_info()
    ...     assert 0 <= free <= total
    """
    stats = _C.cuda_memory_stats(_cuda_index("mem_get_info", device))
    return stats[2], stats[3]


# CUDA graphs (ampc/cuda/graphs.py), streams and events (streams.py)
from .graphs import CUDAGraph, graph, is_current_stream_capturing  # noqa: E402
from .streams import (  # noqa: E402
    Event, Stream, current_stream, default_stream, stream)
