"""What the benchmarks that time an ampc op beside torch's share: the best
time of a call (the device synchronized), the synchronizer for a device,
the printed row (ampc ms, torch ms, torch/ampc) and the command line that
runs a list of checked cases.  Imported by bench_indexing.py, bench_norm.py,
bench_sort.py and bench_tensor_more.py, which run as scripts from this
folder."""
import argparse
import time


def best_ms(fn, repeat, sync, clock=time.perf_counter):
    """Best ms of fn() over ``repeat`` runs after a warm-up, each ended by
    sync(), timed by ``clock`` (wall time; ``time.thread_time`` counts only
    the calling thread's CPU time, which other jobs' load does not
    inflate, for one-thread CPU runs)."""
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        sync()
        best = min(best, clock() - t0)
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


def timed_row(label, fa, ft, repeat, sync, width, digits,
              clock=time.perf_counter):
    """The row of one case: ampc's ms and, when ft is not None, torch's and
    torch/ampc."""
    ms_a = best_ms(fa, repeat, sync, clock)
    row = f"{label:<{width}}{ms_a:>10.{digits}f}"
    if ft is not None:
        ms_t = best_ms(ft, repeat, sync, clock)
        row += f"{ms_t:>10.{digits}f}{ms_t / ms_a:>12.2f}"
    return row


def run_cases(doc, cases, ampc, torch, width, digits=3):
    """The script's command line (--repeat, --threads, --device), then one
    row per case of ``cases(device)``: (label, ampc call, torch call or
    None, check), each checked before it is timed."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cpu-clock", action="store_true",
                    help="time by the calling thread's CPU time (with "
                    "--threads 1 on the CPU)")
    args = ap.parse_args()
    clock = time.thread_time if args.cpu_clock else time.perf_counter
    if args.threads:
        ampc.set_num_threads(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)
    sync = device_sync(args.device, ampc, torch)
    print(f"{'case':<{width}}{'ampc ms':>10}{'torch ms':>10}{'torch/ampc':>12}")
    for label, fa, ft, check in cases(args.device):
        check()
        print(timed_row(label, fa, ft, args.repeat, sync, width, digits,
                        clock))
