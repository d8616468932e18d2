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
                              [--shard-timeout 200] [--deadline S]
                              [pytest args...]

tests/test_cuda_memory.py, which measures the GPU's free memory, runs
alone after the others.  A test that loses the CUDA context (an illegal
address, a trap: "sticky" errors that fail every later test of the
process) is reported as STICKY and its shard resumes after it in a new
process, like a crash.  --deadline (default: $STAGE_LIMIT_S - 20, set by
tools/gpu_check.sh's stage()) caps the whole run, so that the summary
prints before the stage is killed.  Writes OUT_DIR/shard_NN.log and prints
the failures and one pytest-style summary line, last ("N passed, M failed,
K skipped ...").  Exit status 0 only when every shard passed.
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
# a -rfE line: "FAILED tests/f.py::test[p] - message" (ids may hold spaces)
SHORT = re.compile(r"^(?:FAILED|ERROR) (tests/[^:\s]+::[^\s\[]+"
                   r"(?:\[.*?\](?= - |$))?)")
# errors after which the process's CUDA context is unusable
# (cudaErrorIllegalAddress 700, LaunchTimeout 702, Assert 710,
# HardwareStackError 714 ... LaunchFailure 719, Unknown 999)
STICKY = re.compile(r"illegal memory access|unspecified launch failure|"
                    r"misaligned address|device-side assert|illegal "
                    r"instruction|invalid program counter|launch timed out|"
                    r"hardware stack error|"
                    r"CUDA error (?:70[02]|71[04-9]|999)\b")
# seconds kept back from the other shards for the EXCLUSIVE ones
EXCLUSIVE_RESERVE = 45.0


def collect(extra):
    """The node ids of the tests marked cuda, in collection order."""
    run = subprocess.run(PYTEST + ["--co", "-q", "-m", "cuda", "tests"]
                         + extra, capture_output=True, text=True)
    # node ids only (a warnings summary may hold other lines with "::")
    ids = [line for line in run.stdout.splitlines()
           if line.startswith("tests/") and "::" in line]
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


def run_shard(k, ids, out_dir, timeout, threads, extra, until=None):
    """Runs the shard; after a crash, or a test that lost the CUDA
    context, resumes after that test (up to MAX_RESUMES times), so one bad
    kernel hides few results.  until: the time.time() by which the shard
    must be over.  Returns (k, ids, exit codes, ["CRASHED node" / "HUNG
    node" / "STICKY node" / "NOT STARTED ..."], seconds, log path)."""
    log = os.path.join(out_dir, f"shard_{k:02d}.log")
    # COLUMNS: pytest cuts the -rfE lines to the terminal's width (80 in a
    # file), which would drop the CUDA error text STICKY looks for.
    env = dict(os.environ, OMP_NUM_THREADS=str(threads),
               PYTHONFAULTHANDLER="1", PYTHONUNBUFFERED="1", COLUMNS="400")
    start, todo, rcs, broke = time.time(), list(ids), [], []
    with open(log, "w") as f:
        while todo and len(broke) <= MAX_RESUMES:
            f.flush()
            mark = f.tell()
            left = timeout - (time.time() - start)
            if until is not None:
                left = min(left, until - time.time())
            if left < 5.0:
                broke.append(f"NOT STARTED {todo[0]} and the "
                             f"{len(todo) - 1} after it (out of time)")
                break
            try:
                rc = subprocess.run(
                    PYTEST + ["-v", "-rfE", "-m", "cuda"] + extra + todo,
                    stdout=f, stderr=subprocess.STDOUT, env=env,
                    timeout=left).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            rcs.append(rc)
            with open(log, errors="replace") as r:
                r.seek(mark)
                text = r.read()
            if rc in (0, 1, 5):
                culprit = first_sticky(text, todo)
                if culprit is None:
                    break
                broke.append(f"STICKY {culprit} (lost the CUDA context; "
                             "the tests after it ran in a new process)")
                what = "lost the CUDA context"
            elif rc == "timeout":
                broke.append(f"HUNG {last_started(text)} (the shard's time "
                             "was spent)")
                break
            else:
                culprit = last_started(text)
                broke.append(f"CRASHED {culprit} (exit {rc})")
                if culprit not in todo:
                    break
                what = f"crashed the process (exit {rc})"
            todo = todo[todo.index(culprit) + 1:]
            f.write(f"\n=== gpu_tests: {culprit} {what}; resuming after "
                    "it\n")
    return k, ids, rcs, broke, time.time() - start, log


def last_started(text):
    """The test a crashed or hung run was in: the last test line of its
    verbose log."""
    found = NODE.findall(text)
    return found[-1][0] if found else "?"


def first_sticky(text, order):
    """The first test of `order` whose -rfE line shows an error that
    leaves the CUDA context unusable, or None."""
    hit = {m.group(1) for m in map(SHORT.match, text.splitlines())
           if m and STICKY.search(m.string)}
    return next((node for node in order if node in hit), None)


def results(text):
    """{node: PASSED|FAILED|...} from the verbose lines of a log (kept
    even when a crash ate pytest's summary; a test run again after a
    STICKY resume keeps its last verdict), and the -rfE lines with the
    failures' short messages, {node: line}."""
    done = {node: what for node, what in NODE.findall(text) if what}
    short = {}
    for line in text.splitlines():
        m = SHORT.match(line)
        if m:
            short[m.group(1)] = line
    return done, short


def main():
    # allow_abbrev=False, and no option named like one of pytest's: the
    # options this script does not know (pytest-timeout's --timeout=N)
    # must reach pytest untouched.
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("out_dir")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--shard-size", type=int, default=350)
    ap.add_argument("--shard-timeout", type=float, default=200.0)
    stage = os.environ.get("STAGE_LIMIT_S")
    ap.add_argument("--deadline", type=float,
                    default=float(stage) - 20.0 if stage else None,
                    help="seconds for the whole run")
    args, extra = ap.parse_known_args()
    os.makedirs(args.out_dir, exist_ok=True)
    t0 = time.time()
    end = None if args.deadline is None else t0 + args.deadline
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
        # the failures by their last verdict (a STICKY resume reruns the
        # tests that failed only because the context was lost)
        failures += [short.get(node, f"{what} {node}")
                     for node, what in done.items()
                     if what in ("FAILED", "ERROR")] + broke
        # a STICKY test has its verdict; a crash, a hang and tests never
        # started have none
        bad += sum(not b.startswith(("STICKY", "NOT STARTED"))
                   for b in broke)
        print(f"  shard {k:02d}: {len(part):4d} tests "
              f"{part[0].split('::')[0]:<28} {took:6.1f}s exit "
              + "/".join(map(str, rcs)) + "".join(f"; {b}" for b in broke))
        sys.stdout.flush()

    alone = [k for k, part in enumerate(parts)
             if part[0].split("::")[0] in EXCLUSIVE]
    reserve = 0.0
    if alone and args.deadline is not None:
        reserve = min(EXCLUSIVE_RESERVE, args.deadline / 4)
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_shard, k, part, args.out_dir,
                               args.shard_timeout, threads, extra,
                               None if end is None else end - reserve)
                   for k, part in enumerate(parts) if k not in alone]
        for fut in futures:
            report(*fut.result())
    for k in alone:
        report(*run_shard(k, parts[k], args.out_dir, args.shard_timeout,
                          os.cpu_count() or 1, extra, end))
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
