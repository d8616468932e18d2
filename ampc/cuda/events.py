"""``ampc.cuda.Event``: PyTorch's CUDA event, for timing GPU work and for
waiting on it without waiting for everything.

ampc queues each device's work on one stream, so an event is recorded on
(and waited for by) the current device's ampc stream; the ``stream``
arguments exist for PyTorch's signatures and take ``None`` only.

>>> import ampc
>>> start = ampc.cuda.Event(enable_timing=True)
>>> start.query()           # never recorded: nothing to wait for
True
"""
from .. import _C
from .._dtype_device import device as _device

__all__ = ["Event"]


def _no_stream(fn, stream):
    if stream is not None:
        raise TypeError(
            f"ampc.cuda.Event.{fn}(): ampc queues each device's work on one "
            f"stream, so 'stream' must be None, got {type(stream).__name__}")


class Event:
    """A CUDA event (as ``torch.cuda.Event``).  It is created on the GPU at
    its first ``record()``, on the current device, and stays on that
    device.  ``enable_timing=True`` lets ``elapsed_time`` measure between
    two events; ``blocking=True`` makes ``synchronize()`` sleep rather than
    spin.

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     start = ampc.cuda.Event(enable_timing=True)
    ...     end = ampc.cuda.Event(enable_timing=True)
    ...     start.record()
    ...     y = ampc.ones(1024, 1024, device="cuda") @ ampc.ones(1024, 1024,
    ...                                                    device="cuda")
    ...     end.record()
    ...     end.synchronize()
    ...     assert start.elapsed_time(end) >= 0.0
    """

    def __init__(self, enable_timing=False, blocking=False,
                 interprocess=False, external=False):
        if interprocess or external:
            kind = "interprocess" if interprocess else "external"
            raise ValueError(
                f"ampc.cuda.Event(): {kind} events are not supported by "
                "ampc")
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self._handle = _C.cuda_event_new(self.enable_timing, self.blocking)

    @property
    def device(self):
        """The device it was recorded on; None before its first record."""
        index = _C.cuda_event_device(self._handle)
        return None if index is None else _device(f"cuda:{index}")

    def record(self, stream=None):
        """Records the event after the work queued so far on the current
        device (the first record fixes the event's device)."""
        from . import _cuda_index   # ampc/cuda/__init__.py imports this
        _no_stream("record", stream)
        _C.cuda_event_record(self._handle, _cuda_index("Event.record", None))

    def wait(self, stream=None):
        """Makes the current device's later work wait for this event's
        work, without making the host wait."""
        from . import _cuda_index
        _no_stream("wait", stream)
        if _C.cuda_event_device(self._handle) is None:
            return
        _C.cuda_event_wait(self._handle, _cuda_index("Event.wait", None))

    def query(self):
        """True when the work before the last record has finished (or the
        event was never recorded)."""
        return _C.cuda_event_query(self._handle)

    def synchronize(self):
        """Waits until the work before the last record has finished."""
        _C.cuda_event_synchronize(self._handle)

    def elapsed_time(self, end_event):
        """Milliseconds from this event's record to ``end_event``'s; both
        timing events, recorded and completed."""
        if not isinstance(end_event, Event):
            raise TypeError(
                "ampc.cuda.Event.elapsed_time(): argument 'end_event' must "
                f"be an ampc.cuda.Event, got {type(end_event).__name__}")
        return _C.cuda_event_elapsed(self._handle, end_event._handle)

    def __repr__(self):
        dev = self.device
        if dev is None:
            return "<ampc.cuda.Event uninitialized>"
        return f"<ampc.cuda.Event on {dev}>"
