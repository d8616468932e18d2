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
    "synchronize", "manual_seed", "manual_seed_all", "memory_allocated",
    "max_memory_allocated", "reset_peak_memory_stats", "get_device_name",
]


def is_built():
    """True when this ampc was compiled with CUDA support."""
    return bool(_C.cuda_is_built())


def device_count():
    """The number of usable GPUs (0 without a GPU, even in a CUDA
    build)."""
    return int(_C.cuda_device_count())


def is_available():
    """True when a GPU can be used."""
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


def _cuda_device(fn, device):
    _check_available(fn)
    if device is None:
        return "cuda:0"
    dev = _device_str(fn, device)
    if not dev.startswith("cuda"):
        raise ValueError(
            f"ampc.cuda.{fn}(): argument 'device' must be a CUDA device, "
            f"got '{dev}'")
    if dev == "cuda":
        dev = "cuda:0"
    index = int(dev.split(":")[1])
    if index >= device_count():
        raise RuntimeError(
            f"ampc.cuda.{fn}(): invalid device {dev}: there are "
            f"{device_count()} CUDA device(s)")
    return dev


def current_device():
    """The index of the current GPU (always 0: ampc uses the first)."""
    _check_available("current_device")
    return 0


def synchronize(device=None):
    """Wait for the GPU's queued work (ampc's CUDA calls are synchronous
    at the Python boundary, so this only checks the device)."""
    _cuda_device("synchronize", device)
    sync = getattr(_C, "cuda_synchronize", None)
    if sync is not None:
        sync()


def get_device_name(device=None):
    dev = _cuda_device("get_device_name", device)
    name = getattr(_C, "cuda_device_name", None)
    if name is None:
        return "CUDA device"
    return name(int(dev.split(":")[1]))


def manual_seed(seed):
    """Seed the generator (one generator serves every device)."""
    from .._creation import manual_seed as _seed
    _seed(seed)


manual_seed_all = manual_seed


def memory_allocated(device=None):
    """Bytes of live tensor storage on the GPU."""
    return _C.memory_allocated(_cuda_device("memory_allocated", device))


def max_memory_allocated(device=None):
    """Peak bytes of live tensor storage on the GPU since the last reset."""
    return _C.max_memory_allocated(
        _cuda_device("max_memory_allocated", device))


def reset_peak_memory_stats(device=None):
    """Restart the GPU's peak count from the current live bytes."""
    _C.reset_peak_memory_stats(
        _cuda_device("reset_peak_memory_stats", device))
