/* nn_common.cuh - what the NN and optimizer kernels (relu.cu, pool.cu,
 * softmax.cu, loss.cu, dropout.cu, optim.cu) share: the storage type of
 * each float dtype with its widening and RNE narrowing (amp_math.h), 16-byte
 * packs for vectorised loads, the dtype dispatch, launch sizes, warp and
 * block reductions, and the deferred error report (kernels_cuda.h
 * ampc_nn_error).
 */
#ifndef AMPC_NN_COMMON_CUH
#define AMPC_NN_COMMON_CUH

#include <stdint.h>

#include "common.cuh"
#include "nn_math.h"

#define AMPC_NN_THREADS 256         /* threads per block of 1-D kernels */
#define AMPC_NN_MAX_BLOCKS 8192     /* grid-stride loops cap their grid */
#define AMPC_NN_REDUCE_THREADS 1024 /* the one block of a final reduction */

// ----------------------------------------------------------------------------
// storage types and conversions

template <ampc_dtype DT>
struct nn_storage {
    using T = uint16_t;             /* float16 and bfloat16: raw bits */
};

template <>
struct nn_storage<AMPC_FLOAT32> {
    using T = float;
};

template <ampc_dtype DT>
using nn_t = typename nn_storage<DT>::T;

template <ampc_dtype DT>
__device__ __forceinline__ float
nn_load(nn_t<DT> v)
{
    if constexpr (DT == AMPC_FLOAT32) {
        return v;
    }
    else if constexpr (DT == AMPC_FLOAT16) {
        return ampc_f16_to_f32(v);
    }
    else {
        return ampc_bf16_to_f32(v);
    }
}

/* float32 -> the dtype, rounded once (RNE), NaN kept, overflow to inf */
template <ampc_dtype DT>
__device__ __forceinline__ nn_t<DT>
nn_store(float f)
{
    if constexpr (DT == AMPC_FLOAT32) {
        return f;
    }
    else if constexpr (DT == AMPC_FLOAT16) {
        return ampc_f32_to_f16(f);
    }
    else {
        return ampc_f32_to_bf16(f);
    }
}

/* double -> the dtype rounded once, as the CPU's ampc_store_f64: float16
 * and bfloat16 go through float32 rounded to odd (then the second rounding
 * equals rounding d directly). */
template <ampc_dtype DT>
__device__ __forceinline__ nn_t<DT>
nn_store_f64(double d)
{
    float f = (float)d;
    if constexpr (DT == AMPC_FLOAT32) {
        return f;
    }
    else {
        if ((double)f != d && d == d) {
            uint32_t u = ampc_f32_bits(f);
            if (fabs((double)f) > fabs(d)) {
                u -= 1;             /* rounded away: step back to trunc */
            }
            f = ampc_f32_from_bits(u | 1u);
        }
        return nn_store<DT>(f);
    }
}

/* One element of a float dtype known only at run time, as float32. */
__device__ __forceinline__ float
nn_load_any(ampc_dtype dt, const void *p)
{
    if (dt == AMPC_FLOAT16) {
        return ampc_f16_to_f32(*(const uint16_t *)p);
    }
    if (dt == AMPC_BFLOAT16) {
        return ampc_bf16_to_f32(*(const uint16_t *)p);
    }
    return *(const float *)p;
}

/* 16 bytes of a dtype, widened: one 128-bit load or store of N elements. */
template <ampc_dtype DT>
struct nn_pack {
    static constexpr int N = 16 / (int)sizeof(nn_t<DT>);
    float f[N];

    __device__ __forceinline__ void
    load(const nn_t<DT> *p)
    {
        uint4 raw = *reinterpret_cast<const uint4 *>(p);
        const nn_t<DT> *e = reinterpret_cast<const nn_t<DT> *>(&raw);
#pragma unroll
        for (int k = 0; k < N; k++) {
            f[k] = nn_load<DT>(e[k]);
        }
    }

    __device__ __forceinline__ void
    store(nn_t<DT> *p) const
    {
        uint4 raw;
        nn_t<DT> *e = reinterpret_cast<nn_t<DT> *>(&raw);
#pragma unroll
        for (int k = 0; k < N; k++) {
            e[k] = nn_store<DT>(f[k]);
        }
        *reinterpret_cast<uint4 *>(p) = raw;
    }
};

static inline int
nn_aligned16(const void *p)
{
    return p == NULL || ((uintptr_t)p & 15u) == 0;
}

/* Runs BODY with the constexpr ampc_dtype DT for the float dtype dt;
 * returns cudaErrorInvalidValue from the enclosing function otherwise. */
#define AMPC_NN_DISPATCH(dt, DT, ...)                                      \
    switch (dt) {                                                          \
    case AMPC_FLOAT32: {                                                   \
        constexpr ampc_dtype DT = AMPC_FLOAT32;                            \
        __VA_ARGS__;                                                       \
        break;                                                             \
    }                                                                      \
    case AMPC_FLOAT16: {                                                   \
        constexpr ampc_dtype DT = AMPC_FLOAT16;                            \
        __VA_ARGS__;                                                       \
        break;                                                             \
    }                                                                      \
    case AMPC_BFLOAT16: {                                                  \
        constexpr ampc_dtype DT = AMPC_BFLOAT16;                           \
        __VA_ARGS__;                                                       \
        break;                                                             \
    }                                                                      \
    default:                                                               \
        ampc_cuda_record_error(__FILE__, __LINE__, "unsupported dtype",    \
                               (int)cudaErrorInvalidValue);                \
        return (int)cudaErrorInvalidValue;                                 \
    }

// ----------------------------------------------------------------------------
// launch sizes

/* Blocks for a grid-stride loop over `work` items of `per_thread` each. */
static inline unsigned int
nn_blocks(int64_t work, int threads)
{
    int64_t b = CEIL_DIV(work, (int64_t)threads);
    if (b < 1) {
        b = 1;
    }
    return (unsigned int)(b < AMPC_NN_MAX_BLOCKS ? b : AMPC_NN_MAX_BLOCKS);
}

__device__ __forceinline__ int64_t
nn_tid(void)
{
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t
nn_nthreads(void)
{
    return (int64_t)gridDim.x * blockDim.x;
}

// ----------------------------------------------------------------------------
// reductions (fixed shapes: the results depend only on the launch shape,
// never on timing)

__device__ __forceinline__ float
nn_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v = ampc_nn_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}

__device__ __forceinline__ float
nn_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

__device__ __forceinline__ double
nn_warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

/* The sum of v over the block (blockDim.x a multiple of 32, at most 1024),
 * returned to every thread.  NOTE: every thread of the block must call it
 * (it synchronises). */
__device__ __forceinline__ double
nn_block_sum_d(double v)
{
    __shared__ double part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int nwarps = blockDim.x >> 5;
    v = nn_warp_sum_d(v);
    __syncthreads();                /* part[] may hold a previous call's */
    if (lane == 0) {
        part[warp] = v;
    }
    __syncthreads();
    v = lane < nwarps ? part[lane] : 0.0;
    return nn_warp_sum_d(v);
}

// ----------------------------------------------------------------------------
// the deferred error report

/* The device address of the mapped record (loss.cu), allocated on first
 * use; 0 or an error code. */
int ampc_nn_error_device(ampc_nn_error **dev);

/* Called by a kernel that met a bad index: the first thread to claim the
 * record writes all of its fields (so value and bound come from one
 * report); the others leave it. */
__device__ __forceinline__ void
nn_report(ampc_nn_error *e, int64_t value, int64_t bound,
          ampc_nn_error_kind kind)
{
    if (e == NULL ||
        atomicCAS((unsigned long long *)&e->claim, 0ULL, 1ULL) != 0ULL) {
        return;
    }
    e->value = value;
    e->bound = bound;
    e->kind = (int64_t)kind;
    __threadfence_system();
    e->state = 1;
}

#endif /* AMPC_NN_COMMON_CUH */
