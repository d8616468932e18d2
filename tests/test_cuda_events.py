"""ampc.cuda.Event (PyTorch's torch.cuda.Event), ampc.cuda.
get_device_properties and ampc.cuda.is_bf16_supported.  The first group
runs anywhere (what an event that was never recorded does, and what a
machine without a GPU must say); the rest needs a GPU and is marked
``cuda``: records around real work, host and device waits, timing, the
refusals during graph capture, and torch's figures beside ours where torch
with CUDA is importable.
"""
import time

import pytest

import ampc
from cuda_helpers import cuda_available, requires_cuda, torch_cuda

no_gpu = pytest.mark.skipif(cuda_available(),
                            reason="checks the messages without a GPU")


# ----------------------------------------------------------------------------
# anywhere


def test_unrecorded_event_is_done_and_has_no_device():
    e = ampc.cuda.Event()
    assert e.query() is True
    e.synchronize()                     # nothing to wait for
    e.wait()
    assert e.device is None
    assert repr(e) == "<ampc.cuda.Event uninitialized>"
    assert e.enable_timing is False and e.blocking is False


def test_event_arguments_are_checked():
    with pytest.raises(ValueError, match="interprocess events are not "
                       "supported"):
        ampc.cuda.Event(interprocess=True)
    with pytest.raises(ValueError, match="external events are not "
                       "supported"):
        ampc.cuda.Event(external=True)
    ampc.cuda.Event(external=False)
    e = ampc.cuda.Event(enable_timing=True)
    with pytest.raises(TypeError, match=r"Event\.record\(\): argument "
                       "'stream' must be an ampc.cuda.Stream or None, got "
                       "int"):
        e.record(3)
    with pytest.raises(TypeError, match=r"Event\.wait\(\).*got str"):
        e.wait("s")
    with pytest.raises(TypeError, match="'end_event' must be an "
                       "ampc.cuda.Event, got float"):
        e.elapsed_time(1.0)


def test_elapsed_time_needs_timing_and_records():
    """PyTorch's messages and types (ValueError, as its
    TORCH_CHECK_VALUE)."""
    plain, a, b = (ampc.cuda.Event(), ampc.cuda.Event(enable_timing=True),
                   ampc.cuda.Event(enable_timing=True))
    with pytest.raises(ValueError, match="Both events must be created "
                       "with argument 'enable_timing=True'"):
        a.elapsed_time(plain)
    with pytest.raises(ValueError, match="Both events must be recorded "
                       "before calculating elapsed time"):
        a.elapsed_time(b)


def test_c_event_functions_check_their_handles():
    for fn, args in ((ampc._C.cuda_event_query, (1,)),
                     (ampc._C.cuda_event_synchronize, (None,)),
                     (ampc._C.cuda_event_record, ("x", 0)),
                     (ampc._C.cuda_event_wait, ("x", 0)),
                     (ampc._C.cuda_event_device, (1.5,)),
                     (ampc._C.cuda_event_elapsed, (2, 3))):
        with pytest.raises(TypeError, match="argument 'event' must be an "
                           "event handle from cuda_event_new"):
            fn(*args)


def test_bf16_support_is_a_bool():
    assert ampc.cuda.is_bf16_supported() in (True, False)
    assert ampc.cuda.is_bf16_supported(including_emulation=False) in (
        True, False)


@no_gpu
def test_without_gpu():
    e = ampc.cuda.Event()
    # a CUDA build on a machine without a GPU, or a CPU-only build
    why = "(no CUDA GPU is available|ampc was built without CUDA)"
    with pytest.raises(RuntimeError, match=r"ampc\.cuda\.Event\.record\(\)"
                       ": " + why):
        e.record()
    assert e.device is None
    assert ampc.cuda.is_bf16_supported() is False
    with pytest.raises(RuntimeError, match=r"get_device_properties\(\): "
                       + why):
        ampc.cuda.get_device_properties()
    with pytest.raises(RuntimeError, match=r"current_stream\(\): " + why):
        ampc.cuda.current_stream()


def test_event_and_stream_are_exported_like_torch():
    for name in ("Event", "Stream", "current_stream", "default_stream",
                 "stream"):
        assert name in ampc.cuda.__all__
    assert ampc.cuda.Event.__module__ == "ampc.cuda.streams"


def test_new_streams_are_refused_clearly():
    with pytest.raises(RuntimeError, match=r"ampc\.cuda\.Stream\(\): ampc "
                       "queues each device's work on one stream and cannot "
                       r"make another; use ampc.cuda.current_stream\(\)"):
        ampc.cuda.Stream()
    with pytest.raises(TypeError, match=r"ampc\.cuda\.stream\(\): argument "
                       "must be an ampc.cuda.Stream or None, got int"):
        ampc.cuda.stream(1)
    with ampc.cuda.stream(None) as s:
        assert s is None


# ----------------------------------------------------------------------------
# on a GPU

gpu = [pytest.mark.cuda, requires_cuda]


def _work(n=2048, reps=4):
    """Queued GPU work that takes a measurable time."""
    a = ampc.ones(n, n, device="cuda")
    for _ in range(reps):
        a = a @ a * (1.0 / n)
    return a


@pytest.mark.cuda
@requires_cuda
def test_record_synchronize_and_elapsed_time():
    start = ampc.cuda.Event(enable_timing=True)
    end = ampc.cuda.Event(enable_timing=True)
    ampc.cuda.synchronize()
    start.record()
    out = _work()
    end.record()
    assert start.device == ampc.device("cuda", ampc.cuda.current_device())
    assert repr(end).startswith("<ampc.cuda.Event on cuda:")
    end.synchronize()
    assert end.query() is True and start.query() is True
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms > 0.0
    # the events time the GPU work, not the host: a host wall-clock of
    # the same work, synchronised, is no shorter (allowing timer jitter)
    t0 = time.perf_counter()
    end2 = ampc.cuda.Event(enable_timing=True)
    start.record()
    out = _work()
    end2.record()
    end2.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    assert 0.0 < start.elapsed_time(end2) <= wall_ms * 1.05 + 0.1
    assert float(out[0, 0].item()) == pytest.approx(1.0)


@pytest.mark.cuda
@requires_cuda
def test_elapsed_time_refuses_unfinished_events():
    start = ampc.cuda.Event(enable_timing=True)
    end = ampc.cuda.Event(enable_timing=True)
    start.record()
    _work(4096, 8)
    end.record()
    try:        # it may have finished already: no race with a query()
        start.elapsed_time(end)
    except RuntimeError as e:
        assert "Both events must be completed before calculating elapsed " \
            "time" in str(e)
    end.synchronize()
    assert start.elapsed_time(end) > 0.0


@pytest.mark.cuda
@requires_cuda
def test_non_timing_event_syncs_but_does_not_time():
    e = ampc.cuda.Event(blocking=True)
    t = ampc.cuda.Event(enable_timing=True)
    t.record()
    _work()
    e.record()
    e.synchronize()
    assert e.query() is True
    with pytest.raises(ValueError, match="enable_timing=True"):
        t.elapsed_time(e)


@pytest.mark.cuda
@requires_cuda
def test_rerecording_moves_the_event():
    start = ampc.cuda.Event(enable_timing=True)
    e = ampc.cuda.Event(enable_timing=True)
    start.record()
    e.record()
    e.synchronize()
    short = start.elapsed_time(e)
    _work(4096, 8)
    e.record()                          # now after the work
    e.synchronize()
    assert e.query() is True
    assert start.elapsed_time(e) > short


@pytest.mark.cuda
@requires_cuda
def test_wait_on_one_gpu_keeps_results():
    x = ampc.zeros(1 << 20, device="cuda")
    e = ampc.cuda.Event()
    x.fill_(3.0)
    e.record()
    e.wait()                            # the same stream: already ordered
    assert float((x + 1).sum().item()) == 4.0 * (1 << 20)


@pytest.mark.cuda
@requires_cuda
def test_wait_orders_another_gpus_work_after_the_event():
    if ampc.cuda.device_count() < 2:
        pytest.skip("needs two GPUs: on one, its stream orders the work")
    prev = ampc.cuda.current_device()
    ampc.cuda.set_device(0)
    a = ampc.cuda.Event()
    _work(4096, 8)                      # a long kernel chain on cuda:0
    a.record()
    try:
        ampc.cuda.set_device(1)
        a.wait()                        # cuda:1's stream waits for cuda:0
        b = ampc.cuda.Event(enable_timing=True)
        b.record()
        b.synchronize()
        assert a.query() is True        # cuda:1 got past the wait
    finally:
        ampc.cuda.set_device(prev)


@pytest.mark.cuda
@requires_cuda
def test_events_are_refused_during_capture():
    x = ampc.ones(64, device="cuda")
    y = x * 2                           # warm-up
    e = ampc.cuda.Event()
    before = ampc.cuda.Event()
    before.record()
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        y = x * 2
        with pytest.raises(RuntimeError, match=r"Event\.record\(\): cannot "
                           "use a CUDA event during CUDA graph capture"):
            e.record()
        with pytest.raises(RuntimeError, match=r"Event\.wait\(\): cannot "
                           "use a CUDA event during CUDA graph capture"):
            before.wait()
    # the capture survived the refusal; events time a replay
    start = ampc.cuda.Event(enable_timing=True)
    end = ampc.cuda.Event(enable_timing=True)
    start.record()
    g.replay()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    assert float(y.sum().item()) == 128.0


@pytest.mark.cuda
@requires_cuda
def test_current_stream_is_the_devices_one_stream():
    s = ampc.cuda.current_stream()
    assert s == ampc.cuda.default_stream() == ampc.cuda.current_stream(0)
    assert s.device == ampc.device("cuda", ampc.cuda.current_device())
    assert repr(s) == f"<ampc.cuda.Stream device={s.device}>"
    assert len({s, ampc.cuda.current_stream()}) == 1
    start = s.record_event(ampc.cuda.Event(enable_timing=True))
    _work(4096, 8)
    end = ampc.cuda.Event(enable_timing=True)
    end.record(s)                       # torch's record(stream=...) form
    s.synchronize()
    assert s.query() is True and end.query() is True
    assert start.elapsed_time(end) > 0.0
    s.wait_event(end)
    s.wait_stream(ampc.cuda.current_stream())
    with ampc.cuda.stream(s) as inside:
        assert inside is s
        x = ampc.ones(8, device="cuda") * 2
    assert float(x.sum().item()) == 16.0


@pytest.mark.cuda
@requires_cuda
def test_device_properties_and_bf16_support():
    p = ampc.cuda.get_device_properties()
    assert p.name == ampc.cuda.get_device_name()
    assert (p.major, p.minor) == ampc.cuda.get_device_capability()
    free, total = ampc.cuda.mem_get_info()
    # the device's property; cudaMemGetInfo's total may keep a sliver back
    assert abs(p.total_memory - total) <= 0.02 * p.total_memory
    assert p.multi_processor_count > 0
    assert repr(p).startswith(f"_CudaDeviceProperties(name='{p.name}'")
    assert ampc.cuda.is_bf16_supported() is (p.major >= 8)
    torch = torch_cuda()
    t = torch.cuda.get_device_properties(0)
    q = ampc.cuda.get_device_properties(0)
    assert (q.name, q.major, q.minor, q.multi_processor_count) == (
        t.name, t.major, t.minor, t.multi_processor_count)
    assert q.total_memory == t.total_memory
    # torch's default also counts emulation on older GPUs; ampc does not
    assert ampc.cuda.is_bf16_supported() == \
        torch.cuda.is_bf16_supported(including_emulation=False)
