"""``ampc.cuda.Stream`` and ``ampc.cuda.Event``: PyTorch's CUDA streams and
events, for timing GPU work and for waiting on it without waiting for
everything.

ampc queues each device's work on one stream, so ``current_stream()`` and
``default_stream()`` are that stream, a ``Stream`` handle names it, and
events are recorded on (and waited for by) it.  New streams cannot be
made: ``Stream()`` says so.

>>> import ampc
>>> start = ampc.cuda.Event(enable_timing=True)
>>> start.query()           # never recorded: nothing to wait for
True
"""
from .. import _C
from .._dtype_device import device as _device

__all__ = ["Stream", "Event", "current_stream", "default_stream", "stream"]


def _index(fn, device=None):
    from . import _cuda_index   # ampc/cuda/__init__.py imports this module
    return _cuda_index(fn, device)


class Stream:
    """The one ampc stream of a CUDA device, as ``torch.cuda.Stream``: get
    it from ``ampc.cuda.current_stream()``; ``Stream()`` itself cannot
    make another (ampc queues all of a device's work on one stream).

    >>> import ampc
    >>> if ampc.cuda.is_available():
    ...     ampc.cuda.current_stream().synchronize()
    """

    def __init__(self, device=None, priority=0, **kwargs):
        raise RuntimeError(
            "ampc.cuda.Stream(): ampc queues each device's work on one "
            "stream and cannot make another; use ampc.cuda.current_stream()")

    @classmethod
    def _of(cls, index):
        s = object.__new__(cls)
        s._index = index
        return s

    @property
    def device(self):
        return _device(f"cuda:{self._index}")

    def synchronize(self):
        """Waits until all work queued on the stream has finished."""
        _C.cuda_synchronize(self._index)

    def query(self):
        """True when all work queued on the stream has finished."""
        e = Event()
        e._record_on(self._index)
        return e.query()

    def record_event(self, event=None):
        """Records ``event`` (a new one when None) on the stream; returns
        it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event):
        """Makes the stream's later work wait for ``event``."""
        event.wait(self)

    def wait_stream(self, stream):
        """Makes this stream's later work wait for ``stream``'s work so
        far (nothing to do when they are the same stream)."""
        if stream._index != self._index:
            self.wait_event(stream.record_event())

    def __eq__(self, other):
        return isinstance(other, Stream) and other._index == self._index

    def __hash__(self):
        return hash(("ampc.cuda.Stream", self._index))

    def __repr__(self):
        return f"<ampc.cuda.Stream device=cuda:{self._index}>"


def current_stream(device=None):
    """The stream ampc queues the device's work on (the current device's
    when None)."""
    return Stream._of(_index("current_stream", device))


def default_stream(device=None):
    """The same stream as ``current_stream``: ampc has one per device."""
    return Stream._of(_index("default_stream", device))


class stream:
    """``with ampc.cuda.stream(s):``, PyTorch's stream context: s must be
    a device's ampc stream (or None); the block's work goes there, on that
    device, as all work does."""

    def __init__(self, s):
        if s is not None and not isinstance(s, Stream):
            raise TypeError(
                "ampc.cuda.stream(): argument must be an ampc.cuda.Stream "
                f"or None, got {type(s).__name__}")
        self._stream = s
        self._prev = None

    def __enter__(self):
        if self._stream is not None:
            from . import current_device, set_device
            self._prev = current_device()
            set_device(self._stream._index)
        return self._stream

    def __exit__(self, *exc):
        if self._prev is not None:
            from . import set_device
            set_device(self._prev)
        return False


def _check_stream(fn, stream):
    if stream is not None and not isinstance(stream, Stream):
        raise TypeError(
            f"ampc.cuda.Event.{fn}(): argument 'stream' must be an "
            f"ampc.cuda.Stream or None, got {type(stream).__name__}")


def _stream_index(fn, stream):
    """The device index that a ``stream`` argument names (None: the
    current device's stream)."""
    _check_stream(fn, stream)
    return _index(f"Event.{fn}") if stream is None else stream._index


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
        """Records the event after the work queued so far on ``stream``
        (the current device's when None); the first record fixes the
        event's device."""
        self._record_on(_stream_index("record", stream))

    def _record_on(self, index):
        _C.cuda_event_record(self._handle, index)

    def wait(self, stream=None):
        """Makes ``stream``'s (the current device's) later work wait for
        this event's work, without making the host wait."""
        _check_stream("wait", stream)
        if _C.cuda_event_device(self._handle) is None:
            return                      # never recorded: nothing to wait for
        _C.cuda_event_wait(self._handle, _stream_index("wait", stream))

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
