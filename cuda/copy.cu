/* copy.cu - moving bytes and values: host<->device and device<->device
 * byte copies (memcpy, staging pageable uploads through pinned blocks of
 * pinned.cu), the strided, broadcasting, casting element copy (copy) that
 * every cast, contiguous() and copy_() on CUDA goes through, and fill
 * (full, zeros, fill_ with a number).
 */
#include <string.h>

#include "amp_math.h"
#include "common.cuh"
#include "elementwise_math.h"

// ----------------------------------------------------------------------------
// byte copies

/* Pageable H2D copies up to this size are staged through a pinned block, so
 * the call returns as soon as the bytes are in the staging block, without
 * waiting for the GPU; larger ones wait for the stream instead of doubling
 * their host memory. */
#define STAGE_MAX ((size_t)64 << 20)

extern "C" int
ampc_memcpy_cuda(void *dst, const void *src, size_t nbytes,
                 ampc_copy_kind kind)
{
    if (nbytes == 0) {
        return 0;
    }
    cudaStream_t s = ampc_cuda_stream();
    switch (kind) {
    case AMPC_COPY_H2D: {
        if (ampc_cuda_host_is_pinned(src, nbytes)) {
            /* queued: the pinned storage is freed through host_free, which
             * keeps it until this copy has run */
            AMPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes,
                                            cudaMemcpyHostToDevice, s));
            return 0;
        }
        /* A pageable source cannot be captured into a CUDA graph: the
         * staging block goes back to the cache (its event, recorded in a
         * capturing stream, never completes on the host) and would be
         * reused under the graph's replays, and a large copy waits for the
         * stream.  Refused before anything is queued, so the capture is
         * not invalidated. */
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        AMPC_CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
        if (cs != cudaStreamCaptureStatusNone) {
            ampc_cuda_record_error(
                __FILE__, __LINE__,
                "memcpy(H2D from pageable host memory during CUDA graph "
                "capture: copy it to the GPU before the capture, or from "
                "pin_memory())",
                (int)cudaErrorStreamCaptureUnsupported);
            return (int)cudaErrorStreamCaptureUnsupported;
        }
        if (nbytes <= STAGE_MAX) {
            void *stage = nullptr;
            int rc = ampc_host_alloc_cuda(nbytes, &stage);
            if (rc != 0) {
                return rc;
            }
            memcpy(stage, src, nbytes);
            cudaError_t err = cudaMemcpyAsync(dst, stage, nbytes,
                                              cudaMemcpyHostToDevice, s);
            if (err != cudaSuccess) {
                (void)cudaGetLastError();
                ampc_cuda_record_error(__FILE__, __LINE__,
                                       "cudaMemcpyAsync(H2D, staged)",
                                       (int)err);
            }
            rc = ampc_host_free_cuda(stage);
            return err != cudaSuccess ? (int)err : rc;
        }
        /* NOTE: pageable memory: cudaMemcpyAsync may return before the
         * driver has read all of src, so wait before the caller may free
         * or change it. */
        AMPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes,
                                        cudaMemcpyHostToDevice, s));
        AMPC_CUDA_CHECK(cudaStreamSynchronize(s));
        return 0;
    }
    case AMPC_COPY_D2H:
        AMPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes,
                                        cudaMemcpyDeviceToHost, s));
        AMPC_CUDA_CHECK(cudaStreamSynchronize(s));
        return 0;
    case AMPC_COPY_D2D:
        /* cudaMemcpyDefault: with unified addressing the runtime finds each
         * pointer's device, so a copy between two GPUs works too */
        AMPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault,
                                        s));
        return 0;
    }
    ampc_cuda_record_error(__FILE__, __LINE__, "memcpy(kind)",
                           (int)cudaErrorInvalidMemcpyDirection);
    return (int)cudaErrorInvalidMemcpyDirection;
}

// ----------------------------------------------------------------------------
// element conversions (the CPU's cast rules, csrc/cpu/loops.h
// ampc_cast_loop, with the same per-value functions from amp_math.h and
// elementwise_math.h): same dtype copies the bits; int64 <-> bool compare
// with zero; every other pair goes through float32 (exact for the float
// dtypes; int64 -> float rounds to nearest even); float -> int64 truncates,
// and NaN or out of range gives INT64_MIN (x86's cvttss2si, as the CPU);
// float -> bool is `!= 0` (NaN is true).

namespace {

template <int DT> struct Storage;
template <> struct Storage<AMPC_FLOAT32> { typedef float type; };
template <> struct Storage<AMPC_FLOAT16> { typedef uint16_t type; };
template <> struct Storage<AMPC_BFLOAT16> { typedef uint16_t type; };
template <> struct Storage<AMPC_INT64> { typedef int64_t type; };
template <> struct Storage<AMPC_BOOL> { typedef uint8_t type; };

__host__ __device__ constexpr bool
is_float_dt(int dt)
{
    return dt == AMPC_FLOAT32 || dt == AMPC_FLOAT16 || dt == AMPC_BFLOAT16;
}

template <int DT>
__device__ __forceinline__ float
to_f32(typename Storage<DT>::type v)
{
    if constexpr (DT == AMPC_FLOAT32) {
        return v;
    }
    else if constexpr (DT == AMPC_FLOAT16) {
        return ampc_f16_to_f32(v);
    }
    else if constexpr (DT == AMPC_BFLOAT16) {
        return ampc_bf16_to_f32(v);
    }
    else if constexpr (DT == AMPC_INT64) {
        return (float)v;
    }
    else {
        return v != 0 ? 1.0f : 0.0f;
    }
}

template <int DT>
__device__ __forceinline__ typename Storage<DT>::type
from_f32(float f)
{
    if constexpr (DT == AMPC_FLOAT32) {
        return f;
    }
    else if constexpr (DT == AMPC_FLOAT16) {
        return ampc_f32_to_f16(f);
    }
    else if constexpr (DT == AMPC_BFLOAT16) {
        return ampc_f32_to_bf16(f);
    }
    else if constexpr (DT == AMPC_INT64) {
        return ampc_f32_to_i64(f);      /* the CPU's rule, shared */
    }
    else {
        return (uint8_t)(f != 0.0f);
    }
}

template <int S, int D>
__device__ __forceinline__ typename Storage<D>::type
convert(typename Storage<S>::type v)
{
    if constexpr (S == D) {
        return v;
    }
    else if constexpr (!is_float_dt(S) && !is_float_dt(D)) {
        return (typename Storage<D>::type)(v != 0);
    }
    else {
        return from_f32<D>(to_f32<S>(v));
    }
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

constexpr int kThreads = 256;

/* Blocks for a grid-stride loop over `work` items: enough to fill every
 * SM (8 resident blocks of 256 threads each on sm_90), no more. */
int
grid_for(int64_t work)
{
    static int sm_count[AMPC_CUDA_MAX_DEVICES];
    int d = ampc_cuda_current_device();
    if (sm_count[d] == 0) {
        int n = 0;
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d)
                != cudaSuccess || n <= 0) {
            (void)cudaGetLastError();
            n = 132;
        }
        sm_count[d] = n;
    }
    int64_t blocks = CEIL_DIV(work, (int64_t)kThreads);
    int64_t cap = (int64_t)sm_count[d] * 8;
    if (blocks > cap) {
        blocks = cap;
    }
    return blocks < 1 ? 1 : (int)blocks;
}

// ----------------------------------------------------------------------------
// kernels

/* dst[i] = convert(src[i]) for i < n, both contiguous and aligned to N
 * elements: nvec = n / N vectors of N, then the n % N tail one per thread.
 * Grid-stride over vectors; 64-bit indices. */
template <int S, int D, int N>
__global__ void
copy_contig_kernel(const typename Storage<S>::type *__restrict__ src,
                   typename Storage<D>::type *__restrict__ dst, int64_t n)
{
    typedef typename Storage<S>::type ST;
    typedef typename Storage<D>::type DT;
    int64_t nvec = n / N;
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    const Vec<ST, N> *vs = (const Vec<ST, N> *)src;
    Vec<DT, N> *vd = (Vec<DT, N> *)dst;
    for (int64_t i = tid; i < nvec; i += step) {
        Vec<ST, N> a = vs[i];
        Vec<DT, N> b;
#pragma unroll
        for (int k = 0; k < N; k++) {
            b.v[k] = convert<S, D>(a.v[k]);
        }
        vd[i] = b;
    }
    int64_t t = nvec * N + tid;
    if (t < n) {
        dst[t] = convert<S, D>(src[t]);
    }
}

/* dst[i] = val for i < n, dst contiguous and aligned to N elements: N
 * elements per store, the tail by the first threads of the grid. */
template <typename T, int N>
__device__ __forceinline__ void
fill_vectorised(T *__restrict__ dst, T val, int64_t n)
{
    int64_t nvec = n / N;
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    Vec<T, N> b;
#pragma unroll
    for (int k = 0; k < N; k++) {
        b.v[k] = val;
    }
    Vec<T, N> *vd = (Vec<T, N> *)dst;
    for (int64_t i = tid; i < nvec; i += step) {
        vd[i] = b;
    }
    int64_t t = nvec * N + tid;
    if (t < n) {
        dst[t] = val;
    }
}

/* dst[i] = convert(*src) for i < n, dst contiguous (copy_ of a
 * one-element tensor, e.g. fill_ with a 0-d tensor): the source is read
 * once per thread. */
template <int S, int D, int N>
__global__ void
copy_fill_kernel(const typename Storage<S>::type *__restrict__ src,
                 typename Storage<D>::type *__restrict__ dst, int64_t n)
{
    fill_vectorised<typename Storage<D>::type, N>(dst, convert<S, D>(*src),
                                                  n);
}

/* The iteration's shape and the two operands' strides (elements), dims
 * ordered outermost..innermost as iter.c leaves them. */
struct StridedParams {
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    int64_t dst_stride[AMPC_MAX_DIMS];
    int64_t src_stride[AMPC_MAX_DIMS];
};

/* Any strides (broadcast: 0).  Thread i handles flat index i of the
 * iteration (innermost dim fastest, so consecutive threads write
 * consecutive output elements when the output is dense).  Index is
 * uint32_t when n < 2^31 (divisions are much cheaper), else uint64_t. */
template <int S, int D, typename Index>
__global__ void
copy_strided_kernel(const typename Storage<S>::type *__restrict__ src,
                    typename Storage<D>::type *__restrict__ dst,
                    StridedParams p, Index n)
{
    Index step = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += step) {
        Index rem = i;
        int64_t so = 0, doff = 0;
        for (int d = p.ndim - 1; d > 0; d--) {
            Index extent = (Index)p.shape[d];
            Index c = rem % extent;
            rem /= extent;
            so += (int64_t)c * p.src_stride[d];
            doff += (int64_t)c * p.dst_stride[d];
        }
        so += (int64_t)rem * p.src_stride[0];
        doff += (int64_t)rem * p.dst_stride[0];
        dst[doff] = convert<S, D>(src[so]);
    }
}

// ----------------------------------------------------------------------------
// launchers

bool
aligned(const void *p, size_t bytes)
{
    return ((uintptr_t)p % bytes) == 0;
}

/* Shapes: it->shape[0:ndim], numel n; operand 0 dst (dtype D), 1 src (S). */
template <int S, int D>
int
copy_launch(const ampc_iter *it, int64_t n)
{
    typedef typename Storage<S>::type ST;
    typedef typename Storage<D>::type DT;
    /* 16-byte accesses for the wider of the two types */
    constexpr int N = (int)(16 / (sizeof(ST) > sizeof(DT) ? sizeof(ST)
                                                          : sizeof(DT)));
    const ST *src = (const ST *)it->data[1];
    DT *dst = (DT *)it->data[0];
    cudaStream_t s = ampc_cuda_stream();
    if (it->ndim == 1 && it->strides[0][0] == 1) {
        int64_t ss = it->strides[1][0];
        if (ss == 1 && S == D) {
            /* x.copy_(x) reaches here (unalias keeps an exact alias):
             * nothing to move, and cudaMemcpy's ranges must not overlap */
            if ((const void *)dst != (const void *)src) {
                AMPC_CUDA_CHECK(cudaMemcpyAsync(dst, src,
                                                (size_t)n * sizeof(DT),
                                                cudaMemcpyDeviceToDevice, s));
            }
            return 0;
        }
        bool vec = aligned(dst, sizeof(DT) * N);
        if (ss == 0) {
            if (vec) {
                copy_fill_kernel<S, D, N><<<grid_for(n / N + 1), kThreads, 0,
                                            s>>>(src, dst, n);
            }
            else {
                copy_fill_kernel<S, D, 1><<<grid_for(n), kThreads, 0, s>>>(
                    src, dst, n);
            }
            AMPC_CUDA_CHECK_LAUNCH();
            return 0;
        }
        if (ss == 1) {
            if (vec && aligned(src, sizeof(ST) * N)) {
                copy_contig_kernel<S, D, N><<<grid_for(n / N + 1), kThreads,
                                              0, s>>>(src, dst, n);
            }
            else {
                copy_contig_kernel<S, D, 1><<<grid_for(n), kThreads, 0, s>>>(
                    src, dst, n);
            }
            AMPC_CUDA_CHECK_LAUNCH();
            return 0;
        }
    }
    StridedParams p;
    p.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        p.shape[d] = it->shape[d];
        p.dst_stride[d] = it->strides[0][d];
        p.src_stride[d] = it->strides[1][d];
    }
    if (n < ((int64_t)1 << 31)) {
        copy_strided_kernel<S, D, uint32_t><<<grid_for(n), kThreads, 0, s>>>(
            src, dst, p, (uint32_t)n);
    }
    else {
        copy_strided_kernel<S, D, uint64_t><<<grid_for(n), kThreads, 0, s>>>(
            src, dst, p, (uint64_t)n);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

template <int S>
int
copy_dispatch_dst(ampc_dtype ddt, const ampc_iter *it, int64_t n)
{
    switch (ddt) {
    case AMPC_FLOAT32:
        return copy_launch<S, AMPC_FLOAT32>(it, n);
    case AMPC_FLOAT16:
        return copy_launch<S, AMPC_FLOAT16>(it, n);
    case AMPC_BFLOAT16:
        return copy_launch<S, AMPC_BFLOAT16>(it, n);
    case AMPC_INT64:
        return copy_launch<S, AMPC_INT64>(it, n);
    case AMPC_BOOL:
        return copy_launch<S, AMPC_BOOL>(it, n);
    default:
        break;
    }
    ampc_cuda_record_error(__FILE__, __LINE__, "copy(ddt)",
                           (int)cudaErrorInvalidValue);
    return (int)cudaErrorInvalidValue;
}

// ----------------------------------------------------------------------------
// fill: the value is a kernel argument

/* dst[i] = val for i < n, dst contiguous and aligned to N elements. */
template <typename T, int N>
__global__ void
fill_contig_kernel(T *__restrict__ dst, T val, int64_t n)
{
    fill_vectorised<T, N>(dst, val, n);
}

/* dst at any strides (p.dst_stride; p.src_stride unused) = val, flat
 * index i over the iteration as in copy_strided_kernel. */
template <typename T, typename Index>
__global__ void
fill_strided_kernel(T *__restrict__ dst, T val, StridedParams p, Index n)
{
    Index step = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += step) {
        Index rem = i;
        int64_t off = 0;
        for (int d = p.ndim - 1; d > 0; d--) {
            Index extent = (Index)p.shape[d];
            off += (int64_t)(rem % extent) * p.dst_stride[d];
            rem /= extent;
        }
        off += (int64_t)rem * p.dst_stride[0];
        dst[off] = val;
    }
}

/* Shapes: it->shape[0:ndim], numel n; operand 0 of element type T. */
template <typename T>
int
fill_launch(const ampc_iter *it, int64_t n, uint64_t bits)
{
    /* the value: the first sizeof(T) bytes of bits, as the C side copied
     * them in */
    T val;
    memcpy(&val, &bits, sizeof(T));
    T *dst = (T *)it->data[0];
    cudaStream_t s = ampc_cuda_stream();
    if (it->ndim == 1 && it->strides[0][0] == 1) {
        constexpr int N = (int)(16 / sizeof(T));
        if (aligned(dst, 16)) {
            fill_contig_kernel<T, N><<<grid_for(n / N + 1), kThreads, 0,
                                       s>>>(dst, val, n);
        }
        else {
            fill_contig_kernel<T, 1><<<grid_for(n), kThreads, 0, s>>>(
                dst, val, n);
        }
        AMPC_CUDA_CHECK_LAUNCH();
        return 0;
    }
    StridedParams p;
    p.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        p.shape[d] = it->shape[d];
        p.dst_stride[d] = it->strides[0][d];
        p.src_stride[d] = 0;
    }
    if (n < ((int64_t)1 << 31)) {
        fill_strided_kernel<T, uint32_t><<<grid_for(n), kThreads, 0, s>>>(
            dst, val, p, (uint32_t)n);
    }
    else {
        fill_strided_kernel<T, uint64_t><<<grid_for(n), kThreads, 0, s>>>(
            dst, val, p, (uint64_t)n);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

}  // namespace

extern "C" int
ampc_copy_cuda(ampc_dtype sdt, ampc_dtype ddt, const ampc_iter *it)
{
    int64_t n = 1;
    for (int d = 0; d < it->ndim; d++) {
        n *= it->shape[d];
    }
    if (n == 0) {
        return 0;
    }
    switch (sdt) {
    case AMPC_FLOAT32:
        return copy_dispatch_dst<AMPC_FLOAT32>(ddt, it, n);
    case AMPC_FLOAT16:
        return copy_dispatch_dst<AMPC_FLOAT16>(ddt, it, n);
    case AMPC_BFLOAT16:
        return copy_dispatch_dst<AMPC_BFLOAT16>(ddt, it, n);
    case AMPC_INT64:
        return copy_dispatch_dst<AMPC_INT64>(ddt, it, n);
    case AMPC_BOOL:
        return copy_dispatch_dst<AMPC_BOOL>(ddt, it, n);
    default:
        break;
    }
    ampc_cuda_record_error(__FILE__, __LINE__, "copy(sdt)",
                           (int)cudaErrorInvalidValue);
    return (int)cudaErrorInvalidValue;
}

extern "C" int
ampc_fill_cuda(ampc_dtype dt, const ampc_iter *it, uint64_t value_bits)
{
    int64_t n = 1;
    for (int d = 0; d < it->ndim; d++) {
        n *= it->shape[d];
    }
    if (n == 0) {
        return 0;
    }
    /* only the element size matters: the bits are stored as they are */
    switch (ampc_dtype_size[dt]) {
    case 8:
        return fill_launch<uint64_t>(it, n, value_bits);
    case 4:
        return fill_launch<uint32_t>(it, n, value_bits);
    case 2:
        return fill_launch<uint16_t>(it, n, value_bits);
    case 1:
        return fill_launch<uint8_t>(it, n, value_bits);
    default:
        break;
    }
    ampc_cuda_record_error(__FILE__, __LINE__, "fill(dt)",
                           (int)cudaErrorInvalidValue);
    return (int)cudaErrorInvalidValue;
}
