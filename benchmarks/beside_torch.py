"""What the benchmarks that time an ampc op beside torch's share: the best
time of a call (the device synchronized), the synchronizer for a device,
and the printed row (ampc ms, torch ms, torch/ampc).  Imported by
bench_indexing.py and bench_norm.py, which run as scripts from this
folder."""
import time


def best_ms(fn, repeat, sync):
    """Best ms of fn() over ``repeat`` runs after a warm-up, each ended by
    sync()."""
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def device_sync(device, ampc, torch):
    """A function that waits for ampc's and torch's GPU work on a "cuda"
    device, and does nothing on the CPU."""
    def sync():
        if device.startswith("cuda"):
            ampc.cuda.synchronize()
            if torch is not None:
                torch.cuda.synchronize()
    return sync


def timed_row(label, fa, ft, repeat, sync, width, digits):
    """The row of one case: ampc's ms and, when ft is not None, torch's and
    torch/ampc."""
    ms_a = best_ms(fa, repeat, sync)
    row = f"{label:<{width}}{ms_a:>10.{digits}f}"
    if ft is not None:
        ms_t = best_ms(ft, repeat, sync)
        row += f"{ms_t:>10.{digits}f}{ms_t / ms_a:>12.2f}"
    return row
