/* amp.cu - the AMP kernels on CUDA: the fused multi-tensor
 * unscale-and-check (one launch for all of an optimizer's gradients, with
 * the per-tensor inf/NaN/zero/subnormal counts of scaler.stats() in the
 * same pass), the scale update in one thread, and clip_grad_norm_'s total
 * norm and clip coefficient.  Every scalar they use (scale, inv_scale,
 * found_inf, growth tracker, norm) is read and written in device memory,
 * so nothing here makes the host wait, and all of it can be captured in a
 * CUDA graph.  The per-value rules are amp_math.h's and amp_reduce.h's,
 * which the CPU kernels and csrc/amp_ops.c run too.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "amp_reduce.h"
#include "common.cuh"
#include "multi_tensor.cuh"

/* Threads per block of the element-wise passes. */
#define AMP_THREADS 256
/* Elements one block handles: a multiple of 8, so that a chunk of a
 * 16-byte-aligned tensor starts 16-byte-aligned for every dtype. */
#define AMP_CHUNK 16384
/* 128-bit loads in flight per thread before the first is used. */
#define AMP_ILP 4
/* Tensors per launch.  Their metadata travels in the kernel's parameters
 * (about 8.5 KB; CUDA 12.1+ allows 32 KB on sm_70+), not in a device array
 * copied from the host: a parameter block needs no host-to-device copy of
 * pageable memory (which would stage or wait) and is captured by value in
 * a CUDA graph, where a host buffer would be read at replay, long after it
 * changed.  A list longer than this (rare: a model with more parameters)
 * takes one launch per AMP_MAX_TENSORS tensors. */
#define AMP_MAX_TENSORS 384
/* found_inf pointers summed by one scale-update launch. */
#define AMP_MAX_FOUND 256

// ----------------------------------------------------------------------------
// launch metadata: blocks assigned to (tensor, chunk) pairs

/* Tensor t of this launch owns blocks [first_block[t], first_block[t+1]),
 * block k of them elements [k * AMP_CHUNK, min(numel, (k+1) * AMP_CHUNK)).
 * An empty tensor owns no block. */
struct amp_launch {
    void *data[AMP_MAX_TENSORS];
    int64_t numel[AMP_MAX_TENSORS];
    int32_t first_block[AMP_MAX_TENSORS + 1];
    uint8_t dtype[AMP_MAX_TENSORS];     /* ampc_dtype */
    uint8_t aligned[AMP_MAX_TENSORS];   /* data is 16-byte aligned */
    int32_t n;
};

/* The tensor of this launch that owns block b. */
__device__ __forceinline__ int
amp_block_tensor(const amp_launch &a, int32_t b)
{
    return mt_block_tensor(a.first_block, a.n, b);
}

/* Fills `a` with tensors [*next, ...) of l: as many as fit in one launch
 * (AMP_MAX_TENSORS, and fewer than 2^31 blocks); advances *next. */
static void
amp_launch_fill(amp_launch *a, const ampc_tensor_list *l, int64_t *next)
{
    int32_t blocks = 0;
    int n = 0;
    while (*next < l->n && n < AMP_MAX_TENSORS) {
        int64_t t = *next;
        int64_t nb = CEIL_DIV(l->numel[t], (int64_t)AMP_CHUNK);
        if (n > 0 && (int64_t)blocks + nb > (int64_t)INT32_MAX) {
            break;
        }
        a->data[n] = l->data[t];
        a->numel[n] = l->numel[t];
        a->first_block[n] = blocks;
        a->dtype[n] = (uint8_t)l->dtype[t];
        a->aligned[n] = ((uintptr_t)l->data[t] % 16) == 0;
        blocks += (int32_t)nb;
        n++;
        (*next)++;
    }
    a->first_block[n] = blocks;
    a->n = n;
}

// ----------------------------------------------------------------------------
// block reductions (warp shuffles, then one warp over the warps' results)

/* The reduction of v over the block, valid in thread 0.  The order of the
 * combination is fixed by the launch shape, so results are reproducible.
 * blockDim.x must be a multiple of 32 (<= 1024); every thread must call. */
template <typename T, typename Op>
__device__ T
amp_block_reduce(T v, T identity, Op op)
{
    __shared__ T partial[32];
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    for (int o = 16; o > 0; o /= 2) {
        v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    }
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / 32) ? partial[lane] : identity;
        for (int o = 16; o > 0; o /= 2) {
            v = op(v, __shfl_down_sync(0xffffffffu, v, o));
        }
    }
    /* NOTE: a second call in the same kernel reuses `partial`: wait until
     * warp 0 has read it. */
    __syncthreads();
    return v;
}

struct amp_plus {
    template <typename T>
    __device__ T operator()(T a, T b) const
    {
        return a + b;
    }
};

// ----------------------------------------------------------------------------
// the storage types: float, __half, __nv_bfloat16

/* load: widen to float (exact); store: round to the type (RNE, as amp_math.h
 * does; NaN stays NaN, though its payload is the hardware's); bits: the
 * pattern with the sign cleared, for the telemetry (amp_reduce.h). */
template <typename T>
struct amp_type;

template <>
struct amp_type<float> {
    static constexpr uint32_t inf = 0x7f800000u;
    static constexpr uint32_t min_normal = 0x00800000u;
    __device__ static float load(float v) { return v; }
    __device__ static float store(float f) { return f; }
    __device__ static uint32_t bits(float v)
    {
        return __float_as_uint(v) & 0x7fffffffu;
    }
};

template <>
struct amp_type<__half> {
    static constexpr uint32_t inf = 0x7c00u;
    static constexpr uint32_t min_normal = 0x0400u;
    __device__ static float load(__half v) { return __half2float(v); }
    __device__ static __half store(float f) { return __float2half_rn(f); }
    __device__ static uint32_t bits(__half v)
    {
        return (uint32_t)__half_as_ushort(v) & 0x7fffu;
    }
};

template <>
struct amp_type<__nv_bfloat16> {
    static constexpr uint32_t inf = 0x7f80u;
    static constexpr uint32_t min_normal = 0x0080u;
    __device__ static float load(__nv_bfloat16 v)
    {
        return __bfloat162float(v);
    }
    __device__ static __nv_bfloat16 store(float f)
    {
        return __float2bfloat16_rn(f);
    }
    __device__ static uint32_t bits(__nv_bfloat16 v)
    {
        return (uint32_t)__bfloat16_as_ushort(v) & 0x7fffu;
    }
};

// ----------------------------------------------------------------------------
// the fused unscale-and-check

/* One element: amp_math.h's rule; the output is v itself unless `write`
 * (inv != 1), so a check-only pass cannot change a bit. */
template <typename T, bool COUNTS>
__device__ __forceinline__ T
unscale_elem(T v, float inv, bool write, int *nonfinite, ampc_amp_counts *c)
{
    float o = ampc_amp_unscale_one(amp_type<T>::load(v), inv, nonfinite);
    T out = write ? amp_type<T>::store(o) : v;
    if (COUNTS) {
        ampc_amp_count_one(c, amp_type<T>::bits(v), amp_type<T>::bits(out),
                           amp_type<T>::inf, amp_type<T>::min_normal);
    }
    return out;
}

/* x[begin, end) of one tensor, end - begin <= AMP_CHUNK, by one block:
 * 128-bit loads (AMP_ILP in flight per thread) when x is 16-byte aligned,
 * then the tail element by element; coalesced either way. */
template <typename T, bool COUNTS>
__device__ void
unscale_chunk(T *x, int64_t begin, int64_t end, bool aligned, float inv,
              bool write, int *nonfinite, ampc_amp_counts *c)
{
    constexpr int VEC = 16 / sizeof(T);
    union pack {
        uint4 raw;
        T v[VEC];
    };
    int64_t i = begin;
    if (aligned) {
        /* begin is a multiple of AMP_CHUNK, so x + begin is aligned too */
        uint4 *xv = reinterpret_cast<uint4 *>(x + begin);
        int64_t nvec = (end - begin) / VEC;
        for (int64_t j0 = threadIdx.x; j0 < nvec;
             j0 += (int64_t)AMP_ILP * blockDim.x) {
            pack r[AMP_ILP];
#pragma unroll
            for (int k = 0; k < AMP_ILP; k++) {
                int64_t j = j0 + (int64_t)k * blockDim.x;
                if (j < nvec) {
                    r[k].raw = xv[j];
                }
            }
#pragma unroll
            for (int k = 0; k < AMP_ILP; k++) {
                int64_t j = j0 + (int64_t)k * blockDim.x;
                if (j < nvec) {
#pragma unroll
                    for (int e = 0; e < VEC; e++) {
                        r[k].v[e] = unscale_elem<T, COUNTS>(
                            r[k].v[e], inv, write, nonfinite, c);
                    }
                    if (write) {
                        xv[j] = r[k].raw;
                    }
                }
            }
        }
        i = begin + nvec * VEC;
    }
    for (int64_t j = i + threadIdx.x; j < end; j += blockDim.x) {
        T o = unscale_elem<T, COUNTS>(x[j], inv, write, nonfinite, c);
        if (write) {
            x[j] = o;
        }
    }
}

/* How the unscale kernel gets its multiplier. */
enum amp_inv_mode {
    INV_READ = 0,       /* *inv_scale */
    INV_RECIPROCAL,     /* float(1 / double(*inv_scale)) */
    INV_ONE             /* 1: the check alone */
};

/* grid: one block per (tensor, chunk) of the launch (amp_launch);
 * block: AMP_THREADS.  inv_scale (device, 1 float): read as `mode` says;
 * found_inf (device, 1 float) <- 1.0f on inf/NaN; counts
 * (device, one ampc_amp_counts per tensor of the whole list, the launch's
 * first at `counts`) summed with one atomicAdd per block and counter. */
template <bool COUNTS>
__global__ void
amp_unscale_kernel(const __grid_constant__ amp_launch a,
                   const float *inv_scale, int mode, float *found_inf,
                   ampc_amp_counts *counts)
{
    __shared__ float inv_shared;
    if (threadIdx.x == 0) {
        /* PyTorch: "FP32 division can be imprecise for certain compile
         * options, so we carry out the reciprocal in FP64." */
        if (mode == INV_ONE) {
            inv_shared = 1.0f;
        }
        else if (mode == INV_RECIPROCAL) {
            inv_shared = ampc_amp_inv_scale(*inv_scale);
        }
        else {
            inv_shared = *inv_scale;
        }
    }
    __syncthreads();
    float inv = inv_shared;
    bool write = inv != 1.0f;

    int32_t b = (int32_t)blockIdx.x;
    int t = amp_block_tensor(a, b);
    int64_t begin = (int64_t)(b - a.first_block[t]) * AMP_CHUNK;
    int64_t end = begin + AMP_CHUNK < a.numel[t] ? begin + AMP_CHUNK
                                                 : a.numel[t];
    int nonfinite = 0;
    ampc_amp_counts c = {0, 0, 0, 0};
    switch (a.dtype[t]) {
    case AMPC_FLOAT16:
        unscale_chunk<__half, COUNTS>((__half *)a.data[t], begin, end,
                                      a.aligned[t], inv, write, &nonfinite,
                                      &c);
        break;
    case AMPC_BFLOAT16:
        unscale_chunk<__nv_bfloat16, COUNTS>((__nv_bfloat16 *)a.data[t],
                                             begin, end, a.aligned[t], inv,
                                             write, &nonfinite, &c);
        break;
    default:
        unscale_chunk<float, COUNTS>((float *)a.data[t], begin, end,
                                     a.aligned[t], inv, write, &nonfinite,
                                     &c);
        break;
    }
    /* found_inf: any thread of the block; every writer writes 1.0f, so the
     * race between blocks is benign (PyTorch's kernel does the same). */
    if (__syncthreads_or(nonfinite) && threadIdx.x == 0) {
        *found_inf = 1.0f;
    }
    if (COUNTS) {
        long long inf = amp_block_reduce<long long>(c.inf, 0, amp_plus());
        long long nan = amp_block_reduce<long long>(c.nan, 0, amp_plus());
        long long zero = amp_block_reduce<long long>(c.zero, 0, amp_plus());
        long long sub = amp_block_reduce<long long>(c.subnormal, 0,
                                                    amp_plus());
        if (threadIdx.x == 0) {
            ampc_amp_counts *ct = counts + t;
            /* integer sums: the order of the atomics does not matter */
            atomicAdd((unsigned long long *)&ct->inf,
                      (unsigned long long)inf);
            atomicAdd((unsigned long long *)&ct->nan,
                      (unsigned long long)nan);
            atomicAdd((unsigned long long *)&ct->zero,
                      (unsigned long long)zero);
            atomicAdd((unsigned long long *)&ct->subnormal,
                      (unsigned long long)sub);
        }
    }
}

// ----------------------------------------------------------------------------
// the scale update

struct amp_found_list {
    float *p[AMP_MAX_FOUND];
    int n;
};

/* grid 1, block 1.  *dst = (first ? *f.p[0] : *dst) + the rest of f.p, in
 * order; with `update`, then amp_math.h's scale update on that sum and the
 * stats (AMPC_AMP_STAT_*). */
__global__ void
amp_update_scale_kernel(const __grid_constant__ amp_found_list f, int first,
                        float *dst, int update, float *scale,
                        int64_t *tracker, double growth_factor,
                        double backoff_factor, int64_t growth_interval,
                        int64_t *stats, int64_t fused_steps)
{
    float found = first ? *f.p[0] : *dst;
    for (int i = first ? 1 : 0; i < f.n; i++) {
        found += *f.p[i];
    }
    *dst = found;
    if (!update) {
        return;
    }
    ampc_amp_update_scale_one(scale, tracker, found, growth_factor,
                              backoff_factor, growth_interval);
    if (stats != NULL) {
        if (found != 0.0f) {
            stats[AMPC_AMP_STAT_FUSED_SKIPPED] += fused_steps;
            stats[AMPC_AMP_STAT_LAST_SKIPPED] = 1;
            stats[AMPC_AMP_STAT_CONSECUTIVE] += 1;
        }
        else {
            stats[AMPC_AMP_STAT_LAST_SKIPPED] = 0;
            stats[AMPC_AMP_STAT_CONSECUTIVE] = 0;
        }
    }
}

// ----------------------------------------------------------------------------
// the gradient norm: pieces, then tensors, then the total

enum amp_norm_kind {
    NORM_2 = 0,
    NORM_1,
    NORM_INF,
    NORM_NEG_INF,
    NORM_0,
    NORM_P
};

/* p as a compile-time constant where it is one, so that amp_reduce.h's
 * branches on p fold away in the hot loop. */
template <int KIND>
__device__ __forceinline__ double
norm_p(double p)
{
    return KIND == NORM_2         ? 2.0
           : KIND == NORM_1       ? 1.0
           : KIND == NORM_INF     ? (double)INFINITY
           : KIND == NORM_NEG_INF ? -(double)INFINITY
           : KIND == NORM_0       ? 0.0
                                  : p;
}

struct amp_norm_merge_op {
    double p;
    __device__ double operator()(double a, double b) const
    {
        return ampc_norm_merge(p, a, b);
    }
};

template <typename T, int KIND>
__device__ double
norm_chunk(const T *x, int64_t begin, int64_t end, double p)
{
    double pk = norm_p<KIND>(p);
    double acc = ampc_norm_identity(pk);
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
        double v = (double)amp_type<T>::load(x[j]);
        acc = ampc_norm_merge(pk, acc, ampc_norm_term(pk, v));
    }
    return acc;
}

/* Pass 1.  grid: one block per (tensor, chunk) of the launch; block:
 * AMP_THREADS.  part[b] = the accumulator of block b's chunk. */
template <int KIND>
__global__ void
grad_norm_piece_kernel(const __grid_constant__ amp_launch a, double p,
                       double *part)
{
    int32_t b = (int32_t)blockIdx.x;
    int t = amp_block_tensor(a, b);
    int64_t begin = (int64_t)(b - a.first_block[t]) * AMP_CHUNK;
    int64_t end = begin + AMP_CHUNK < a.numel[t] ? begin + AMP_CHUNK
                                                 : a.numel[t];
    double acc;
    switch (a.dtype[t]) {
    case AMPC_FLOAT16:
        acc = norm_chunk<__half, KIND>((const __half *)a.data[t], begin, end,
                                       p);
        break;
    case AMPC_BFLOAT16:
        acc = norm_chunk<__nv_bfloat16, KIND>(
            (const __nv_bfloat16 *)a.data[t], begin, end, p);
        break;
    default:
        acc = norm_chunk<float, KIND>((const float *)a.data[t], begin, end,
                                      p);
        break;
    }
    double pk = norm_p<KIND>(p);
    amp_norm_merge_op op = {pk};
    acc = amp_block_reduce<double>(acc, ampc_norm_identity(pk), op);
    if (threadIdx.x == 0) {
        part[b] = acc;
    }
}

/* Pass 2.  grid: one block per tensor of the launch; block: AMP_THREADS.
 * tn[t] = the tensor's norm, rounded to its dtype, from its parts
 * part[first_block[t] ..), folded in a fixed order. */
__global__ void
grad_norm_tensor_kernel(const __grid_constant__ amp_launch a, double p,
                        const float *scale, const double *part, double *tn)
{
    int t = (int)blockIdx.x;
    amp_norm_merge_op op = {p};
    double acc = ampc_norm_identity(p);
    for (int32_t k = a.first_block[t] + (int32_t)threadIdx.x;
         k < a.first_block[t + 1]; k += (int32_t)blockDim.x) {
        acc = ampc_norm_merge(p, acc, part[k]);
    }
    acc = amp_block_reduce<double>(acc, ampc_norm_identity(p), op);
    if (threadIdx.x == 0) {
        float inv = scale != NULL ? ampc_amp_inv_scale(*scale) : 1.0f;
        tn[t] = ampc_norm_of_tensor((ampc_dtype)a.dtype[t], p, acc, inv);
    }
}

/* One float dtype element at p from a double, rounded once (RNE). */
__device__ void
store_norm(ampc_dtype dt, void *out, double d)
{
    float f = ampc_amp_round_to(dt, d);
    if (dt == AMPC_FLOAT16) {
        *(uint16_t *)out = ampc_f32_to_f16(f);
    }
    else if (dt == AMPC_BFLOAT16) {
        *(uint16_t *)out = ampc_f32_to_bf16(f);
    }
    else {
        *(float *)out = f;
    }
}

/* Pass 3.  grid 1, block AMP_THREADS: thread i folds the terms of tensors
 * [i n / threads, (i + 1) n / threads) in order, the block folds the
 * threads' results; *total (out_dt) = the norm of the per-tensor norms. */
__global__ void
grad_norm_total_kernel(const double *tn, int64_t n, double p,
                       ampc_dtype out_dt, void *total)
{
    int64_t nt = blockDim.x;
    int64_t lo = n * threadIdx.x / nt;
    int64_t hi = n * (threadIdx.x + 1) / nt;
    double acc = ampc_norm_identity(p);
    for (int64_t t = lo; t < hi; t++) {
        acc = ampc_norm_merge(p, acc, ampc_norm_term(p, tn[t]));
    }
    amp_norm_merge_op op = {p};
    acc = amp_block_reduce<double>(acc, ampc_norm_identity(p), op);
    if (threadIdx.x == 0) {
        store_norm(out_dt, total, ampc_norm_finish(p, acc));
    }
}

/* grid 1, block 1: *coef = amp_reduce.h's clip coefficient, or with a
 * scale its unscale-and-clip multiplier. */
__global__ void
clip_coef_kernel(const void *total_norm, ampc_dtype dt, double max_norm,
                 const float *scale, float *coef)
{
    float v;
    if (dt == AMPC_FLOAT16) {
        v = ampc_f16_to_f32(*(const uint16_t *)total_norm);
    }
    else if (dt == AMPC_BFLOAT16) {
        v = ampc_bf16_to_f32(*(const uint16_t *)total_norm);
    }
    else {
        v = *(const float *)total_norm;
    }
    *coef = scale != NULL ? ampc_clip_multiplier(dt, v, max_norm,
                                                 ampc_amp_inv_scale(*scale))
                          : ampc_clip_coef(dt, v, max_norm);
}

// ----------------------------------------------------------------------------
// kernel launchers

/* l: n tensors of numel[t] float32/float16/bfloat16 elements (device
 * pointers), in place; inv_scale, found_inf: 1 device float each; counts:
 * l->n device entries or NULL. */
extern "C" int
ampc_amp_unscale_cuda(const ampc_tensor_list *l, const float *inv_scale,
                      int flags, float *found_inf, ampc_amp_counts *counts)
{
    cudaStream_t stream = ampc_cuda_stream();
    for (int64_t t = 0; t < l->n; t++) {
        if (!ampc_dtype_is_float(l->dtype[t])) {
            /* the callers check; this guards the kernel's dtype switch */
            ampc_cuda_record_error(__FILE__, __LINE__,
                                   "amp_unscale: a tensor that is not "
                                   "float32, float16 or bfloat16",
                                   (int)cudaErrorInvalidValue);
            return (int)cudaErrorInvalidValue;
        }
    }
    if (flags & AMPC_AMP_ZERO_FOUND) {
        AMPC_CUDA_CHECK(cudaMemsetAsync(found_inf, 0, sizeof(float),
                                        stream));
    }
    if (counts != NULL && l->n > 0) {
        AMPC_CUDA_CHECK(cudaMemsetAsync(
            counts, 0, (size_t)l->n * sizeof(ampc_amp_counts), stream));
    }
    int mode = (flags & AMPC_AMP_CHECK_ONLY)    ? INV_ONE
               : (flags & AMPC_AMP_RECIPROCAL) ? INV_RECIPROCAL
                                               : INV_READ;
    amp_launch a;
    int64_t next = 0;
    while (next < l->n) {
        int64_t first = next;
        amp_launch_fill(&a, l, &next);
        int32_t blocks = a.first_block[a.n];
        if (blocks == 0) {
            continue;           /* only empty tensors */
        }
        ampc_amp_counts *c = counts != NULL ? counts + first : NULL;
        if (c != NULL) {
            amp_unscale_kernel<true><<<blocks, AMP_THREADS, 0, stream>>>(
                a, inv_scale, mode, found_inf, c);
        }
        else {
            amp_unscale_kernel<false><<<blocks, AMP_THREADS, 0, stream>>>(
                a, inv_scale, mode, found_inf, NULL);
        }
        AMPC_CUDA_CHECK_LAUNCH();
    }
    return 0;
}

/* scale, tracker, found_infs[i], stats: device scalars (stats
 * AMPC_AMP_NUM_STATS entries or NULL). */
extern "C" int
ampc_amp_update_scale_cuda(float *scale, int64_t *tracker,
                           float *const *found_infs, int n_found,
                           double growth_factor, double backoff_factor,
                           int64_t growth_interval, int64_t *stats,
                           int64_t fused_steps)
{
    if (n_found < 1) {
        ampc_cuda_record_error(__FILE__, __LINE__,
                               "amp_update_scale: no found_inf",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    cudaStream_t stream = ampc_cuda_stream();
    amp_found_list f;
    /* PyTorch's order: found_infs[0] += found_infs[1]; += [2]; ... */
    for (int i = 0; i < n_found; i += AMP_MAX_FOUND) {
        int m = n_found - i < AMP_MAX_FOUND ? n_found - i : AMP_MAX_FOUND;
        for (int k = 0; k < m; k++) {
            f.p[k] = found_infs[i + k];
        }
        f.n = m;
        int last = i + m == n_found;
        amp_update_scale_kernel<<<1, 1, 0, stream>>>(
            f, i == 0, found_infs[0], last, scale, tracker, growth_factor,
            backoff_factor, growth_interval, stats, fused_steps);
        AMPC_CUDA_CHECK_LAUNCH();
    }
    return 0;
}

/* The per-kind launch of pass 1. */
static void
grad_norm_pieces(const amp_launch &a, double p, double *part,
                 cudaStream_t stream)
{
    int32_t blocks = a.first_block[a.n];
    if (p == 2.0) {
        grad_norm_piece_kernel<NORM_2><<<blocks, AMP_THREADS, 0, stream>>>(
            a, p, part);
    }
    else if (p == 1.0) {
        grad_norm_piece_kernel<NORM_1><<<blocks, AMP_THREADS, 0, stream>>>(
            a, p, part);
    }
    else if (isinf(p) && p > 0) {
        grad_norm_piece_kernel<NORM_INF>
            <<<blocks, AMP_THREADS, 0, stream>>>(a, p, part);
    }
    else if (isinf(p)) {
        grad_norm_piece_kernel<NORM_NEG_INF>
            <<<blocks, AMP_THREADS, 0, stream>>>(a, p, part);
    }
    else if (p == 0.0) {
        grad_norm_piece_kernel<NORM_0><<<blocks, AMP_THREADS, 0, stream>>>(
            a, p, part);
    }
    else {
        grad_norm_piece_kernel<NORM_P><<<blocks, AMP_THREADS, 0, stream>>>(
            a, p, part);
    }
}

/* l: n >= 1 tensors (device pointers) -> *total (device, out_dt).  Scratch:
 * the parts of one launch and the n per-tensor norms. */
extern "C" int
ampc_grad_norm_cuda(const ampc_tensor_list *l, double p, const float *scale,
                    ampc_dtype out_dt, void *total)
{
    if (l->n < 1) {
        ampc_cuda_record_error(__FILE__, __LINE__, "grad_norm: no tensor",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    cudaStream_t stream = ampc_cuda_stream();
    /* the largest launch's block count sizes the parts buffer */
    amp_launch a;
    int64_t next = 0;
    int32_t max_blocks = 1;
    while (next < l->n) {
        amp_launch_fill(&a, l, &next);
        if (a.first_block[a.n] > max_blocks) {
            max_blocks = a.first_block[a.n];
        }
    }
    void *part = NULL, *tn = NULL;
    int rc = ampc_cuda_scratch_alloc((size_t)max_blocks * sizeof(double),
                                     &part);
    if (rc != 0) {
        return rc;
    }
    rc = ampc_cuda_scratch_alloc((size_t)l->n * sizeof(double), &tn);
    if (rc != 0) {
        ampc_cuda_scratch_free(part);
        return rc;
    }
    next = 0;
    while (rc == 0 && next < l->n) {
        int64_t first = next;
        amp_launch_fill(&a, l, &next);
        /* blocks-free launches still run pass 2: empty tensors get the
         * norm of no element */
        if (a.first_block[a.n] > 0) {
            grad_norm_pieces(a, p, (double *)part, stream);
            rc = (int)cudaGetLastError();
        }
        if (rc == 0) {
            grad_norm_tensor_kernel<<<a.n, AMP_THREADS, 0, stream>>>(
                a, p, scale, (const double *)part, (double *)tn + first);
            rc = (int)cudaGetLastError();
        }
    }
    if (rc == 0) {
        grad_norm_total_kernel<<<1, AMP_THREADS, 0, stream>>>(
            (const double *)tn, l->n, p, out_dt, total);
        rc = (int)cudaGetLastError();
    }
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "grad_norm launch", rc);
    }
    /* stream-ordered: the blocks are reused only by later work */
    ampc_cuda_scratch_free(tn);
    ampc_cuda_scratch_free(part);
    return rc;
}

/* total_norm: one device element of norm_dt; scale (or NULL), coef: one
 * device float each. */
extern "C" int
ampc_clip_coef_cuda(const void *total_norm, ampc_dtype norm_dt,
                    double max_norm, const float *scale, float *coef)
{
    clip_coef_kernel<<<1, 1, 0, ampc_cuda_stream()>>>(total_norm, norm_dt,
                                                       max_norm, scale, coef);
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
