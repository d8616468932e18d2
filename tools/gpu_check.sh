#!/usr/bin/env bash
# gpu_check.sh - everything GPU-side of ampc in one run, on one GPU with no
# network, well under 8 minutes on an H200: the machine and its versions;
# the build (pip install --no-build-isolation -e .: no package index is
# reached), which must have compiled CUDA; every test marked `cuda`; a
# short CPU smoke subset; the lab for one epoch in FP32, AMP-fp16 and
# AMP-bf16 on the GPU; benchmarks/bench_cuda.py --quick,
# bench_overhead.py (host time per step), the lab's layer-by-layer
# timings (python -m ampc.lab --layers), bench_indexing.py,
# bench_norm.py, bench_sort.py and bench_interpolate.py; with a minute
# left, compute-sanitizer over
# tools/sanitize_smoke.py.  Each stage runs
# even when an earlier one failed (one run gives the most information);
# the exit code is nonzero when any stage failed.  Logs go to
# ${OUT:-/tmp/gpu_check}; the summary table is printed last.
#
#   bash tools/gpu_check.sh            # from the repository root
#
# Environment: PYTHON (default python3), AMPC_CUDA_ARCH (default 90: the
# H200 only, the fastest build), OUT (the log folder), GPU_CHECK_BUDGET
# (default 540 s: every stage's limit is cut to what is left of it, so the
# summary is printed before a 600 s limit on the whole call).
set -euo pipefail

cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
PYTHON="${PYTHON:-python3}"
export AMPC_CUDA_ARCH="${AMPC_CUDA_ARCH:-90}"
export PYTHONUNBUFFERED=1
# the repository root first on the path: an in-place build (the build
# stage's fallback) is then importable from every stage, as an editable
# install is (the scripts under benchmarks/ and tools/ do not have the
# root on sys.path by themselves)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
STATUS="$OUT/stages.tsv"        # name <TAB> PASS|FAIL <TAB> seconds <TAB> note
: >"$STATUS"
T0=$(date +%s)
BUDGET="${GPU_CHECK_BUDGET:-540}"

# ----------------------------------------------------------------------------
# stage NAME LIMIT_S CMD...: runs CMD with a time limit, its output in
# $OUT/NAME.log (and on the terminal), and records PASS or FAIL.

stage() {
    local name=$1 limit=$2
    shift 2
    local log="$OUT/$name.log" start rc
    # what is left of the budget, less 15 s for the summary
    local left=$((BUDGET - ($(date +%s) - T0) - 15))
    if [ "$left" -lt 10 ]; then
        printf '%s\tFAIL\t0\tnot run: the %ss budget was spent\n' \
            "$name" "$BUDGET" >>"$STATUS"
        return 0
    fi
    if [ "$left" -lt "$limit" ]; then
        limit=$left
    fi
    echo
    echo "=== $name (limit ${limit}s): $*"
    start=$(date +%s)
    set +e
    # bash -c: a stage may be one of the functions below (exported).
    # STAGE_LIMIT_S: the stage's own limit, for tools/gpu_tests.py's
    # --deadline (it must print its summary before it is killed).
    STAGE_LIMIT_S=$limit timeout --kill-after=10 "$limit" \
        bash -c '"$@"' stage "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    local took=$(($(date +%s) - start)) verdict=PASS note=""
    if [ "$rc" -ne 0 ]; then
        verdict=FAIL
        note="exit $rc"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            note="timed out after ${limit}s"
        fi
    fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$verdict" "$took" "$note" >>"$STATUS"
    return 0
}

# ----------------------------------------------------------------------------
# the stages

machine() {
    nvidia-smi -L || echo "nvidia-smi: not found or failed"
    nvidia-smi --query-gpu=name,driver_version,memory.total \
        --format=csv,noheader || true
    command -v nvcc >/dev/null && nvcc --version | tail -n 2 || \
        echo "nvcc: not on PATH (setup.py also looks in the pip wheels)"
    "$PYTHON" - <<'EOF'
import platform, sys
print("python", platform.python_version(), sys.executable)
for name in ("numpy", "pytest", "torch"):
    try:
        mod = __import__(name)
        extra = ""
        if name == "torch":
            extra = (f" (CUDA {mod.version.cuda}, available "
                     f"{mod.cuda.is_available()})")
        print(name, mod.__version__ + extra)
    except ImportError:
        print(name, "not installed")
EOF
}

build() {
    # -v: setup.py's status line ("ampc: building with CUDA ...") is only
    # shown by a verbose pip.  --no-index --no-deps: nothing is fetched.
    # PIP_BREAK_SYSTEM_PACKAGES: a distribution's Python 3.12 (Ubuntu 24.04)
    # is "externally managed" (PEP 668) and pip refuses to install into it
    # without this (older pips ignore the variable).
    if ! PIP_BREAK_SYSTEM_PACKAGES=1 "$PYTHON" -m pip install -v \
        --no-build-isolation --no-index --no-deps -e . \
        >"$OUT/build_pip.log" 2>&1; then
        tail -n 30 "$OUT/build_pip.log"
        # pip can fail before the build starts (no `wheel` for an older
        # setuptools' editable install, a pip that refuses the
        # environment): build in place instead; the repository root is on
        # PYTHONPATH (set below) for every stage
        echo "gpu_check: pip install -e . failed; trying" \
            "setup.py build_ext --inplace"
        "$PYTHON" setup.py build_ext --inplace >>"$OUT/build_pip.log" \
            2>&1 || {
            tail -n 60 "$OUT/build_pip.log"
            return 1
        }
    fi
    grep -m1 "ampc: building" "$OUT/build_pip.log" || true
    "$PYTHON" - <<'EOF'
import ampc, ampc._build_config as c
print(c.STATUS)
slots = ampc._C.cuda_slots()
empty = [k for k, v in slots.items() if not v]
print(f"CUDA built: {c.CUDA}; {len(slots)} CUDA slots, empty: {empty or 'none'}")
print(f"GPUs seen: {ampc.cuda.device_count()}",
      ampc.cuda.get_device_name() if ampc.cuda.is_available() else "")
if not c.CUDA:
    raise SystemExit("gpu_check: the build did not compile CUDA")
if empty:
    raise SystemExit(f"gpu_check: CUDA slots left empty: {empty}")
# Every slot is filled even without the libraries (the gemm slot is then a
# stub that raises), so say which ones were linked, and fail this stage
# when cuBLAS is missing: every linear, matmul and conv (its im2col path
# too) would fail later, and the summary should name the cause first.
for name, path in sorted(c.CUDA_LIBRARIES.items()):
    print(f"  linked {name}: {path}")
print(f"cuDNN at run time: {ampc.backends.cudnn.version()}")
if not (c.CUBLAS or c.CUBLASLT):
    raise SystemExit("gpu_check: the build found no cuBLAS / cuBLASLt "
                     "(site-packages/nvidia/cu13/lib or the toolkit): "
                     "every GEMM would raise")
if not c.CUDNN:
    print("gpu_check: WARNING: the build found no cuDNN: conv2d runs as "
          "im2col + GEMM and the cuDNN tests skip")
if not ampc.cuda.is_available():
    raise SystemExit("gpu_check: ampc sees no GPU")
EOF
}

# compute-sanitizer's memcheck over tools/sanitize_smoke.py (every kind of
# kernel once, odd shapes, misaligned views), with the allocator's cache off
# so each tensor's true bounds are checked.  Where the tool is missing the
# log says so and the stage passes.
sanitize() {
    local cs
    cs=$(command -v compute-sanitizer || true)
    if [ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
        cs=/usr/local/cuda/bin/compute-sanitizer
    fi
    if [ -z "$cs" ]; then
        echo "compute-sanitizer: not found; nothing checked"
        return 0
    fi
    # memcheck is slow under cuBLAS/cuDNN: a run cut short by the stage's
    # limit still reports the cases it finished and any error it printed,
    # and fails only on such an error
    local log="$OUT/sanitize_run.log" rc
    AMPC_CUDA_NO_CACHING=1 timeout $((${STAGE_LIMIT_S:-120} - 10)) "$cs" \
        --tool memcheck --error-exitcode 3 --print-limit 20 \
        "$PYTHON" tools/sanitize_smoke.py 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 124 ]; then
        echo "compute-sanitizer: stopped at the stage's time limit"
        grep -q -E "^========= (Invalid|Program hit|ERROR SUMMARY: [1-9])" \
            "$log" && return 1
        return 0
    fi
    return "$rc"
}

export OUT PYTHON
export -f machine build sanitize

pytest_flags=(-q -rfE -p no:cacheprovider)
pytest_timeout=()
if "$PYTHON" -c "import pytest_timeout" 2>/dev/null; then
    pytest_timeout=(--timeout=120)
fi
pytest_flags+=("${pytest_timeout[@]}")

stage machine 30 machine
stage build 300 build
# in shards, side by side, each in its own process (tools/gpu_tests.py: a
# faulting kernel then spoils only its shard, and the log names the test).
# --shard-timeout, not --timeout: the latter is pytest-timeout's, passed on.
stage cuda_tests 240 "$PYTHON" tools/gpu_tests.py "$OUT/cuda_tests" \
    --shard-timeout 200 "${pytest_timeout[@]}"
stage lab 90 "$PYTHON" -m ampc.lab --device cuda --data fake --epochs 1 \
    --train-size 20000 --test-size 5000 --no-progress \
    --json "$OUT/lab.json"
stage cpu_smoke 60 "$PYTHON" -m pytest "${pytest_flags[@]}" \
    -m "not cuda and not slow" tests/test_cuda_build.py \
    tests/test_dispatch.py tests/test_dtype.py tests/test_cuda_graphs.py
stage bench 120 "$PYTHON" benchmarks/bench_cuda.py --quick \
    --json "$OUT/bench.json"
stage overhead 60 "$PYTHON" benchmarks/bench_overhead.py --device cuda \
    --steps 200
# where the step's time goes, layer by layer, per precision
stage layers 40 "$PYTHON" -m ampc.lab --device cuda --layers --no-progress
# the indexing kernels (gathers, scatter-adds, nonzero) beside torch
stage indexing 30 "$PYTHON" benchmarks/bench_indexing.py --device cuda \
    --repeat 5
# batch_norm, layer_norm and group_norm beside torch
stage norm 20 "$PYTHON" benchmarks/bench_norm.py --device cuda --repeat 5
# cumsum, sort and topk beside torch
stage sort 15 "$PYTHON" benchmarks/bench_sort.py --device cuda --repeat 5
# interpolate's kernels (bicubic, antialias, trilinear) beside torch
stage interpolate 15 "$PYTHON" benchmarks/bench_interpolate.py \
    --device cuda --repeat 5
# last and optional: only with a minute of the budget left
if [ $((BUDGET - ($(date +%s) - T0) - 15)) -ge 60 ]; then
    stage sanitize 120 sanitize
else
    printf 'sanitize\tSKIP\t0\tnot run: under 60 s of the budget left\n' \
        >>"$STATUS"
fi

# ----------------------------------------------------------------------------
# the summary, last

"$PYTHON" - "$OUT" "$(($(date +%s) - T0))" <<'EOF' | tee "$OUT/summary.txt"
import json, os, re, sys

out, total = sys.argv[1], int(sys.argv[2])


def read(name):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read()
    except OSError:
        return ""


def counts(log):
    """pytest's last summary line, as 'N passed, M failed, ...'."""
    lines = [l for l in log.splitlines()
             if re.search(r"\d+ (passed|failed|error|skipped)", l)]
    return lines[-1].strip("= ") if lines else "no pytest summary"


print("\n" + "=" * 72)
print(f"gpu_check summary ({total} s in all; logs in {out})")
print("=" * 72)
print(f"{'stage':<12}{'result':<8}{'time':>6}  note")
failed = 0
for line in read("stages.tsv").splitlines():
    name, verdict, took, note = (line.split("\t") + [""] * 4)[:4]
    failed += verdict not in ("PASS", "SKIP")
    if name in ("cuda_tests", "cpu_smoke"):
        note = (note + "; " if note else "") + counts(read(name + ".log"))
    if name == "overhead":
        rows = [l.split() for l in read("overhead.log").splitlines()
                if l.split()[:1] in (["fp32"], ["bf16"], ["fp16"])]
        note = "; ".join(([note] if note else []) +
                         [f"{r[0]} ampc {r[1]} us" +
                          (f" torch {r[2]} us" if len(r) > 2 else "")
                          for r in rows])
    if name == "layers":
        steps = re.findall(r"autocast (\w+), ([\d.]+) ms per step",
                           read("layers.log"))
        note = "; ".join(([note] if note else []) +
                         [f"{d} {ms} ms/step" for d, ms in steps])
    if name == "sanitize":
        said = [l.strip() for l in read("sanitize.log").splitlines()
                if "ERROR SUMMARY" in l or l.startswith(
                    ("sanitize_smoke:", "compute-sanitizer:"))]
        note = "; ".join(([note] if note else []) + said[-2:])
    print(f"{name:<12}{verdict:<8}{took + 's':>6}  {note}")

build = read("build.log")
for l in build.splitlines():
    if l.startswith("ampc: building") or l.startswith("CUDA built"):
        print("  " + l)
warnings = [l.strip() for l in read("build_pip.log").splitlines()
            if re.search(r"\bwarning\b", l, re.I) and
            re.search(r"\.(cu|cuh|c|h)\b", l)]
print(f"  compiler warnings in the build: {len(warnings)}"
      + "".join(f"\n    {w[:150]}" for w in warnings[:5]))

try:
    lab = json.loads(read("lab.json"))
    print("\nlab, 1 epoch on the GPU (FakeCIFAR10 20,000/5,000, batch 256):")
    print(f"  {'run':<10}{'img/s':>10}{'s/epoch':>9}{'speed-up':>9}"
          f"{'peak GPU MB':>12}{'loss':>7}{'test acc':>9}")
    runs = lab["runs"]
    base = next((r for r in runs if r["precision"] == "fp32"), None)
    for r in runs:
        speed = ""
        if base and r.get("s_per_epoch") and base.get("s_per_epoch"):
            speed = f"{base['s_per_epoch'] / r['s_per_epoch']:.2f}x"
        acc = r.get("test_accuracy")
        print(f"  {r['label']:<10}{r.get('images_per_s') or 0:>10,.0f}"
              f"{r.get('s_per_epoch') or 0:>9.2f}{speed:>9}"
              f"{(r.get('peak_memory_bytes') or 0) / 2**20:>12.1f}"
              f"{r.get('final_train_loss') or float('nan'):>7.3f}"
              f"{'' if acc is None else f'{100 * acc:.1f}%':>9}")
except (ValueError, KeyError, TypeError) as e:
    print(f"\nlab: no figures ({type(e).__name__}: {e})")

try:
    bench = json.loads(read("bench.json"))
    print("\nbench_cuda --quick (ms per training step, batch "
          f"{bench['batch']}; fused SGD {bench['fused_sgd']}):")
    print(f"  {'precision':<10}{'ampc eager':>11}{'ampc graph':>11}"
          f"{'torch eager':>12}{'torch graph':>12}")

    def ms(v, fmt=".2f"):
        return "n/a" if v is None else format(v, fmt)
    for name, r in bench["steps"].items():
        print(f"  {name:<10}{ms(r.get('ampc_eager_ms')):>11}"
              f"{ms(r.get('ampc_graph_ms')):>11}"
              f"{ms(r.get('torch_eager_ms')):>12}"
              f"{ms(r.get('torch_graph_ms')):>12}")
    for u in bench["unscale"]:
        print(f"  unscale {u['dtype']} {u['elements']:,} el: "
              f"{u['ampc_GBs']:.0f} GB/s, copy {u['copy_GBs']:.0f} GB/s "
              f"({u['ampc_GBs'] / u['copy_GBs']:.0%}), torch "
              f"{ms(u.get('torch_GBs'), '.0f')} GB/s")
    g = bench["gemm"]
    if "ampc_TFLOPs" in g:
        print(f"  fp16 GEMM {g['size']}^3: ampc {g['ampc_TFLOPs']:.0f} "
              f"TFLOP/s, torch {ms(g.get('torch_TFLOPs'), '.0f')}")
    for e in bench.get("errors", []):
        print(f"  FAILED {e[:150]}")
    met = [t for t in bench["targets"] if t["met"]]
    print(f"  targets met: {len(met)} of {len(bench['targets'])}")
    for t in bench["targets"]:
        if not t["met"]:
            print(f"    MISSED {t['target']} ({t['value']:.2f})")
except (ValueError, KeyError, TypeError) as e:
    print(f"\nbench: no figures ({type(e).__name__}: {e})")

fails = [l.strip() for l in read("cuda_tests.log").splitlines()
         if l.strip().startswith(("FAILED ", "ERROR ", "CRASHED ", "HUNG ",
                                  "STICKY ", "NOT STARTED "))]
if fails:
    print(f"\ncuda test failures ({len(fails)}; all in cuda_tests/):")
    for l in fails[:25]:
        print("  " + l[:160])

print("\nRESULT: " + ("PASS" if failed == 0 else f"FAIL ({failed} stage"
                      f"{'s' if failed != 1 else ''} failed)"))
sys.exit(1 if failed else 0)
EOF
