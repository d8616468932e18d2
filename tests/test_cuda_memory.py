"""Device memory: the caching allocator (block reuse, counters, empty_cache,
out-of-memory), pinned host memory and queued copies from it, the
DataLoader's pin_memory=True, and the ampc.cuda device functions.  The
tests at the end need no GPU: they check the errors of a CPU-only machine.
"""
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import ampc
from cuda_helpers import requires_cuda as _requires_cuda
from ampc.utils.data import DataLoader, TensorDataset


def requires_cuda(fn):
    """A GPU test: marked ``cuda`` (selected by ``-m cuda``) and skipped
    without a GPU.  Not a module-wide ``cuda`` mark: this file's GPU-less
    tests must stay out of ``-m cuda`` and in ``-m "not cuda"``."""
    return pytest.mark.cuda(_requires_cuda(fn))

MiB = 1 << 20


def fresh():
    """Drops garbage and the allocator's cache, so a test starts from only
    the live tensors."""
    gc.collect()
    ampc.cuda.synchronize()
    ampc.cuda.empty_cache()


# ----------------------------------------------------------------------------
# the caching allocator


@requires_cuda
def test_counters_count_tensor_bytes_exactly():
    fresh()
    a0 = ampc.cuda.memory_allocated()
    x = ampc.empty(1000, dtype=ampc.float16, device="cuda")
    assert ampc.cuda.memory_allocated() - a0 == 2000
    y = ampc.empty(3, 5, dtype=ampc.int64, device="cuda:0")
    assert ampc.cuda.memory_allocated() - a0 == 2000 + 120
    assert ampc.memory_allocated("cuda") == ampc.cuda.memory_allocated()
    assert ampc.memory_allocated("cuda:0") == ampc.cuda.memory_allocated(0)
    # views share storage: no new bytes
    v = x[10:20].reshape(2, 5)
    assert ampc.cuda.memory_allocated() - a0 == 2120
    del x, y, v
    assert ampc.cuda.memory_allocated() == a0
    # CPU tensors are not counted on the GPU
    c = ampc.empty(10000)
    assert ampc.cuda.memory_allocated() == a0
    del c


@requires_cuda
def test_peak_and_reset():
    fresh()
    ampc.cuda.reset_peak_memory_stats()
    a0 = ampc.cuda.memory_allocated()
    assert ampc.cuda.max_memory_allocated() == a0
    x = ampc.empty(4 * MiB, dtype=ampc.float32, device="cuda")   # 16 MiB
    del x
    assert ampc.cuda.memory_allocated() == a0
    assert ampc.cuda.max_memory_allocated() == a0 + 16 * MiB
    r_peak = ampc.cuda.max_memory_reserved()
    assert r_peak >= ampc.cuda.memory_reserved()
    assert r_peak >= a0 + 16 * MiB
    ampc.cuda.reset_peak_memory_stats()
    assert ampc.cuda.max_memory_allocated() == a0
    assert ampc.cuda.max_memory_reserved() == ampc.cuda.memory_reserved()


@requires_cuda
@pytest.mark.parametrize("nbytes", [4, 1000, 512 * 1024, 1 * MiB,
                                    1 * MiB + 4, 4 * MiB, 12 * MiB,
                                    100 * MiB + 4])
def test_freed_block_is_reused(nbytes):
    fresh()
    x = ampc.empty(nbytes // 4, device="cuda")
    ptr = x.data_ptr()
    reserved = ampc.cuda.memory_reserved()
    assert reserved >= nbytes
    del x
    # freed blocks stay cached: reserved is unchanged ...
    assert ampc.cuda.memory_reserved() == reserved
    y = ampc.empty(nbytes // 4, device="cuda")
    # ... and the same size comes from the cache, not from new memory
    assert ampc.cuda.memory_reserved() == reserved
    if nbytes >= 12 * MiB:
        # a block of its own segment: the best fit is that very block
        assert y.data_ptr() == ptr
    assert y.data_ptr() % 256 == 0


@requires_cuda
def test_small_blocks_share_segments():
    fresh()
    r0 = ampc.cuda.memory_reserved()
    xs = [ampc.empty(100, device="cuda") for _ in range(1000)]   # 400 B
    ptrs = sorted(x.data_ptr() for x in xs)
    assert len(set(ptrs)) == 1000
    assert all(p % 512 == 0 for p in ptrs)
    # 1000 blocks of 512 B fit in one 2 MiB segment (plus what may be
    # left of segments already held)
    assert ampc.cuda.memory_reserved() - r0 <= 2 * MiB
    del xs


@requires_cuda
def test_split_blocks_merge_back():
    fresh()
    a = ampc.empty(3 * MiB // 4, device="cuda")      # carved from 20 MiB
    b = ampc.empty(3 * MiB // 4, device="cuda")
    r = ampc.cuda.memory_reserved()
    del a, b
    # the two halves merged with the free rest: one 15 MiB request fits
    c = ampc.empty(15 * MiB // 4, device="cuda")
    assert ampc.cuda.memory_reserved() == r
    del c


@requires_cuda
def test_empty_cache_returns_memory():
    fresh()
    r0 = ampc.cuda.memory_reserved()
    x = ampc.empty(64 * MiB // 4, device="cuda")
    assert ampc.cuda.memory_reserved() >= r0 + 64 * MiB
    free_before, total = ampc.cuda.mem_get_info()
    del x
    assert ampc.cuda.memory_reserved() >= r0 + 64 * MiB     # cached
    ampc.cuda.empty_cache()
    assert ampc.cuda.memory_reserved() == r0
    free_after, _ = ampc.cuda.mem_get_info()
    assert free_after >= free_before + 60 * MiB
    # the raw _C.empty_cache() (the CPU's cache) empties the GPU cache too
    y = ampc.empty(32 * MiB // 4, device="cuda")
    del y
    ampc._C.empty_cache()
    assert ampc.cuda.memory_reserved() == r0


@requires_cuda
def test_no_caching_mode_allocates_exact_sizes():
    """AMPC_CUDA_NO_CACHING=1 (for compute-sanitizer): each allocation is
    its own cudaMalloc of the bytes asked, returned at once on free."""
    code = (
        "import ampc\n"
        "(ampc.ones(3, device='cuda') * 3).sum().item()\n"   # warm-up
        "r0 = ampc.cuda.memory_reserved()\n"
        "x = ampc.empty(1001, device='cuda')\n"
        "r1 = ampc.cuda.memory_reserved()\n"
        "y = (x.fill_(2.0) * 3).sum().item()\n"
        "del x\n"
        "print(r1 - r0, ampc.cuda.memory_reserved() - r0, y)\n")
    env = dict(os.environ, AMPC_CUDA_NO_CACHING="1")
    run = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    grew, left, total = run.stdout.split()
    assert (int(grew), int(left), float(total)) == (4004, 0, 6006.0)


@requires_cuda
def test_values_survive_reuse_in_stream_order():
    # a block freed while a queued kernel still writes it is reused only
    # by later work on the same stream: results must stay right
    fresh()
    want = np.arange(1 << 20, dtype=np.float32)
    for _ in range(20):
        src = ampc.tensor(want, device="cuda")
        tmp = src.to(ampc.float16).to(ampc.float32)      # queued kernels
        del src
        again = ampc.tensor(want[::-1].copy(), device="cuda")
        assert np.array_equal(tmp.cpu().numpy(),
                              want.astype(np.float16).astype(np.float32))
        assert np.array_equal(again.cpu().numpy(), want[::-1])


@requires_cuda
def test_out_of_memory_is_clear_and_recoverable():
    fresh()
    free, total = ampc.cuda.mem_get_info()
    a0 = ampc.cuda.memory_allocated()
    ask = total * 2                                  # can never fit
    with pytest.raises(ampc.cuda.OutOfMemoryError) as e:
        ampc.empty(ask // 4, device="cuda")
    msg = str(e.value)
    assert isinstance(e.value, RuntimeError)
    assert "CUDA out of memory" in msg
    assert f"({(ask // 4) * 4} bytes)" in msg
    assert "cuda:0" in msg and "free of" in msg and "total" in msg
    assert "memory_allocated" in msg and "memory_reserved" in msg
    # nothing leaked, the error is cleared, and the GPU still works
    assert ampc.cuda.memory_allocated() == a0
    x = ampc.ones(MiB, device="cuda")
    assert x[-1].item() == 1.0
    ampc.cuda.synchronize()


@requires_cuda
def test_out_of_memory_after_filling_the_cache_retries():
    # hold most of the GPU in cached (freed) blocks of one size, then ask
    # for a different size: the allocator must empty its cache and succeed
    fresh()
    free, _ = ampc.cuda.mem_get_info()
    chunk = 256 * MiB
    n = int(free * 0.8) // chunk
    xs = [ampc.empty(chunk // 4, device="cuda") for _ in range(n)]
    del xs                                       # cached, not released
    assert ampc.cuda.memory_reserved() >= n * chunk
    big = ampc.empty(int(free * 0.7) // 4, device="cuda")
    assert big.is_cuda
    del big
    fresh()


@requires_cuda
def test_allocation_from_threads_is_safe():
    # the allocator may be called from several threads (DataLoader pinning,
    # graph code): counters stay consistent
    fresh()
    a0 = ampc.cuda.memory_allocated()
    errors = []

    def work():
        try:
            for _ in range(50):
                t = ampc.empty(1000, device="cuda")
                p = ampc.empty(1000).pin_memory()
                del t, p
        except Exception as exc:       # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert ampc.cuda.memory_allocated() == a0


# ----------------------------------------------------------------------------
# pinned memory and queued copies


@requires_cuda
@pytest.mark.parametrize("dtype", [ampc.float32, ampc.float16, ampc.bfloat16,
                                   ampc.int64, ampc.bool])
def test_pin_memory(dtype):
    x = ampc.arange(100).to(dtype).reshape(10, 10).transpose(0, 1)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    assert p.is_cpu and p.is_contiguous() and p.dtype is dtype
    assert p.tolist() == x.tolist()
    assert p.pin_memory() is p
    g = p.to("cuda", non_blocking=True)
    assert g.tolist() == x.tolist()
    # views of pinned memory are pinned
    assert p[2:5].is_pinned()
    with pytest.raises(RuntimeError, match="pin_memory.*CPU"):
        g.pin_memory()


@requires_cuda
def test_queued_copy_from_freed_pinned_memory_is_safe():
    # the pinned block is freed right after a queued copy from it; a new
    # pinned tensor of the same size (which may reuse the block) is filled
    # at once: the copy must still deliver the old values
    n = 4 * MiB
    want = np.arange(n, dtype=np.float32)
    outs = []
    for i in range(8):
        p = ampc.tensor(want + i).pin_memory()
        outs.append(p.to("cuda", non_blocking=True))
        del p
        q = ampc.full((n,), -1.0).pin_memory()
        q.fill_(-2.0)
        del q
    for i, g in enumerate(outs):
        assert np.array_equal(g.cpu().numpy(), want + i), i


@requires_cuda
def test_non_blocking_both_ways_and_copy_():
    x = ampc.arange(1000, dtype=ampc.float32).pin_memory()
    g = x.cuda(non_blocking=True)
    back = g.to("cpu", non_blocking=True)
    assert back.tolist() == x.tolist()
    d = ampc.zeros(1000, device="cuda")
    d.copy_(x, non_blocking=True)
    assert d.tolist() == x.tolist()


@requires_cuda
def test_blocking_copy_from_pinned_memory_has_finished_on_return():
    # As in PyTorch: without non_blocking, overwriting the pinned source
    # right after the copy cannot change what reached the GPU.
    n = 1 << 22
    for move in (lambda p: p.cuda(), lambda p: p.to("cuda"),
                 lambda p: ampc.empty(n, device="cuda").copy_(p)):
        p = ampc.full((n,), 1.0).pin_memory()
        g = move(p)
        p.fill_(2.0)
        assert g.sum().item() == n


@requires_cuda
def test_dataloader_pins_batches():
    ds = TensorDataset(ampc.arange(40, dtype=ampc.float32).reshape(20, 2),
                       ampc.arange(20))
    for workers in (0, 2):
        loader = DataLoader(ds, batch_size=6, pin_memory=True,
                            num_workers=workers)
        seen = 0
        for x, y in loader:
            assert x.is_pinned() and y.is_pinned()
            assert x.cuda(non_blocking=True).tolist() == x.tolist()
            seen += y.shape[0]
        assert seen == 20


@requires_cuda
def test_empty_cache_with_pinned_blocks():
    p = ampc.ones(MiB).pin_memory()
    g = p.cuda(non_blocking=True)
    del p
    ampc.cuda.empty_cache()                  # waits for the queued copy
    assert g[0].item() == 1.0 and g[-1].item() == 1.0
    assert np.array_equal(g.cpu().numpy(), np.ones(MiB, np.float32))


# ----------------------------------------------------------------------------
# ampc.cuda device functions


@requires_cuda
def test_device_functions():
    assert ampc.cuda.is_built() and ampc.cuda.is_available()
    n = ampc.cuda.device_count()
    assert n >= 1
    assert ampc.cuda.current_device() == 0
    ampc.cuda.set_device(0)
    ampc.cuda.set_device("cuda:0")
    ampc.cuda.set_device(ampc.device("cuda", 0))
    assert ampc.cuda.current_device() == 0
    name = ampc.cuda.get_device_name()
    assert isinstance(name, str) and name
    assert ampc.cuda.get_device_name(0) == name
    cap = ampc.cuda.get_device_capability()
    assert isinstance(cap, tuple) and len(cap) == 2
    assert all(isinstance(c, int) for c in cap) and cap[0] >= 5
    free, total = ampc.cuda.mem_get_info()
    assert 0 < free <= total
    ampc.cuda.synchronize()
    ampc.cuda.synchronize(0)
    with pytest.raises(RuntimeError, match="invalid device"):
        ampc.cuda.synchronize(n)
    with pytest.raises(RuntimeError, match="invalid device"):
        ampc.cuda.set_device(n)
    with pytest.raises(ValueError, match="CUDA device"):
        ampc.cuda.memory_allocated("cpu")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        ampc.zeros(2, device=f"cuda:{n}")


@requires_cuda
@pytest.mark.skipif(ampc.cuda.is_available() and
                    ampc.cuda.device_count() < 2, reason="needs two GPUs")
def test_ops_on_another_gpu_leave_the_current_device():
    # as PyTorch, whose ops restore the device: "cuda" keeps meaning the
    # device set_device() chose after an op on cuda:1
    ampc.cuda.set_device(0)
    x = ampc.ones(3, device="cuda:1")
    (x * 2).sum().item()
    assert ampc.cuda.current_device() == 0
    assert ampc.zeros(1, device="cuda").device.index == 0
    ampc.cuda.set_device(1)
    assert ampc.zeros(1, device="cuda").device.index == 1
    ampc.cuda.set_device(0)


@requires_cuda
def test_device_functions_match_torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    assert ampc.cuda.get_device_name() == torch.cuda.get_device_name()
    assert ampc.cuda.get_device_capability() == \
        torch.cuda.get_device_capability()
    assert ampc.cuda.device_count() == torch.cuda.device_count()


# ----------------------------------------------------------------------------
# without a GPU (these run everywhere)


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
@pytest.mark.parametrize("name,args", [
    ("current_device", ()), ("set_device", (0,)), ("synchronize", ()),
    ("get_device_name", ()), ("get_device_capability", ()),
    ("memory_allocated", ()), ("max_memory_allocated", ()),
    ("memory_reserved", ()), ("max_memory_reserved", ()),
    ("reset_peak_memory_stats", ()), ("empty_cache", ()),
    ("mem_get_info", ()),
])
def test_cuda_functions_without_gpu_are_clear(name, args):
    with pytest.raises(RuntimeError,
                       match=rf"ampc\.cuda\.{name}\(\): (no CUDA GPU|ampc "
                             r"was built without CUDA)"):
        getattr(ampc.cuda, name)(*args)


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
def test_raw_cuda_functions_without_gpu_are_clear():
    for fn in (ampc._C.cuda_synchronize, ampc._C.cuda_set_device,
               ampc._C.cuda_device_name, ampc._C.cuda_device_capability,
               ampc._C.cuda_memory_stats, ampc._C.cuda_reset_peak_reserved):
        with pytest.raises(RuntimeError, match="no CUDA GPU|without CUDA"):
            fn(0)
    with pytest.raises(RuntimeError, match="no CUDA GPU|without CUDA"):
        ampc._C.cuda_current_device()


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
def test_pin_memory_without_gpu_is_clear():
    x = ampc.ones(3)
    assert not x.is_pinned()
    with pytest.raises(RuntimeError,
                       match=r"pin_memory\(\): pinned memory needs a CUDA "
                             r"GPU, but (no CUDA GPU|ampc was built)"):
        x.pin_memory()
    assert ampc.memory_allocated() >= 0          # nothing half-made


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
def test_dataloader_pin_memory_without_gpu_warns_and_does_not_pin():
    ds = TensorDataset(ampc.zeros(4, 2))
    with pytest.warns(UserWarning, match="pin_memory"):
        loader = DataLoader(ds, batch_size=2, pin_memory=True)
    (x,) = next(iter(loader))
    assert not x.is_pinned()


def test_out_of_memory_error_class():
    err = ampc.cuda.OutOfMemoryError
    assert issubclass(err, RuntimeError)
    assert err.__name__ == "OutOfMemoryError"
    assert err.__module__ == "ampc.cuda"
    assert "OutOfMemoryError" in ampc.cuda.__all__
    assert err.__doc__


def test_empty_cache_on_the_cpu():
    x = ampc.empty(4 * MiB)
    del x
    ampc._C.empty_cache()           # CPU cache (and the GPU's, if any)


def test_memory_allocated_of_a_bad_device_is_clear():
    with pytest.raises((RuntimeError, TypeError, ValueError),
                       match="device.*tpu"):
        ampc.memory_allocated("tpu")
    with pytest.raises(RuntimeError, match="memory_allocated"):
        ampc._C.memory_allocated("tpu")
