"""CPU dispatch: the best level the CPU has is chosen at import, every slot
reports which variant runs, AMPC_CPU_LEVEL forces a lower level, and the
levels agree with each other."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ampc
from helpers import BIG, from_values, rand_values, to64

LEVELS = ("ref", "avx2", "avx512")


def _run(code, **env):
    e = {k: v for k, v in os.environ.items() if k != "AMPC_CPU_LEVEL"}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e,
                          capture_output=True, text=True, timeout=120)


def _expected_best(f):
    if f.get("avx512f") and f.get("avx512bw") and f.get("avx512vl") and \
            f.get("avx2") and f.get("fma") and f.get("f16c"):
        return "avx512"
    if f.get("avx2") and f.get("fma") and f.get("f16c"):
        return "avx2"
    return "ref"


def test_best_level_follows_features():
    f = ampc.backends.cpu.features()
    assert {"avx2", "fma", "f16c", "avx512f"} <= set(f)
    assert all(isinstance(v, bool) for v in f.values())
    assert ampc.backends.cpu.best_level() == _expected_best(f)
    assert ampc.backends.cpu.levels() == \
        list(LEVELS[:LEVELS.index(ampc.backends.cpu.best_level()) + 1])


def test_import_picks_best_level():
    r = _run("import ampc; print(ampc.cuda.is_built(), "
             "ampc.backends.cpu.capability())")
    assert r.returncode == 0, r.stderr
    built, level = r.stdout.split()
    assert built in ("True", "False")
    assert level == ampc.backends.cpu.best_level()


@pytest.mark.parametrize("level", LEVELS)
def test_env_forces_level(level):
    if level not in ampc.backends.cpu.levels():
        pytest.skip(f"this CPU has no {level}")
    r = _run("import ampc; print(ampc.backends.cpu.capability(), "
             "ampc.backends.cpu.kernel_variant('binary'))",
             AMPC_CPU_LEVEL=level)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [level, level]


def test_env_bad_level_is_clear():
    r = _run("import ampc", AMPC_CPU_LEVEL="sse9")
    assert r.returncode != 0
    assert "AMPC_CPU_LEVEL" in r.stderr and "sse9" in r.stderr


def test_kernel_variant_per_level(cpu_level):
    assert ampc.backends.cpu.capability() == cpu_level
    slots = ampc.backends.cpu.kernel_slots()
    assert {"cast", "binary", "compare", "unary", "reduce", "random",
            "arange"} <= set(slots)
    for slot in slots:
        v = ampc.backends.cpu.kernel_variant(slot)
        assert v in LEVELS
        assert LEVELS.index(v) <= LEVELS.index(cpu_level), (slot, v)
        if cpu_level == "ref":
            assert v == "ref"
    # the element-wise slots have SIMD variants at every level
    for slot in ("cast", "binary", "compare", "unary", "reduce"):
        assert ampc.backends.cpu.kernel_variant(slot) == cpu_level


def test_set_level_restores():
    prev = ampc._C.cpu_capability()
    try:
        ampc._C._set_cpu_level("ref")
        assert ampc.backends.cpu.capability() == "ref"
        assert ampc.backends.cpu.kernel_variant("binary") == "ref"
    finally:
        ampc._C._set_cpu_level(prev)
    assert ampc.backends.cpu.capability() == prev


def test_levels_agree_bit_for_bit():
    """Element-wise results and casts are identical at every level (one
    float32 op, one RNE rounding); sums may differ in rounding only."""
    rng = np.random.default_rng(0)
    results = {}
    prev = ampc._C.cpu_capability()
    try:
        for level in ampc.backends.cpu.levels():
            ampc._C._set_cpu_level(level)
            out = []
            for dt in ("float32", "float16", "bfloat16"):
                a = from_values(rand_values((BIG // 10,), dt, rng), dt)
                b = from_values(rand_values((BIG // 10,), dt, rng), dt)
                out.append(to64(a * b + a))
                out.append(to64(a.exp()))
                out.append(to64(a.float().half()))
                out.append(to64(a.float().bfloat16()))
                out.append(to64(a > b))
                out.append(to64(a.sum()))
            results[level] = out
            rng = np.random.default_rng(0)
    finally:
        ampc._C._set_cpu_level(prev)
    base = results["ref"]
    for level, out in results.items():
        for i, (x, y) in enumerate(zip(base, out)):
            if i % 6 == 5:      # sums: summation order may differ
                np.testing.assert_allclose(x, y, rtol=1e-3)
            elif i % 6 == 1:    # exp: a SIMD polynomial may differ by ulps
                np.testing.assert_allclose(x, y, rtol=2e-3)
            else:
                assert np.array_equal(x, y, equal_nan=True), (level, i)
