#!/usr/bin/env bash
# compile_cuda_libs.sh - compile every cuda/*.cu with cuBLAS, cuBLASLt and
# cuDNN switched on, warnings as errors, on a machine whose toolkit has nvcc
# but not those libraries (the build machines): their code sits behind
# AMPC_HAVE_CUBLAS / AMPC_HAVE_CUBLASLT / AMPC_HAVE_CUDNN, which the normal
# build there leaves out.  The headers come from NVIDIA's PyPI wheels,
# downloaded once (about 1.3 GB) into ${NV_CACHE:-/tmp/ampc-nv} and unpacked
# there; nothing is installed.  Nothing is linked or run: this checks that
# the code the GPU machine will build compiles.
#
#   bash tools/compile_cuda_libs.sh          # from the repository root
#
# A full build against the same wheels (it links them too):
#   PYTHONPATH=$NV_CACHE/ex python setup.py build_ext -b /tmp/b -t /tmp/t
set -euo pipefail

cd "$(dirname "$0")/.."
NV="${NV_CACHE:-/tmp/ampc-nv}"
ARCH="${AMPC_CUDA_ARCH:-90}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"

if [ ! -d "$NV/ex/nvidia/cudnn/include" ]; then
    mkdir -p "$NV/whl" "$NV/ex"
    python -m pip download --no-deps -q -d "$NV/whl" \
        "nvidia-cublas==13.*" nvidia-cudnn-cu13
    for w in "$NV"/whl/*.whl; do
        python -m zipfile -e "$w" "$NV/ex"
    done
fi

inc=()
for d in "$NV"/ex/nvidia/*/include; do
    inc+=(-isystem "$d")
done
failed=0
for f in cuda/*.cu; do
    if "$NVCC" -c -O3 -std=c++17 -Icsrc -Icuda -arch="sm_$ARCH" \
        -DAMPC_WITH_CUDA=1 -DAMPC_HAVE_CUBLAS=1 -DAMPC_HAVE_CUBLASLT=1 \
        -DAMPC_HAVE_CUDNN=1 -Werror all-warnings "${inc[@]}" \
        -o /dev/null "$f"; then
        echo "ok   $f"
    else
        echo "FAIL $f"
        failed=1
    fi
done
exit $failed
