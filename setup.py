"""Build ampc._C: every csrc/**/*.c (C11, OpenMP) and, when nvcc is found,
every cuda/*.cu, linked into one extension.  All build logic lives here.

Environment:
  AMPC_CUDA       unset: CUDA when nvcc is found; "0": CPU-only; "1": CUDA,
                  and fail if nvcc is missing
  AMPC_CUDA_ARCH  GPU targets, compute capabilities separated by ";" with
                  "+PTX" to embed PTX too; default "80;90+PTX", i.e. sm_80 and
                  sm_90 machine code plus compute_90 PTX for newer GPUs
  CUDA_HOME       the CUDA toolkit to use

The build prints one status line to stderr (`pip install -v` shows it), e.g.
  ampc: building with CUDA 13.0 (nvcc /usr/local/cuda/bin/nvcc;
        arch sm_80,sm_90,compute_90; cuBLAS yes, cuBLASLt yes, cuDNN 9 yes)
  ampc: building CPU-only (nvcc not found)
and writes the same facts to ampc/_build_config.py.
"""
import glob
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import PlatformError

C_SOURCES = sorted(glob.glob("csrc/**/*.c", recursive=True))
CUDA_SOURCES = sorted(glob.glob("cuda/*.cu"))
# Listed as ext.depends: a change relinks _C, and sdists include them.
HEADERS = sorted(
    glob.glob("csrc/**/*.h", recursive=True) + glob.glob("csrc/**/*.def", recursive=True)
    + glob.glob("cuda/*.cuh") + glob.glob("cuda/*.h"))

DEFAULT_CUDA_ARCH = "80;90+PTX"
MIN_CUDA = (12, 1)
NVCC_FLAGS = ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Icsrc", "-Icuda"]


# ----------------------------------------------------------------------------
# finding CUDA

def site_dirs():
    """This interpreter's package directories.  Under pip's build isolation
    sys.path holds only the temporary build environment, but site and
    sysconfig still name the real (or venv's) site-packages, where NVIDIA's
    wheels (torch's cuBLAS and cuDNN, or nvidia-cuda-nvcc) are installed."""
    paths = sysconfig.get_paths()
    candidates = [*sys.path, *site.getsitepackages(), site.getusersitepackages(),
                  paths["purelib"], paths["platlib"]]
    return unique_dirs(candidates)


def unique_dirs(dirs):
    """The existing directories of dirs, in order, each once (by real path:
    /usr/local/cuda/lib64 is often a link to lib)."""
    seen, out = set(), []
    for d in dirs:
        real = os.path.realpath(d) if d else None
        if real and os.path.isdir(real) and real not in seen:
            seen.add(real)
            out.append(d)
    return out


def find_nvcc():
    """The first nvcc that runs.  CUDA_HOME comes before PATH because setting
    it is an explicit choice.  NVIDIA's wheels put nvcc in nvidia/cu13/bin
    (CUDA 13) or nvidia/cuda_nvcc/bin (CUDA 12)."""
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"))
    candidates += [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    for d in site_dirs():
        candidates += sorted(glob.glob(os.path.join(d, "nvidia", "cu[0-9]*", "bin", "nvcc")),
                             reverse=True)
        candidates.append(os.path.join(d, "nvidia", "cuda_nvcc", "bin", "nvcc"))
    for nvcc in candidates:
        if nvcc and os.access(nvcc, os.X_OK) and cuda_version(nvcc):
            return nvcc
    return None


def cuda_version(nvcc):
    """(major, minor) from `nvcc --version`, or None if nvcc does not run."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def toolkit_root(nvcc):
    """The toolkit directory that nvcc belongs to.  nvcc may be a wrapper
    script elsewhere (/usr/local/bin/nvcc), so ask nvcc: its dry run prints
    `#$ TOP=<root>`."""
    run = subprocess.run([nvcc, "-dryrun", "-E", "-x", "cu", os.devnull],
                         capture_output=True, text=True)
    m = re.search(r"^#\$ TOP=(.*)$", run.stdout + run.stderr, re.M)
    if m:
        return os.path.normpath(m.group(1).strip())
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))


def toolkit_dirs(root):
    """The library directories of the toolkit at root."""
    return unique_dirs([os.path.join(root, "lib64"), os.path.join(root, "lib"),
                        *sorted(glob.glob(os.path.join(root, "targets", "*", "lib")))])


def library_dirs(root, cuda_major):
    """Where cuBLAS and cuDNN may be.  NVIDIA's wheels come before the
    toolkit: torch loads its cuBLAS and cuDNN from them, and a process holds
    one library per soname, so linking those same files keeps ampc and torch
    on one version whichever is imported first.  CUDA 13 wheels put every
    toolkit library in nvidia/cu13/lib, CUDA 12 wheels in nvidia/<name>/lib,
    and cuDNN's (either CUDA) in nvidia/cudnn/lib."""
    dirs = []
    for d in site_dirs():
        dirs.append(os.path.join(d, "nvidia", f"cu{cuda_major}", "lib"))
        dirs += sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib")))
    return unique_dirs(dirs + toolkit_dirs(root))


def find_library(dirs, filename, header):
    """(path, include dir) of the first filename in dirs whose sibling
    include/ has header, or None.  NOTE: wheels ship only the versioned name
    (libcublas.so.13, no libcublas.so), so callers ask for that one; it also
    keeps a CUDA 12 cuBLAS away from a CUDA 13 build."""
    for d in dirs:
        include = os.path.join(os.path.dirname(d), "include")
        path = os.path.join(d, filename)
        if os.path.isfile(path) and os.path.isfile(os.path.join(include, header)):
            return path, include
    return None


def find_cudnn(dirs, cuda_major):
    """(path, include dir, cuDNN major) or None.  cuDNN's soname carries its
    own major (libcudnn.so.9), not CUDA's, and both nvidia-cudnn-cu12 and
    -cu13 install to nvidia/cudnn, so the wheel's name says which CUDA it
    is for."""
    for d in dirs:
        include = os.path.join(os.path.dirname(d), "include")
        try:
            with open(os.path.join(include, "cudnn_version.h")) as f:
                m = re.search(r"#define CUDNN_MAJOR (\d+)", f.read())
        except OSError:
            continue
        path = os.path.join(d, f"libcudnn.so.{m.group(1)}") if m else ""
        site_packages = os.path.dirname(os.path.dirname(os.path.dirname(d)))
        wheels = glob.glob(os.path.join(site_packages, "nvidia_cudnn_cu*.dist-info"))
        for_this_cuda = not wheels or any(
            os.path.basename(w).startswith(f"nvidia_cudnn_cu{cuda_major}-") for w in wheels)
        if os.path.isfile(path) and for_this_cuda:
            return path, include, m.group(1)
    return None


def gencode_flags(spec):
    """AMPC_CUDA_ARCH ("80;90+PTX", "8.0 9.0a", "sm_90") -> nvcc -gencode flags
    and the target names for the status line."""
    flags, names = [], []
    for item in re.split(r"[;,\s]+", spec.strip()):
        if not item:
            continue
        ptx = item.upper().endswith("+PTX")
        cc = (item[:-4] if ptx else item).lower().removeprefix("sm_").replace(".", "")
        if not re.fullmatch(r"\d{2,3}[af]?", cc):
            raise PlatformError(f"AMPC_CUDA_ARCH: cannot read {item!r} "
                                f"(expected e.g. 80, 9.0, 90a or 90+PTX)")
        if int(re.match(r"\d+", cc).group()) < 70:
            # cuda/amp.cu passes its tensor lists as a __grid_constant__
            # kernel parameter of over 4 KiB, which needs Volta or newer
            raise PlatformError(f"AMPC_CUDA_ARCH: {item!r} is older than "
                                f"sm_70 (Volta), which ampc's CUDA kernels need")
        flags += ["-gencode", f"arch=compute_{cc},code=sm_{cc}"]
        names.append(f"sm_{cc}")
        if ptx:
            flags += ["-gencode", f"arch=compute_{cc},code=compute_{cc}"]
            names.append(f"compute_{cc}")
    if not names:
        raise PlatformError("AMPC_CUDA_ARCH is empty")
    return flags, names


@dataclass
class CudaBuild:
    """What configure_cuda() decided; `config` is ampc/_build_config.py."""
    status: str
    config: dict
    nvcc: str = ""
    nvcc_flags: list = field(default_factory=list)
    defines: list = field(default_factory=list)       # for C and nvcc alike
    link_inputs: list = field(default_factory=list)   # full paths: .a, .so
    libraries: list = field(default_factory=list)
    rpath: list = field(default_factory=list)


def configure_cuda():
    """Decides CPU-only or CUDA from AMPC_CUDA and what is installed, and
    finds what a CUDA build compiles and links with."""
    mode = os.environ.get("AMPC_CUDA", "")
    if mode not in ("", "0", "1"):
        raise PlatformError(f"AMPC_CUDA must be 0, 1 or unset, not {mode!r}")
    config = {"CUDA": False, "CUDA_REQUESTED": mode or "auto", "CUDA_VERSION": None,
              "NVCC": None, "CUDA_ARCH": (), "CUBLAS": False, "CUBLASLT": False,
              "CUDNN": None, "CUDA_LIBRARIES": {}}
    if mode == "0":
        return CudaBuild("ampc: building CPU-only (AMPC_CUDA=0)", config)
    nvcc = find_nvcc()
    if nvcc is None:
        if mode == "1":
            raise PlatformError(
                "AMPC_CUDA=1 but nvcc was not found (looked in $CUDA_HOME/bin, on PATH, "
                "in /usr/local/cuda/bin and in site-packages/nvidia/*/bin): install the "
                "CUDA toolkit or set CUDA_HOME, or unset AMPC_CUDA to build CPU-only")
        return CudaBuild("ampc: building CPU-only (nvcc not found)", config)

    major, minor = cuda_version(nvcc)
    if (major, minor) < MIN_CUDA:
        # kernel parameters of over 4 KiB (cuda/amp.cu) came with CUDA 12.1
        why = (f"{nvcc} is CUDA {major}.{minor}; ampc needs CUDA "
               f"{MIN_CUDA[0]}.{MIN_CUDA[1]} or newer")
        if mode == "1":
            raise PlatformError(f"AMPC_CUDA=1 but {why}")
        return CudaBuild(f"ampc: building CPU-only ({why})", config)
    root = toolkit_root(nvcc)
    build = CudaBuild("", config, nvcc=nvcc, defines=[("AMPC_WITH_CUDA", "1")])
    gencode, arch = gencode_flags(os.environ.get("AMPC_CUDA_ARCH") or DEFAULT_CUDA_ARCH)
    build.nvcc_flags += gencode

    # The static runtime, from nvcc's own toolkit, so importing _C needs no
    # libcudart.so; it needs dl, rt and pthread.  The shared one otherwise.
    static = [os.path.join(d, "libcudart_static.a") for d in toolkit_dirs(root)]
    shared = [os.path.join(d, f"libcudart.so.{major}") for d in toolkit_dirs(root)]
    cudart = next((p for p in static + shared if os.path.isfile(p)), None)
    if cudart is None:
        raise PlatformError(f"found {nvcc} but no libcudart_static.a or "
                            f"libcudart.so.{major} under {root}")
    found = {"cudart": cudart}
    build.libraries += ["dl", "rt", "pthread"] if cudart.endswith(".a") else []

    dirs = library_dirs(root, major)
    includes = []
    wanted = {"CUBLAS": ("cublas", f"libcublas.so.{major}", "cublas_v2.h"),
              "CUBLASLT": ("cublasLt", f"libcublasLt.so.{major}", "cublasLt.h")}
    for key, (name, filename, header) in wanted.items():
        hit = find_library(dirs, filename, header)
        if hit:
            found[name] = hit[0]
            includes.append(hit[1])
            config[key] = True
            build.defines.append((f"AMPC_HAVE_{key}", "1"))
    cudnn = find_cudnn(dirs, major)
    if cudnn:
        found["cudnn"] = cudnn[0]
        includes.append(cudnn[1])
        config["CUDNN"] = cudnn[2]
        build.defines.append(("AMPC_HAVE_CUDNN", "1"))

    # -isystem, not -I: nvcc's own -I stays first, so a wheel's include dir
    # (nvidia/cu13/include may hold a newer cuda_runtime.h than the cudart we
    # link) cannot shadow the toolkit's headers.
    for include in unique_dirs(includes):
        build.nvcc_flags += ["-isystem", include]
    build.nvcc_flags += [f"-D{k}={v}" for k, v in build.defines]
    # Libraries are linked by full path (wheels have no unversioned .so to
    # find with -l), each with an rpath to its directory.
    build.link_inputs = list(found.values())
    build.rpath = unique_dirs(os.path.dirname(p) for p in found.values() if ".so" in p)
    build.libraries.append("stdc++")    # else: undefined __gxx_personality_v0
    config.update(CUDA=True, CUDA_VERSION=f"{major}.{minor}", NVCC=nvcc,
                  CUDA_ARCH=tuple(arch), CUDA_LIBRARIES=found)
    yes_no = {True: "yes", False: "no"}
    dnn = f"{config['CUDNN']} yes" if config["CUDNN"] else "no"
    build.status = (f"ampc: building with CUDA {major}.{minor} (nvcc {nvcc}; "
                    f"arch {','.join(arch)}; cuBLAS {yes_no[config['CUBLAS']]}, "
                    f"cuBLASLt {yes_no[config['CUBLASLT']]}, cuDNN {dnn})")
    return build


# ----------------------------------------------------------------------------
# the build

class BuildExt(build_ext):
    """build_ext that first nvcc-compiles cuda/*.cu when CUDA is on, and
    writes ampc/_build_config.py beside the built _C."""

    def run(self):
        cuda = configure_cuda()
        print(cuda.status, file=sys.stderr, flush=True)
        (ext,) = self.extensions
        if cuda.nvcc:
            ext.extra_objects += self.compile_cuda(cuda) + cuda.link_inputs
            ext.define_macros += cuda.defines
            ext.libraries += cuda.libraries
            ext.runtime_library_dirs += cuda.rpath
        # What gets built depends on the environment (AMPC_CUDA, nvcc, the
        # libraries found), which file times cannot see: always relink.
        self.force = True
        super().run()
        self.write_build_config(cuda)

    def build_extensions(self):
        """The C sources of _C compiled side by side: distutils compiles
        one extension's sources one after another (its `parallel` option
        only builds several extensions at once), which took about 100 s of
        tools/gpu_check.sh's 540 s budget.  AMPC_BUILD_JOBS caps the jobs
        (default: every CPU)."""
        jobs = int(os.environ.get("AMPC_BUILD_JOBS") or os.cpu_count() or 1)
        if jobs > 1:
            self.compiler.compile = _parallel_compile(self.compiler, jobs)
        super().build_extensions()

    def compile_cuda(self, cuda):
        """nvcc -c each cuda/*.cu into build_temp, all at once; the objects."""
        out_dir = os.path.join(self.build_temp, "cuda")
        os.makedirs(out_dir, exist_ok=True)
        objects, commands = [], []
        for src in CUDA_SOURCES:
            obj = os.path.join(out_dir, os.path.basename(src)[:-len(".cu")] + ".o")
            objects.append(obj)
            commands.append([cuda.nvcc, "-c", src, "-o", obj, *NVCC_FLAGS, *cuda.nvcc_flags])
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(self.spawn, commands))    # list() re-raises failures
        return objects

    def write_build_config(self, cuda):
        """ampc/_build_config.py in the tree for in-place and editable builds,
        else in build_lib, so it ships with the _C it describes."""
        package_dir = "ampc" if self.inplace else os.path.join(self.build_lib, "ampc")
        os.makedirs(package_dir, exist_ok=True)
        lines = ['"""What setup.py built into ampc._C (generated; do not edit)."""', ""]
        lines += [f"{key} = {value!r}" for key, value in cuda.config.items()]
        lines.append(f"STATUS = {cuda.status!r}")
        with open(os.path.join(package_dir, "_build_config.py"), "w") as f:
            f.write("\n".join(lines) + "\n")


def _parallel_compile(compiler, jobs):
    """compiler.compile (distutils' CCompiler.compile, the same steps) with
    the sources compiled by `jobs` threads; each gcc is its own process, so
    threads are enough."""
    def compile(sources, output_dir=None, macros=None, include_dirs=None,
                debug=0, extra_preargs=None, extra_postargs=None,
                depends=None):
        macros, objects, extra_postargs, pp_opts, build = \
            compiler._setup_compile(output_dir, macros, include_dirs,
                                    sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj):
            if obj in build:
                src, ext = build[obj]
                compiler._compile(obj, src, ext, cc_args, extra_postargs,
                                  pp_opts)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, objects))    # list() re-raises failures
        return objects
    return compile


ext = Extension(
    "ampc._C",
    sources=C_SOURCES,
    depends=HEADERS + CUDA_SOURCES,
    include_dirs=["csrc", numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    # -fno-math-errno: ampc never reads errno, and without it gcc will not
    # vectorise sqrtf loops.  -ffp-contract=off: every a * b + c rounds
    # twice, as the CUDA kernels' explicit __fmul_rn / __fadd_rn do (gcc's
    # default in -std=c11, but not clang's), so CPU and GPU bits agree.
    extra_compile_args=["-std=c11", "-O3", "-fopenmp", "-fno-strict-aliasing",
                        "-fno-math-errno", "-ffp-contract=off"],
    extra_link_args=["-fopenmp"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
