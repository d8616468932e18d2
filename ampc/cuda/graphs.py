"""CUDA graphs: record the GPU work of a piece of code once, then replay it
with a single launch, as ``torch.cuda.CUDAGraph`` and
``torch.cuda.graph`` do.

>>> import ampc
>>> if ampc.cuda.is_available():
...     x = ampc.zeros(4, device="cuda")
...     y = x * 2                       # warm-up, eagerly
...     g = ampc.cuda.CUDAGraph()
...     with ampc.cuda.graph(g):
...         y = x * 2                   # captured, not run
...     _ = x.fill_(3.0)
...     g.replay()                      # y now holds 6s
"""
import gc

from .. import _C

__all__ = ["CUDAGraph", "graph", "is_current_stream_capturing"]


def _refuse_nesting(fn):
    if is_current_stream_capturing():
        raise RuntimeError(
            f"{fn}(): another CUDA graph is being captured on this GPU; "
            "captures cannot nest (end that one with capture_end() first)")


def _check_available(fn):
    # Imported here: ampc/cuda/__init__.py imports this module.
    from . import _check_available as check
    check(fn)


def is_current_stream_capturing():
    """True while the current GPU's ampc stream is being captured into a
    CUDA graph (False without a GPU).

    >>> import ampc
    >>> ampc.cuda.is_current_stream_capturing()
    False
    """
    return bool(_C.cuda_graph_capturing())


class CUDAGraph:
    """A CUDA graph: the GPU work queued between ``capture_begin()`` and
    ``capture_end()`` is recorded, not run, and ``replay()`` runs it all
    with one launch.  Use it through :func:`graph`.

    The graph replays the same kernels on the same memory: the tensors it
    reads must be updated in place (``x.copy_(batch)``) between replays,
    and the tensors it creates during capture hold its outputs, rewritten
    by every replay.  Its allocations come from a private memory pool,
    kept until ``reset()`` (or the graph's deletion).

    >>> g = ampc.cuda.CUDAGraph()          # doctest: +SKIP
    >>> g.capture_begin(); y = x + 1; g.capture_end()  # doctest: +SKIP
    >>> g.replay()                         # doctest: +SKIP
    """

    def __init__(self):
        _check_available("CUDAGraph")
        self._handle = None
        self._device = None     # the GPU of the handle
        # "empty", "capturing" or "captured": for repr() only (the C side
        # checks every call's state itself).
        self._state = "empty"

    def capture_begin(self, pool=None):
        """Start capturing the work queued on the current GPU.  ``pool``:
        another graph's ``pool()``, to share its memory (graphs that
        share a pool must be replayed in the order they were captured).

        >>> g.capture_begin()                # doctest: +SKIP
        """
        from . import current_device
        if self._state != "capturing":
            _refuse_nesting("CUDAGraph.capture_begin")
        device = current_device()
        # an empty graph (new, or reset) captures on the current GPU
        if self._handle is None or (self._state == "empty" and
                                    self._device != device):
            self._handle = _C.cuda_graph_new(f"cuda:{device}")
            self._device = device
        _C.cuda_graph_capture_begin(self._handle, pool)
        self._state = "capturing"

    def capture_end(self):
        """End the capture and make the graph ready to replay.  Raises
        RuntimeError when CUDA refused an operation during capture; the
        graph is then empty and can be captured again.

        >>> g.capture_end()                  # doctest: +SKIP
        """
        if self._handle is None:
            raise RuntimeError(
                "CUDAGraph.capture_end(): no capture is in progress on this "
                "graph (call capture_begin() first)")
        try:
            _C.cuda_graph_capture_end(self._handle)
        except RuntimeError:
            if self._state == "capturing":
                self._state = "empty"      # the failed capture is freed
            raise
        self._state = "captured"

    def replay(self):
        """Queue one run of the captured work on the GPU (it returns
        before the GPU has finished, like any CUDA op).

        >>> g.replay()                       # doctest: +SKIP
        """
        if self._handle is None:
            raise RuntimeError(
                "CUDAGraph.replay(): the graph has not been captured (call "
                "capture_begin() and capture_end() first)")
        _C.cuda_graph_replay(self._handle)

    def reset(self):
        """Free the captured graph and give its memory pool back (once no
        other graph shares it); the graph can then be captured again.

        >>> g.reset()                        # doctest: +SKIP
        """
        if self._handle is not None:
            self._state = "empty"
            _C.cuda_graph_reset(self._handle)

    def pool(self):
        """An opaque handle to this graph's memory pool, for another
        graph's ``capture_begin(pool=...)`` or ``graph(..., pool=...)``.

        >>> g2.capture_begin(pool=g.pool())  # doctest: +SKIP
        """
        if self._handle is None:
            raise RuntimeError(
                "CUDAGraph.pool(): the graph has no memory pool yet (it is "
                "made by capture_begin())")
        return _C.cuda_graph_pool(self._handle)

    def __repr__(self):
        return f"<ampc.cuda.CUDAGraph ({self._state})>"


class graph:
    """Context manager that captures the GPU work in its body into
    ``cuda_graph`` (a :class:`CUDAGraph`), as ``torch.cuda.graph`` does.

    Warm up first: run the code a few times eagerly before capturing it
    (PyTorch's guidance is three iterations, on a side stream; ampc's work
    always runs on its own non-default stream, so plain eager iterations
    are the side-stream warm-up).  The first runs do what a graph cannot
    record: they pick cuDNN algorithms, create cuBLAS handles and
    workspaces, allocate optimizer state and fill autocast's weight cache.
    Inside the body, nothing may wait for the GPU: ``item()``,
    ``numpy()``, ``print(t)``, ``if t:`` and ``ampc.cuda.synchronize()``
    raise RuntimeError (a GradScaler step must use its device-side skip
    and the optimizer its fused step).  Leaving the body by an exception
    abandons the capture and resets the graph.

    >>> g = ampc.cuda.CUDAGraph()                     # doctest: +SKIP
    >>> for _ in range(3):                            # doctest: +SKIP
    ...     loss = step(static_x, static_y)           # warm-up
    >>> with ampc.cuda.graph(g):                      # doctest: +SKIP
    ...     loss = step(static_x, static_y)
    >>> static_x.copy_(next_x); g.replay()            # doctest: +SKIP

    pool: another graph's ``pool()``, to share its memory.
    """

    def __init__(self, cuda_graph, pool=None):
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError(
                "ampc.cuda.graph(): argument 'cuda_graph' must be an "
                f"ampc.cuda.CUDAGraph, got {type(cuda_graph).__name__}")
        self.cuda_graph = cuda_graph
        self.pool = pool

    def __enter__(self):
        from . import synchronize
        _refuse_nesting("ampc.cuda.graph")
        # As torch does: finish queued work and free what Python no longer
        # holds, so the capture starts from a quiet device and a cache with
        # as many free blocks as possible.
        synchronize()
        gc.collect()
        self.cuda_graph.capture_begin(pool=self.pool)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            # The body failed: end the capture (discarding it), so the
            # stream and the allocator work again, and let exc propagate.
            self.cuda_graph.reset()
            return False
        self.cuda_graph.capture_end()
        return False
