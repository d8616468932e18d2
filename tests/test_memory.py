"""The allocator's counters, and no leaks: reference counts, tensor bytes,
Python allocations and live objects stay flat over 100,000 small ops."""
import gc
import sys
import tracemalloc

import numpy as np
import pytest

import ampc

N = 100_000


def test_memory_allocated_counts_live_bytes():
    base = ampc.memory_allocated()
    a = ampc.empty(1000)
    assert ampc.memory_allocated() - base == 4000
    b = ampc.zeros(10, 10, dtype=ampc.float16)
    assert ampc.memory_allocated() - base == 4200
    c = ampc.ones(3, dtype=ampc.int64)
    d = ampc.ones(5, dtype=ampc.bool)
    assert ampc.memory_allocated() - base == 4200 + 24 + 5
    del a, b, c, d
    assert ampc.memory_allocated() == base
    assert ampc.memory_allocated("cpu") == ampc.memory_allocated(
        ampc.device("cpu"))


def test_views_allocate_nothing():
    t = ampc.zeros(100)
    base = ampc.memory_allocated()
    views = [t.view(10, 10), t[::2], t.view(10, 10).t(), t.unsqueeze(0),
             t.detach(), t.expand(3, 100), t.reshape(4, 25)]
    assert ampc.memory_allocated() == base
    v = t.view(10, 10)
    del t, views
    assert ampc.memory_allocated() == base   # the view keeps the storage
    del v
    assert ampc.memory_allocated() == base - 400


def test_from_numpy_is_not_counted_and_numpy_keeps_storage():
    base = ampc.memory_allocated()
    t = ampc.from_numpy(np.zeros(1000, dtype=np.float32))
    assert ampc.memory_allocated() == base
    u = ampc.zeros(1000)
    a = u.numpy()
    del u
    assert ampc.memory_allocated() == base + 4000      # kept by the array
    del a, t
    assert ampc.memory_allocated() == base


def test_peak_and_reset():
    ampc.reset_peak_memory_stats()
    base = ampc.memory_allocated()
    assert ampc.max_memory_allocated() == base
    a = ampc.empty(10000)
    b = ampc.empty(5000)
    del a
    assert ampc.max_memory_allocated() == base + 60000
    ampc.reset_peak_memory_stats()
    assert ampc.max_memory_allocated() == base + 20000
    del b
    assert ampc.max_memory_allocated() == base + 20000
    assert ampc.memory_allocated() == base


def test_temporaries_are_freed():
    x = ampc.ones(1000)
    base = ampc.memory_allocated()
    ampc.reset_peak_memory_stats()
    y = ((x * 2 + 1).exp() / 3).sum()
    del y
    assert ampc.memory_allocated() == base
    assert ampc.max_memory_allocated() <= base + 2 * 4000 + 64


def _steady(fn, n=N):
    """Run fn n times (after a warm-up) and return the growth of: ampc
    bytes, traced Python bytes, and the number of gc-tracked objects."""
    for _ in range(100):
        fn()
    gc.collect()
    mem0 = ampc.memory_allocated()
    objs0 = len(gc.get_objects())
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(n):
        fn()
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    return (ampc.memory_allocated() - mem0, grown,
            len(gc.get_objects()) - objs0)


def test_no_leak_elementwise():
    a = ampc.ones(8)
    b = ampc.full((8,), 2.0)
    ra, rb = sys.getrefcount(a), sys.getrefcount(b)

    def step():
        c = a + b
        c = c * 2.0 - a
        c.add_(b)
        c = c.sum()
        c.item()

    dmem, dpy, dobj = _steady(step, N // 5)     # 5 ops per step
    assert dmem == 0
    assert dpy < 64 * 1024
    assert dobj < 100
    assert sys.getrefcount(a) == ra and sys.getrefcount(b) == rb


def test_no_leak_views_casts_and_numpy():
    a = ampc.arange(12, dtype=ampc.float32)
    ra = sys.getrefcount(a)

    def step():
        v = a.view(3, 4).t()[1:, ::2]
        h = v.half()
        h.float().numpy()
        a.max(0)
        ampc.cat([a, a])

    dmem, dpy, dobj = _steady(step, N // 5)
    assert dmem == 0
    assert dpy < 64 * 1024
    assert dobj < 100
    assert sys.getrefcount(a) == ra


def test_no_leak_from_numpy_and_creation():
    arr = np.ones(16, dtype=np.float32)
    rarr = sys.getrefcount(arr)

    def step():
        t = ampc.from_numpy(arr)
        t.numpy()
        ampc.zeros(4)
        ampc.tensor([1.0, 2.0])
        ampc.randn(3)

    dmem, dpy, dobj = _steady(step, N // 5)
    assert dmem == 0
    assert dpy < 64 * 1024
    assert dobj < 100
    assert sys.getrefcount(arr) == rarr


def test_no_leak_autograd():
    w = ampc.ones(8, requires_grad=True)
    x = ampc.full((8,), 0.5)
    rw, rx = sys.getrefcount(w), sys.getrefcount(x)

    def step():
        loss = ((w * x).exp() + w).relu().sum()
        loss.backward()
        w.grad = None

    dmem, dpy, dobj = _steady(step, N // 10)    # ~10 ops + backward
    assert dmem == 0
    assert dpy < 64 * 1024
    assert dobj < 100
    assert sys.getrefcount(w) == rw and sys.getrefcount(x) == rx


def test_graph_is_freed_by_refcount_alone():
    # no reference cycles: a dropped graph frees its tensors without gc
    w = ampc.ones(1000, requires_grad=True)
    gc.disable()
    try:
        base = ampc.memory_allocated()
        for _ in range(50):
            y = (w * 2).exp().sqrt()
            y = y.sum()
            del y
        assert ampc.memory_allocated() == base
        y = (w * 3).exp().sum()
        y.backward()
        grad_bytes = 4000
        del y
        assert ampc.memory_allocated() == base + grad_bytes
    finally:
        gc.enable()


@pytest.mark.parametrize("op", ["add", "mul"])
def test_no_leak_error_paths(op):
    a = ampc.ones(3)
    b = ampc.ones(4)
    ra = sys.getrefcount(a)

    def step():
        try:
            getattr(a, op)(b)
        except (RuntimeError, ValueError):
            pass

    dmem, dpy, dobj = _steady(step, 20000)
    assert dmem == 0 and dobj < 100 and dpy < 64 * 1024
    assert sys.getrefcount(a) == ra
