"""Every test marked `cuda`, split into shards that run side by side, each
in its own process (tools/gpu_check.sh's cuda_tests stage).

Why shards in processes: a faulting kernel leaves its CUDA context
unusable ("sticky" errors), so every later test in that process fails with
the same message, and a crash ends the process.  A shard confines that to
its own tests, and its verbose log (one line per test, Python's
faulthandler traceback on a crash) names the test that did it.  Running
shards side by side also uses the GPU machine's cores: the tests' CPU
references are most of their time.

    python tools/gpu_tests.py OUT_DIR [--jobs 6] [--shard-size 350]
                              [--timeout 200] [pytest args...]

tests/test_cuda_memory.py, which measures the GPU's free memory, runs
alone after the others.  Writes OUT_DIR/shard_NN.log and prints the failures and one pytest-style
summary line, last ("N passed, M failed, K skipped ...").  Exit status 0
only when every shard passed.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
MAX_RESUMES = 5
# files whose tests look at the whole GPU's free memory (filling most of it,
# or measuring what empty_cache gives back): run alone, after the others
EXCLUSIVE = {"tests/test_cuda_memory.py"}
# a verbose test line: "tests/f.py::test[p] PASSED   [ 5%]"; the result is
# missing while a test runs (and for good when it crashed)
NODE = re.compile(r"^(tests/[^:\s]+::[^\s\[]+(?:\[.*?\](?= |$))?)"
                  r"(?: (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b)?", re.M)


def collect(extra):
    """The node ids of the tests marked cuda, in collection order."""
    run = subprocess.run(PYTEST + ["--co", "-q", "-m", "cuda", "tests"]
                         + extra, capture_output=True, text=True)
    ids = [l for l in run.stdout.splitlines() if "::" in l]
    if not ids:
        sys.stdout.write(run.stdout[-3000:] + run.stderr[-3000:])
        raise SystemExit("gpu_tests: collected no cuda tests")
    return ids


def shards(ids, size):
    """Runs of at most `size` ids, never mixing two files in one shard (a
    file's module fixtures then set up once per shard)."""
    out, cur, cur_file = [], [], None
    for node in ids:
        file = node.split("::", 1)[0]
        if cur and (file != cur_file or len(cur) >= size):
            out.append(cur)
            cur = []
        cur.append(node)
        cur_file = file
    if cur:
        out.append(cur)
    return out


def run_shard(k, ids, out_dir, timeout, threads, extra):
    """Runs the shard; after a crash, resumes after the test that crashed
    (up to MAX_RESUMES times), so one bad kernel hides few results.
    Returns (k, ids, exit codes, ["CRASHED node" / "HUNG node"], seconds,
    log path)."""
    log = os.path.join(out_dir, f"shard_{k:02d}.log")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads),
               PYTHONFAULTHANDLER="1")
    start, todo, rcs, broke = time.time(), list(ids), [], []
    with open(log, "w") as f:
        while todo and len(broke) <= MAX_RESUMES:
            f.flush()
            mark = f.tell()
            left = timeout - (time.time() - start)
            try:
                rc = subprocess.run(
                    PYTEST + ["-v", "-rfE", "-m", "cuda"] + extra + todo,
                    stdout=f, stderr=subprocess.STDOUT, env=env,
                    timeout=max(left, 1.0)).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            rcs.append(rc)
            if rc in (0, 1, 5):
                break
            with open(log, errors="replace") as r:
                r.seek(mark)
                culprit = last_started(r.read())
            if rc == "timeout":
                broke.append(f"HUNG {culprit} (the shard's {timeout:.0f} s "
                             "were spent)")
                break
            broke.append(f"CRASHED {culprit} (exit {rc})")
            if culprit not in todo:
                break
            todo = todo[todo.index(culprit) + 1:]
            f.write(f"\n=== gpu_tests: {culprit} crashed the process "
                    f"(exit {rc}); resuming after it\n")
    return k, ids, rcs, broke, time.time() - start, log


def last_started(text):
    """The test a crashed or hung run was in: the last test line of its
    verbose log."""
    found = NODE.findall(text)
    return found[-1][0] if found else "?"


def results(text):
    """{node: PASSED|FAILED|...} from the verbose lines of a log (kept
    even when a crash ate pytest's summary), and the -rfE lines with
    the failures' short messages."""
    done = {node: what for node, what in NODE.findall(text) if what}
    short = [l for l in text.splitlines()
             if l.startswith(("FAILED ", "ERROR "))]
    return done, short


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--shard-size", type=int, default=350)
    ap.add_argument("--timeout", type=float, default=200.0)
    args, extra = ap.parse_known_args()
    os.makedirs(args.out_dir, exist_ok=True)
    ids = collect(extra)
    parts = shards(ids, args.shard_size)
    threads = max(1, (os.cpu_count() or 2) // args.jobs)
    print(f"gpu_tests: {len(ids)} cuda tests in {len(parts)} shards, "
          f"{args.jobs} at a time, {threads} OpenMP threads each")
    totals, failures, bad = {}, [], 0

    def report(k, part, rcs, broke, took, log):
        nonlocal failures, bad
        with open(log, errors="replace") as f:
            done, short = results(f.read())
        for what in done.values():
            totals[what] = totals.get(what, 0) + 1
        named = {l.split()[1] for l in short}
        failures += short + [f"{what} {node}" for node, what in done.items()
                             if what in ("FAILED", "ERROR") and
                             node not in named] + broke
        bad += len(broke)
        print(f"  shard {k:02d}: {len(part):4d} tests "
              f"{part[0].split('::')[0]:<28} {took:6.1f}s exit "
              + "/".join(map(str, rcs)) + "".join(f"; {b}" for b in broke))
        sys.stdout.flush()

    alone = [k for k, part in enumerate(parts)
             if part[0].split("::")[0] in EXCLUSIVE]
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_shard, k, part, args.out_dir,
                               args.timeout, threads, extra)
                   for k, part in enumerate(parts) if k not in alone]
        for fut in futures:
            report(*fut.result())
    for k in alone:
        report(*run_shard(k, parts[k], args.out_dir, args.timeout,
                          os.cpu_count() or 1, extra))
    if failures:
        print(f"\n{len(failures)} failures (full reports in "
              f"{args.out_dir}/shard_*.log):")
        for line in failures[:80]:
            print("  " + line[:220])
    order = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
    line = ", ".join(f"{totals[k]} {k.lower()}" for k in order
                     if totals.get(k))
    if bad:
        line += f", {bad} crashes or hangs"
    missing = len(ids) - sum(totals.values()) - bad
    if missing:
        line += f", {missing} not run"
    print(f"\n{line or 'no results'}")
    return 0 if not bad and not missing and not totals.get("FAILED") and \
        not totals.get("ERROR") and totals.get("PASSED") else 1


if __name__ == "__main__":
    sys.exit(main())
