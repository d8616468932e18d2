"""The build: what setup.py compiled into ampc._C, and that a CPU-only build
works.  None of these needs a GPU; the one that checks a GPU is seen runs
only where a device node exists."""
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ampc
import ampc.cuda
from ampc import _C
from ampc import _build_config as build_config

REPO = Path(__file__).resolve().parents[1]


def gpu_present():
    """Whether this machine has an NVIDIA GPU, asked of the OS, not of ampc
    (which is what is under test)."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def test_cuda_is_built_matches_build_config():
    assert _C.cuda_is_built() is build_config.CUDA, build_config.STATUS


def test_cuda_built_when_nvcc_found():
    """Where nvcc is on PATH (CI has one), the CUDA sources must have been
    compiled: a build that silently fell back to CPU-only would let them rot."""
    if build_config.CUDA_REQUESTED != "auto" or shutil.which("nvcc") is None:
        pytest.skip("CUDA was forced on or off, or there is no nvcc on PATH")
    assert build_config.CUDA, (
        f"nvcc is at {shutil.which('nvcc')} but the build said "
        f"{build_config.STATUS!r}; rebuild with pip install -e .")


def test_cuda_build_without_gpu_has_no_devices():
    if not build_config.CUDA:
        pytest.skip("CPU-only build")
    if gpu_present():
        pytest.skip("this machine has a GPU")
    assert _C.cuda_device_count() == 0
    assert ampc.cuda.is_available() is False


@pytest.mark.cuda
def test_cuda_build_with_gpu_sees_it():
    if not build_config.CUDA or not gpu_present():
        pytest.skip("needs a CUDA build on a machine with a GPU")
    assert _C.cuda_device_count() >= 1
    assert ampc.cuda.is_available() is True


def test_cpu_only_build(tmp_path):
    """AMPC_CUDA=0 builds a _C without CUDA, importable beside a copy of the
    Python package, whatever the machine has."""
    if not (REPO / "setup.py").exists():
        pytest.skip("not run from a source checkout")
    lib = tmp_path / "lib"
    shutil.copytree(REPO / "ampc", lib / "ampc", ignore=shutil.ignore_patterns(
        "_C.*", "_build_config.py", "__pycache__"))
    env = dict(os.environ, AMPC_CUDA="0")
    build = subprocess.run(
        [sys.executable, "setup.py", "build_ext",
         "--build-lib", str(lib), "--build-temp", str(tmp_path / "temp")],
        cwd=REPO, env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "ampc: building CPU-only (AMPC_CUDA=0)" in build.stderr

    probe = ("import ampc, ampc.cuda, ampc._build_config as c; "
             "print(ampc.__file__, ampc._C.cuda_is_built(), c.CUDA, "
             "ampc.cuda.is_available(), "
             "any(ampc._C.cuda_slots().values()))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path,
                         env=dict(env, PYTHONPATH=str(lib)),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    path, built, config, available, any_slot = run.stdout.split()
    assert path.startswith(str(lib))    # the copy, not the installed ampc
    assert (built, config, available) == ("False", "False", "False")
    assert any_slot == "False"          # the CUDA table stays empty
    _simd_objects_do_not_call_fmaf(tmp_path / "temp")


def _simd_objects_do_not_call_fmaf(temp):
    """The AVX2 and AVX-512 objects inline the shared math (AMPC_HOST_DEVICE
    is always_inline): a helper left out of line would be compiled for the
    baseline ISA, its loop scalar and each AMPC_FMA a call to libm's fmaf
    (gelu_backward ran 40 times slower so)."""
    nm = shutil.which("nm")
    if nm is None:
        return
    objects = [o for level in ("avx2", "avx512")
               for o in temp.rglob(f"cpu/{level}/*.o")]
    assert objects, f"no SIMD-level objects under {temp}"
    calls = {}
    for obj in objects:
        out = subprocess.run([nm, "-u", str(obj)], capture_output=True,
                             text=True, check=True).stdout.split()
        if "fmaf" in out:
            calls[obj.name] = obj.parent.name
    assert not calls, f"SIMD objects calling libm's fmaf: {calls}"


def test_architecture_older_than_volta_is_refused(tmp_path):
    """AMPC_CUDA_ARCH below sm_70 stops the build at once with a clear
    message (the AMP kernels' >4 KiB kernel parameters need Volta)."""
    if not (REPO / "setup.py").exists():
        pytest.skip("not run from a source checkout")
    if not build_config.CUDA:
        pytest.skip("this machine builds CPU-only")
    env = dict(os.environ, AMPC_CUDA_ARCH="61")
    build = subprocess.run(
        [sys.executable, "setup.py", "build_ext",
         "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "temp")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert build.returncode != 0
    assert "'61' is older than sm_70 (Volta)" in build.stderr
