"""The CUDA build, checked where there is no GPU: every slot of the CUDA
table (csrc/cuda_ops.def) has its typedef, its definition in a cuda/*.cu
file and, in a CUDA build, a filled table entry; every cuda/*.cu file
compiles without a warning; the kernels that must match the CPU bit for
bit leave nvcc nothing to fuse into an FMA; a CUDA build on a GPU-less machine imports,
reports no device and refuses device="cuda" with a clear RuntimeError.
(The CPU-only build in a temporary copy is tests/test_build.py's.)
The warning check compiles every .cu file again, which takes minutes, so
it runs only with AMPC_TEST_NVCC=1.
"""
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import ampc
import ampc.cuda
from ampc import _C
from ampc import _build_config as build_config

REPO = Path(__file__).resolve().parents[1]
source_only = pytest.mark.skipif(not (REPO / "csrc" / "cuda_ops.def")
                                 .exists(), reason="needs a source checkout")


def _def_slots():
    """(name, fn_type) of every AMPC_CUDA_OP line of cuda_ops.def."""
    text = (REPO / "csrc" / "cuda_ops.def").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.findall(r"^AMPC_CUDA_OP\((\w+),\s*(\w+)\)", text, flags=re.M)


def _cu_sources():
    return sorted((REPO / "cuda").glob("*.cu"))


def _no_gpu():
    return not ampc.cuda.is_available()


# ----------------------------------------------------------------------------
# the table, from the sources


@source_only
def test_def_lists_each_slot_once():
    names = [n for n, _ in _def_slots()]
    assert names, "no AMPC_CUDA_OP line found in csrc/cuda_ops.def"
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"slots listed twice in cuda_ops.def: {dup}"


@source_only
def test_every_slot_type_is_declared():
    header = (REPO / "csrc" / "kernels_cuda.h").read_text()
    missing = [t for _, t in _def_slots()
               if not re.search(r"typedef\b[^;]*\(\s*\*\s*" + t + r"\s*\)",
                                header)]
    assert not missing, \
        f"fn-pointer typedefs missing from kernels_cuda.h: {missing}"


@source_only
def test_every_slot_is_defined_in_a_cu_file():
    text = "\n".join(p.read_text() for p in _cu_sources())
    missing = [n for n, _ in _def_slots()
               if not re.search(r'extern\s+"C"\s+[\w\s\*]*?\bampc_' + n
                                + r"_cuda\s*\(", text)]
    assert not missing, (
        "slots with no `extern \"C\" int ampc_<name>_cuda(...)` definition "
        f"in cuda/*.cu: {missing}")


@source_only
def test_c_files_stay_free_of_cuda():
    """C files reach CUDA only through the table: no CUDA header, and no
    AMPC_WITH_CUDA test outside dispatch.c and module.c."""
    bad = []
    for path in sorted((REPO / "csrc").rglob("*.[ch]")):
        text = path.read_text()
        rel = path.relative_to(REPO)
        if re.search(r"#\s*include\s*[<\"](cuda|cublas|cudnn)\w*\.h", text):
            bad.append(f"{rel}: includes a CUDA header")
        if path.name not in ("dispatch.c", "module.c") and \
                re.search(r"#\s*if.*AMPC_WITH_CUDA", text):
            bad.append(f"{rel}: tests AMPC_WITH_CUDA")
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------
# the table, in the extension


def test_cuda_slots_lists_every_slot():
    slots = _C.cuda_slots()
    assert isinstance(slots, dict) and slots
    if (REPO / "csrc" / "cuda_ops.def").exists():
        assert list(slots) == [n for n, _ in _def_slots()], \
            "the extension was built from another cuda_ops.def: rebuild"


def test_cuda_table_filled_exactly_in_a_cuda_build():
    slots = _C.cuda_slots()
    if build_config.CUDA:
        empty = [n for n, filled in slots.items() if not filled]
        assert not empty, f"CUDA build with empty slots: {empty}"
    else:
        filled = [n for n, f in slots.items() if f]
        assert not filled, f"CPU-only build with filled slots: {filled}"


def test_build_config_is_consistent():
    assert _C.cuda_is_built() is build_config.CUDA
    assert isinstance(build_config.STATUS, str) and \
        build_config.STATUS.startswith("ampc: building")
    if build_config.CUDA:
        assert build_config.NVCC and build_config.CUDA_VERSION
        assert build_config.CUDA_ARCH, "CUDA build without an arch list"
        assert "CUDA" in build_config.STATUS
    else:
        assert "CPU-only" in build_config.STATUS


# ----------------------------------------------------------------------------
# a CUDA build on a machine without a GPU


no_gpu = pytest.mark.skipif(not _no_gpu(), reason="this machine has a GPU")


@no_gpu
def test_reports_no_device():
    assert ampc.cuda.device_count() == 0
    assert ampc.cuda.is_available() is False
    assert ampc.cuda.is_built() is build_config.CUDA
    assert ampc.cuda.is_current_stream_capturing() is False


@no_gpu
@pytest.mark.parametrize("make", [
    lambda: ampc.zeros(2, device="cuda"),
    lambda: ampc.ones(2, 3, device="cuda:0"),
    lambda: ampc.tensor([1.0, 2.0], device="cuda"),
    lambda: ampc.ones(2).to("cuda"),
    lambda: ampc.ones(2).cuda(),
], ids=["zeros", "ones", "tensor", "to", "cuda"])
def test_device_cuda_refused_clearly(make):
    want = "no CUDA GPU was found" if build_config.CUDA \
        else "built without CUDA"
    with pytest.raises(RuntimeError, match=want):
        make()


@no_gpu
@pytest.mark.parametrize("fn", ["synchronize", "memory_allocated",
                                "max_memory_allocated",
                                "reset_peak_memory_stats", "current_device",
                                "get_device_name"])
def test_cuda_functions_refused_clearly(fn):
    with pytest.raises(RuntimeError, match=rf"ampc\.cuda\.{fn}\(\): "):
        getattr(ampc.cuda, fn)()


@no_gpu
def test_cuda_graph_refused_clearly():
    with pytest.raises(RuntimeError, match=r"ampc\.cuda\.CUDAGraph\(\)"):
        ampc.cuda.CUDAGraph()


@no_gpu
def test_fresh_interpreter_imports_quietly():
    """Importing a CUDA build with no GPU (or no driver) neither fails nor
    prints: the failed device query is cleared."""
    run = subprocess.run(
        [sys.executable, "-c",
         "import ampc, ampc.cuda; print(ampc.cuda.device_count(), "
         "ampc.cuda.is_available(), ampc.ones(3).sum().item())"],
        capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "False", "3.0"]
    assert run.stderr == ""


# ----------------------------------------------------------------------------
# every .cu file compiles warning-free


def _nvcc():
    return build_config.NVCC if build_config.NVCC and \
        os.path.exists(build_config.NVCC) else shutil.which("nvcc")


def _include_dirs():
    """Where setup.py found the CUDA, cuBLAS and cuDNN headers (the pip
    wheels under site-packages/nvidia, else the toolkit's own)."""
    dirs = []
    try:
        import nvidia
        root = Path(list(nvidia.__path__)[0])
        dirs += [str(p) for p in sorted(root.glob("*/include"))]
    except ImportError:
        pass
    return dirs


@pytest.mark.slow
@source_only
@pytest.mark.skipif(not build_config.CUDA,
                    reason="CPU-only build: nvcc was not used")
@pytest.mark.skipif(os.environ.get("AMPC_TEST_NVCC") != "1",
                    reason="compiles every .cu file again (minutes): set "
                    "AMPC_TEST_NVCC=1")
def test_every_cu_file_compiles_without_warnings(tmp_path):
    """nvcc -Werror all-warnings on each cuda/*.cu, with the build's
    defines: the build itself shows warnings only under pip -v."""
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc is no longer found")
    flags = ["-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Icsrc",
             "-Icuda", "-arch=sm_90", "-DAMPC_WITH_CUDA=1",
             "-Werror", "all-warnings"]
    if build_config.CUBLAS:
        flags.append("-DAMPC_HAVE_CUBLAS=1")
    if build_config.CUBLASLT:
        flags.append("-DAMPC_HAVE_CUBLASLT=1")
    if build_config.CUDNN:
        flags.append("-DAMPC_HAVE_CUDNN=1")
    for d in _include_dirs():
        flags += ["-isystem", d]

    def compile_one(src):
        out = tmp_path / (src.stem + ".o")
        run = subprocess.run([nvcc, *flags, str(src), "-o", str(out)],
                             cwd=REPO, capture_output=True, text=True)
        return src.name, run.returncode, run.stdout + run.stderr

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as ex:
        results = list(ex.map(compile_one, _cu_sources()))
    failed = [f"{name} (exit {rc}):\n{log}" for name, rc, log in results
              if rc != 0 or "warning" in log.lower()]
    assert not failed, "\n".join(failed)


# Kernels whose results the CUDA tests compare with the CPU's bit for bit,
# and norm.cu and group_norm.cu, whose per-element passes (norm_math.h)
# round as the CPU's do (their sums differ from the CPU's by summation order
# only).
BIT_EXACT_SOURCES = ("optim", "random", "dropout", "amp", "copy", "relu",
                     "pool", "avg_pool", "norm", "lerp", "interp",
                     "group_norm")


def _functions(ptx):
    """(name, body) of each entry or function in PTX text."""
    for body in re.split(r"\n(?=(?:\.visible |\.weak )?\.(?:entry|func))",
                         ptx):
        name = re.search(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)",
                         body)
        yield (name.group(1) if name else "?"), body


def _libdevice_math(ptx):
    """(function, count) of the places in PTX text that call libdevice or
    use the approximate float32 special-function unit (expf, logf, fast
    division): their bits are not the CPU's."""
    found = []
    for name, body in _functions(ptx):
        n = len(re.findall(r"\b(?:ex2|lg2|tanh|rcp|rsqrt|sin|cos|sqrt|div)"
                           r"\.approx(?:\.ftz)?\.f32\b|\bcall[^;]*__nv_",
                           body))
        if n:
            found.append((name, n))
    return found


def _contractions(ptx, ty):
    """(function, count) of the places in PTX text where nvcc fused a
    multiply and an add of type ty (an fma outside inline asm: AMPC_FMA's
    written ones are inline PTX), or left a plain mul whose result a plain
    add or sub reads (ptxas may fuse that pair): gcc rounds both, so a CPU
    result would differ."""
    reg = r"%fd\d+" if ty == "f64" else r"%f\d+"
    found = []
    for name, body in _functions(ptx):
        body = re.sub(r"// begin inline asm.*?// end inline asm", "", body,
                      flags=re.S)
        muls = set(re.findall(rf"\bmul\.{ty}\s+({reg}),", body))
        n = len(re.findall(rf"\bfma\.\w+\.{ty}\b", body))
        for m in re.finditer(rf"\b(?:add|sub)\.{ty}\s+{reg},\s*([^,]+),"
                             rf"\s*([^;]+);", body):
            n += (m.group(1).strip() in muls) + (m.group(2).strip() in muls)
        if n:
            found.append((name, n))
    return found


@source_only
@pytest.mark.skipif(not build_config.CUDA,
                    reason="CPU-only build: nvcc was not used")
def test_bit_exact_kernels_leave_nothing_to_fuse(tmp_path):
    """nvcc contracts a * b + c into one FMA unless told not to; the shared
    headers use __fmul_rn / __fadd_rn (AMPC_MUL / AMPC_ADD) where a product
    feeds a sum, and AMPC_FMA (fmaf on the CPU levels, the same bits;
    inline PTX on the GPU) where they want a fused one.  Checked in the PTX
    of the kernels that the GPU tests compare with the CPU bit for bit
    (float32; random's float64 too; the fixed-op and unary element-wise
    kernels): no fma but the inline ones, no fusable pair, no libdevice
    float32 math, so a plain a * b + c or an expf added to those headers
    fails here, not on a GPU."""
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc is no longer found")
    flags = ["-ptx", "-O3", "-std=c++17", "-Icsrc", "-Icuda",
             "-arch=compute_90", "-DAMPC_WITH_CUDA=1"]
    for d in _include_dirs():
        flags += ["-isystem", d]

    def ptx_of(stem):
        out = tmp_path / (stem + ".ptx")
        run = subprocess.run([nvcc, *flags, f"cuda/{stem}.cu", "-o",
                              str(out)], cwd=REPO, capture_output=True,
                             text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        return stem, out.read_text()

    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as ex:
        ptx = dict(ex.map(ptx_of, BIT_EXACT_SOURCES + ("elementwise",)))

    def contractions(stem, ty):
        return _contractions(ptx[stem], ty) + _libdevice_math(ptx[stem])

    bad = {f"{stem}.cu float32": contractions(stem, "f32")
           for stem in BIT_EXACT_SOURCES}
    bad["random.cu float64"] = _contractions(ptx["random"], "f64")
    ew = ptx["elementwise"]
    # elementwise.cu: the kernels of a fixed op + - * / max min, fmod,
    # remainder, the activations' backward and atan2 (binary ops 7-14), of
    # the activations (unary ops 9-14: gelu, gelu_tanh, silu and their
    # derivatives) and the runtime-op unary ones (Lin1: exp, log, sigmoid,
    # tanh, asin... all shared math); only the binary runtime-op and pow
    # kernels hold libdevice (powf), compared with a tolerance
    exact_op = re.compile(r"(?:7BinaryFI(?:f|6__half|13__nv_bfloat16)"
                          r"Li(?:[0-57-9]|1[0-4])EE|"
                          r"6UnaryFI(?:f|6__half|13__nv_bfloat16)"
                          r"Li(?:n1|9|1[0-4])EE)")
    names = [n for n in re.findall(r"\.entry\s+(\w+)", ew)
             if exact_op.search(n)]
    assert names, "no fixed-op element-wise kernel found in the PTX"
    bad["elementwise.cu fixed ops"] = [
        (n, c) for n, c in contractions("elementwise", "f32")
        if exact_op.search(n)]
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"fused or fusable multiply-adds: {bad}"


def test_contraction_finder_finds_both_forms():
    fused = ".visible .entry k(\n)\n{\n\tfma.rn.f32 \t%f3, %f1, %f2, %f0;\n}"
    plain = (".visible .entry k(\n)\n{\n\tmul.f32 \t%f3, %f1, %f2;\n"
             "\tadd.f32 \t%f4, %f0, %f3;\n}")
    rounded = (".visible .entry k(\n)\n{\n\tmul.rn.f32 \t%f3, %f1, %f2;\n"
               "\tadd.rn.f32 \t%f4, %f0, %f3;\n}")
    assert _contractions(fused, "f32") == [("k", 1)]
    assert _contractions(plain, "f32") == [("k", 1)]
    assert _contractions(rounded, "f32") == []
    assert _contractions(plain.replace("f32", "f64").replace("%f", "%fd"),
                         "f64") == [("k", 1)]
    written = fused.replace("\tfma", "\t// begin inline asm\n\tfma").replace(
        "%f0;\n", "%f0;\n\t// end inline asm\n")
    assert _contractions(written, "f32") == []
    libm = (".visible .entry k(\n)\n{\n\tex2.approx.ftz.f32 \t%f1, %f0;\n"
            "\tcall.uni (retval0), __nv_expf, (param0);\n}")
    assert _libdevice_math(libm) == [("k", 2)]
    assert _libdevice_math(fused) == []
