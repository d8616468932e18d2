/* reduce.cu - sum, mean, max, min, argmax, argmin and prod over the
 * middle axis of a contiguous (outer, r, inner) array on the GPU, with the
 * CPU's rules (csrc/cpu/ref/reduce.c): float32 accumulation folded into
 * double for the float dtypes (products in double throughout), wrapping
 * int64 sums and products, a NaN wins max and min, ties keep the first
 * index.  Deterministic: r is cut into segments fixed by the shape
 * alone, each reduced by a fixed tree, and the segments are folded in
 * order by a second kernel (no atomics).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.cuh"
#include "elementwise_math.h"

#define RED_WARP 32
#define RED_THREADS 256         /* 8 warps: 8 rows, or 32 cols x 8 lanes */
#define RED_LANES_Y 8           /* r-lanes per column tile (cols kernel) */
#define RED_UNROLL 8            /* loads in flight per thread (rows) */
#define RED_MAX_BLOCKS 8192
/* r up to this: one thread per output (red_serial_kernel) */
#define RED_SERIAL_R 16
/* Enough independent work to fill a GPU: warps (rows) or column tiles
 * (cols) across all segments; fewer and r is cut into segments. */
#define RED_TARGET_WARPS 4096
#define RED_TARGET_TILES 2048

// ----------------------------------------------------------------------------
// per-dtype loads: the float dtypes as float, int64 and bool as int64

template <typename T> struct RNum;

template <> struct RNum<float> {
    using V = float;            /* the compared value */
    using S = double;           /* the sum */
    static __device__ __forceinline__ float load(const float *p)
    {
        return *p;
    }
};

template <> struct RNum<__half> {
    using V = float;
    using S = double;
    static __device__ __forceinline__ float load(const __half *p)
    {
        return __half2float(*p);
    }
};

template <> struct RNum<__nv_bfloat16> {
    using V = float;
    using S = double;
    static __device__ __forceinline__ float load(const __nv_bfloat16 *p)
    {
        return __bfloat162float(*p);
    }
};

template <> struct RNum<int64_t> {
    using V = int64_t;
    using S = uint64_t;
    static __device__ __forceinline__ int64_t load(const int64_t *p)
    {
        return *p;
    }
};

template <> struct RNum<uint8_t> {
    using V = int64_t;
    using S = uint64_t;
    static __device__ __forceinline__ int64_t load(const uint8_t *p)
    {
        return *p != 0;
    }
};

// ----------------------------------------------------------------------------
// the one-pair rules

/* Does candidate (v, i) beat the best (b, bi) for max (or min)?  A NaN
 * beats a number, nothing beats a NaN but an earlier NaN, and among equal
 * values the earlier index wins.  Candidates arrive in any order (tree
 * combines), so the index decides ties explicitly. */
template <typename V>
__device__ __forceinline__ bool
red_beats(bool is_max, V v, int64_t i, V b, int64_t bi)
{
    bool vnan = v != v, bnan = b != b;
    if (vnan || bnan) {
        return vnan && (!bnan || i < bi);
    }
    if (v == b) {
        return i < bi;
    }
    return is_max ? v > b : v < b;
}

/* One output from its sum (float dtypes: rounded once from double). */
template <typename T>
__device__ __forceinline__ void
red_store_sum(ampc_dtype dt, ampc_reduce_op op, int64_t r,
              typename RNum<T>::S s, void *out)
{
    if constexpr (std::is_same<typename RNum<T>::S, double>::value) {
        double d = op == AMPC_RED_MEAN ? s / (double)r : s;
        ampc_store_f64(dt, out, d);
    }
    else if (op == AMPC_RED_MEAN) {
        *(int64_t *)out = ampc_f64_to_i64((double)(int64_t)s / (double)r);
    }
    else {
        *(int64_t *)out = (int64_t)s;
    }
}

/* MAX/MIN copy the element itself (a NaN keeps its payload; bool as
 * 0/1); every extreme op writes its index where asked. */
template <typename T>
__device__ __forceinline__ void
red_store_extreme(ampc_reduce_op op, const T *elem, int64_t i, T *out,
                  int64_t *idx)
{
    if (op == AMPC_RED_MAX || op == AMPC_RED_MIN) {
        if constexpr (std::is_same<T, uint8_t>::value) {
            *out = *elem != 0;
        }
        else {
            *out = *elem;
        }
    }
    if (idx != nullptr) {
        *idx = i;
    }
}

/* Sums add, products multiply. */
template <typename S>
__device__ __forceinline__ S
red_join(bool prod, S a, S b)
{
    return prod ? a * b : a + b;
}

template <typename S>
__device__ __forceinline__ S
warp_join(bool prod, S v)
{
    for (int w = RED_WARP / 2; w > 0; w /= 2) {
        v = red_join(prod, v, __shfl_xor_sync(0xffffffffu, v, w));
    }
    return v;
}

template <typename V>
__device__ __forceinline__ void
warp_extreme(bool is_max, V *v, int64_t *i)
{
    for (int w = RED_WARP / 2; w > 0; w /= 2) {
        V ov = __shfl_xor_sync(0xffffffffu, *v, w);
        int64_t oi = __shfl_xor_sync(0xffffffffu, *i, w);
        if (red_beats(is_max, ov, oi, *v, *i)) {
            *v = ov;
            *i = oi;
        }
    }
}

/* The reduction's geometry and outputs, shared by the kernels below. */
struct RedArgs {
    ampc_reduce_op op;
    ampc_dtype dt;
    int64_t outer, r, inner;
    int64_t seg;        /* elements of r per segment */
    int64_t nseg;       /* segments: 1 writes the outputs directly */
    void *part;         /* nseg > 1: (nseg, outer, inner) 8-byte partials */
    void *out;
    int64_t *idx;
};

// ----------------------------------------------------------------------------
// CUDA kernels

/* x (outer, r) rows (inner == 1): one warp per (row, segment); lanes take
 * every 32nd element, RED_UNROLL loads at a time; a float32 sum of those
 * loads is folded into the lane's double (as the CPU folds its float32
 * lanes; a product stays in double), then a shuffle tree. */
template <typename T>
__global__ void
red_sum_rows_kernel(RedArgs a, const T *__restrict__ x)
{
    using S = typename RNum<T>::S;
    const bool prod = a.op == AMPC_RED_PROD;
    const int lane = threadIdx.x % RED_WARP;
    const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / RED_WARP);
    const int64_t items = a.outer * a.nseg;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) /
                     RED_WARP;
         w < items; w += nwarps) {
        int64_t o = w / a.nseg, s = w % a.nseg;
        int64_t k0 = s * a.seg;
        int64_t k1 = k0 + a.seg < a.r ? k0 + a.seg : a.r;
        const T *row = x + o * a.r;
        S acc = prod ? 1 : 0;
        for (int64_t k = k0 + lane; k < k1; k += RED_WARP * RED_UNROLL) {
            if (prod) {
#pragma unroll
                for (int u = 0; u < RED_UNROLL; u++) {
                    int64_t kk = k + (int64_t)u * RED_WARP;
                    if (kk < k1) {
                        acc *= (S)RNum<T>::load(row + kk);
                    }
                }
                continue;
            }
            /* float32 for the float dtypes (the CPU's lanes), else the
             * wrapping uint64 sum itself */
            typename std::conditional<std::is_same<S, double>::value, float,
                                      uint64_t>::type part = 0;
#pragma unroll
            for (int u = 0; u < RED_UNROLL; u++) {
                int64_t kk = k + (int64_t)u * RED_WARP;
                if (kk < k1) {
                    part += RNum<T>::load(row + kk);
                }
            }
            acc += (S)part;
        }
        acc = warp_join(prod, acc);
        if (lane == 0) {
            if (a.nseg > 1) {
                ((S *)a.part)[s * a.outer + o] = acc;
            }
            else {
                size_t oes = std::is_same<S, double>::value ? sizeof(T) : 8;
                red_store_sum<T>(a.dt, a.op, a.r, acc,
                                 (char *)a.out + o * (int64_t)oes);
            }
        }
    }
}

/* Rows, max/min/argmax/argmin: each lane keeps its first best, the warp
 * combines by red_beats. */
template <typename T>
__global__ void
red_extreme_rows_kernel(RedArgs a, const T *__restrict__ x)
{
    using V = typename RNum<T>::V;
    const bool is_max = a.op == AMPC_RED_MAX || a.op == AMPC_RED_ARGMAX;
    const int lane = threadIdx.x % RED_WARP;
    const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / RED_WARP);
    const int64_t items = a.outer * a.nseg;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) /
                     RED_WARP;
         w < items; w += nwarps) {
        int64_t o = w / a.nseg, s = w % a.nseg;
        int64_t k0 = s * a.seg;
        int64_t k1 = k0 + a.seg < a.r ? k0 + a.seg : a.r;
        const T *row = x + o * a.r;
        /* every lane starts from the segment's first element (index k0),
         * which only a better value displaces: a lane with nothing to read
         * reports a true candidate */
        V best = RNum<T>::load(row + k0);
        int64_t bi = k0;
        for (int64_t k = k0 + lane; k < k1; k += RED_WARP) {
            V v = RNum<T>::load(row + k);
            if (red_beats(is_max, v, k, best, bi)) {
                best = v;
                bi = k;
            }
        }
        warp_extreme(is_max, &best, &bi);
        if (lane == 0) {
            if (a.nseg > 1) {
                ((int64_t *)a.part)[s * a.outer + o] = bi;
            }
            else {
                red_store_extreme<T>(a.op, row + bi, bi, (T *)a.out + o,
                                     a.idx == nullptr ? nullptr : a.idx + o);
            }
        }
    }
}

/* x (outer, r, inner), inner > 1: a block is 32 columns x RED_LANES_Y
 * r-lanes; column j of tile t is read with stride inner (coalesced across
 * the 32 columns), lane y takes every RED_LANES_Y-th row of the segment,
 * and lanes fold in order 0, 1, ... through shared memory.  grid.x walks
 * (outer, tile) pairs, grid.y the segments. */
template <typename T>
__global__ void
red_sum_cols_kernel(RedArgs a, const T *__restrict__ x)
{
    using S = typename RNum<T>::S;
    __shared__ S sh[RED_LANES_Y][RED_WARP];
    const bool prod = a.op == AMPC_RED_PROD;
    const int tx = threadIdx.x % RED_WARP, ty = threadIdx.x / RED_WARP;
    const int64_t ntiles = CEIL_DIV(a.inner, (int64_t)RED_WARP);
    const int64_t s = blockIdx.y;
    const int64_t k0 = s * a.seg;
    const int64_t k1 = k0 + a.seg < a.r ? k0 + a.seg : a.r;
    for (int64_t item = blockIdx.x; item < a.outer * ntiles;
         item += gridDim.x) {
        int64_t o = item / ntiles;
        int64_t j = (item % ntiles) * RED_WARP + tx;
        S acc = prod ? 1 : 0;
        if (j < a.inner) {
            const T *p = x + (o * a.r + k0 + ty) * a.inner + j;
            const int64_t step = (int64_t)RED_LANES_Y * a.inner;
            for (int64_t k = k0 + ty; k < k1; k += RED_LANES_Y, p += step) {
                acc = red_join(prod, acc, (S)RNum<T>::load(p));
            }
        }
        sh[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && j < a.inner) {
            for (int y = 1; y < RED_LANES_Y; y++) {
                acc = red_join(prod, acc, sh[y][tx]);
            }
            int64_t at = o * a.inner + j;
            if (a.nseg > 1) {
                ((S *)a.part)[s * a.outer * a.inner + at] = acc;
            }
            else {
                size_t oes = std::is_same<S, double>::value ? sizeof(T) : 8;
                red_store_sum<T>(a.dt, a.op, a.r, acc,
                                 (char *)a.out + at * (int64_t)oes);
            }
        }
        __syncthreads();
    }
}

template <typename T>
__global__ void
red_extreme_cols_kernel(RedArgs a, const T *__restrict__ x)
{
    using V = typename RNum<T>::V;
    __shared__ V shv[RED_LANES_Y][RED_WARP];
    __shared__ int64_t shi[RED_LANES_Y][RED_WARP];
    const bool is_max = a.op == AMPC_RED_MAX || a.op == AMPC_RED_ARGMAX;
    const int tx = threadIdx.x % RED_WARP, ty = threadIdx.x / RED_WARP;
    const int64_t ntiles = CEIL_DIV(a.inner, (int64_t)RED_WARP);
    const int64_t s = blockIdx.y;
    const int64_t k0 = s * a.seg;
    const int64_t k1 = k0 + a.seg < a.r ? k0 + a.seg : a.r;
    for (int64_t item = blockIdx.x; item < a.outer * ntiles;
         item += gridDim.x) {
        int64_t o = item / ntiles;
        int64_t j = (item % ntiles) * RED_WARP + tx;
        V best = 0;
        int64_t bi = k0;
        if (j < a.inner) {
            const T *col = x + o * a.r * a.inner + j;
            best = RNum<T>::load(col + k0 * a.inner);
            const T *p = col + (k0 + ty) * a.inner;
            const int64_t step = (int64_t)RED_LANES_Y * a.inner;
            for (int64_t k = k0 + ty; k < k1; k += RED_LANES_Y, p += step) {
                V v = RNum<T>::load(p);
                if (red_beats(is_max, v, k, best, bi)) {
                    best = v;
                    bi = k;
                }
            }
        }
        shv[ty][tx] = best;
        shi[ty][tx] = bi;
        __syncthreads();
        if (ty == 0 && j < a.inner) {
            for (int y = 1; y < RED_LANES_Y; y++) {
                if (red_beats(is_max, shv[y][tx], shi[y][tx], best, bi)) {
                    best = shv[y][tx];
                    bi = shi[y][tx];
                }
            }
            int64_t at = o * a.inner + j;
            if (a.nseg > 1) {
                ((int64_t *)a.part)[s * a.outer * a.inner + at] = bi;
            }
            else {
                const T *col = x + o * a.r * a.inner + j;
                red_store_extreme<T>(a.op, col + bi * a.inner, bi,
                                     (T *)a.out + at,
                                     a.idx == nullptr ? nullptr
                                                      : a.idx + at);
            }
        }
        __syncthreads();
    }
}

/* Short reductions (r <= RED_SERIAL_R): one thread per output (o, j)
 * walks k = 0 .. r-1 in order, so a warp is not spent on a few elements;
 * neighbouring threads read neighbouring j (or, for rows, rows r apart,
 * which share cache lines). */
template <typename T>
__global__ void
red_serial_kernel(RedArgs a, const T *__restrict__ x)
{
    using S = typename RNum<T>::S;
    using V = typename RNum<T>::V;
    const bool is_sum = a.op == AMPC_RED_SUM || a.op == AMPC_RED_MEAN;
    const bool is_max = a.op == AMPC_RED_MAX || a.op == AMPC_RED_ARGMAX;
    const int64_t nout = a.outer * a.inner;
    for (int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         at < nout; at += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = at / a.inner, j = at % a.inner;
        const T *col = x + o * a.r * a.inner + j;
        size_t oes = std::is_same<S, double>::value ? sizeof(T) : 8;
        if (a.op == AMPC_RED_PROD) {
            S acc = 1;
            for (int64_t k = 0; k < a.r; k++) {
                acc *= (S)RNum<T>::load(col + k * a.inner);
            }
            red_store_sum<T>(a.dt, a.op, a.r, acc,
                             (char *)a.out + at * (int64_t)oes);
            continue;
        }
        if (is_sum) {
            /* in order, in float32 for the float dtypes: the CPU's column
             * loop exactly (r <= 16 is within one of its float32 runs) */
            typename std::conditional<std::is_same<S, double>::value, float,
                                      uint64_t>::type part = 0;
            for (int64_t k = 0; k < a.r; k++) {
                part += RNum<T>::load(col + k * a.inner);
            }
            S acc = (S)part;
            red_store_sum<T>(a.dt, a.op, a.r, acc,
                             (char *)a.out + at * (int64_t)oes);
            continue;
        }
        V best = RNum<T>::load(col);
        int64_t bi = 0;
        for (int64_t k = 1; k < a.r; k++) {
            V v = RNum<T>::load(col + k * a.inner);
            if (red_beats(is_max, v, k, best, bi)) {
                best = v;
                bi = k;
            }
        }
        red_store_extreme<T>(a.op, col + bi * a.inner, bi, (T *)a.out + at,
                             a.idx == nullptr ? nullptr : a.idx + at);
    }
}

/* Folds the nseg partials (nseg, outer, inner) of each output in segment
 * order: one thread per output. */
template <typename T>
__global__ void
red_fold_kernel(RedArgs a, const T *__restrict__ x)
{
    using S = typename RNum<T>::S;
    using V = typename RNum<T>::V;
    const bool prod = a.op == AMPC_RED_PROD;
    const bool is_sum = a.op == AMPC_RED_SUM || a.op == AMPC_RED_MEAN || prod;
    const bool is_max = a.op == AMPC_RED_MAX || a.op == AMPC_RED_ARGMAX;
    const int64_t nout = a.outer * a.inner;
    for (int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         at < nout; at += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = at / a.inner, j = at % a.inner;
        const T *col = x + o * a.r * a.inner + j;
        if (is_sum) {
            S acc = prod ? 1 : 0;
            for (int64_t s = 0; s < a.nseg; s++) {
                acc = red_join(prod, acc, ((const S *)a.part)[s * nout + at]);
            }
            size_t oes = std::is_same<S, double>::value ? sizeof(T) : 8;
            red_store_sum<T>(a.dt, a.op, a.r, acc,
                             (char *)a.out + at * (int64_t)oes);
            continue;
        }
        int64_t bi = ((const int64_t *)a.part)[at];
        V best = RNum<T>::load(col + bi * a.inner);
        for (int64_t s = 1; s < a.nseg; s++) {
            int64_t i = ((const int64_t *)a.part)[s * nout + at];
            V v = RNum<T>::load(col + i * a.inner);
            if (red_beats(is_max, v, i, best, bi)) {
                best = v;
                bi = i;
            }
        }
        red_store_extreme<T>(a.op, col + bi * a.inner, bi, (T *)a.out + at,
                             a.idx == nullptr ? nullptr : a.idx + at);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

static unsigned
red_blocks(int64_t work, int64_t per_block)
{
    int64_t b = CEIL_DIV(work, per_block);
    return (unsigned)(b < 1 ? 1 : (b > RED_MAX_BLOCKS ? RED_MAX_BLOCKS : b));
}

/* Segments of r: enough independent items to fill the GPU, each segment a
 * multiple of `quantum` elements (at least min_seg).  From the shape
 * alone, so the result does not depend on the GPU. */
static void
red_segments(RedArgs *a, int64_t items, int64_t target, int64_t min_seg,
             int64_t quantum)
{
    int64_t want = target / (items > 0 ? items : 1);
    int64_t most = CEIL_DIV(a->r, min_seg);
    int64_t nseg = want < most ? want : most;
    nseg = nseg < 1 ? 1 : (nseg > 65535 ? 65535 : nseg);
    a->seg = CEIL_DIV(CEIL_DIV(a->r, nseg), quantum) * quantum;
    a->nseg = CEIL_DIV(a->r, a->seg);
}

/* x (outer, r, inner) -> out (outer, inner), idx (outer, inner) */
template <typename T>
static int
reduce_typed(RedArgs a, const void *x_)
{
    const T *x = (const T *)x_;
    /* products run in the sum kernels, joining by multiplication */
    const bool is_sum = a.op == AMPC_RED_SUM || a.op == AMPC_RED_MEAN ||
                        a.op == AMPC_RED_PROD;
    cudaStream_t stream = ampc_cuda_stream();
    if (a.r <= RED_SERIAL_R) {
        red_serial_kernel<T><<<red_blocks(a.outer * a.inner, RED_THREADS),
                               RED_THREADS, 0, stream>>>(a, x);
        AMPC_CUDA_CHECK_LAUNCH();
        return 0;
    }
    const int rows = a.inner == 1;
    if (rows) {
        red_segments(&a, a.outer, RED_TARGET_WARPS, 2048,
                     RED_WARP * RED_UNROLL);
    }
    else {
        red_segments(&a, a.outer * CEIL_DIV(a.inner, (int64_t)RED_WARP),
                     RED_TARGET_TILES, 64, RED_LANES_Y);
    }
    a.part = nullptr;
    if (a.nseg > 1) {
        size_t nbytes = (size_t)(a.nseg * a.outer * a.inner) * 8;
        AMPC_CUDA_CHECK((cudaError_t)ampc_cuda_scratch_alloc(nbytes,
                                                             &a.part));
    }
    int rc = 0;
    if (rows) {
        unsigned blocks = red_blocks(a.outer * a.nseg,
                                     RED_THREADS / RED_WARP);
        if (is_sum) {
            red_sum_rows_kernel<T><<<blocks, RED_THREADS, 0, stream>>>(a, x);
        }
        else {
            red_extreme_rows_kernel<T><<<blocks, RED_THREADS, 0, stream>>>(
                a, x);
        }
    }
    else {
        int64_t items = a.outer * CEIL_DIV(a.inner, (int64_t)RED_WARP);
        dim3 grid(red_blocks(items, 1), (unsigned)a.nseg);
        if (is_sum) {
            red_sum_cols_kernel<T><<<grid, RED_THREADS, 0, stream>>>(a, x);
        }
        else {
            red_extreme_cols_kernel<T><<<grid, RED_THREADS, 0, stream>>>(a,
                                                                        x);
        }
    }
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && a.nseg > 1) {
        red_fold_kernel<T><<<red_blocks(a.outer * a.inner, RED_THREADS),
                             RED_THREADS, 0, stream>>>(a, x);
        err = cudaGetLastError();
    }
    if (err != cudaSuccess) {
        ampc_cuda_record_error(__FILE__, __LINE__, "reduce kernel launch",
                               (int)err);
        rc = (int)err;
    }
    /* NOTE: freed while the kernels are queued: the caching allocator
     * hands the block only to later work on this stream */
    if (a.part != nullptr) {
        int frc = ampc_cuda_scratch_free(a.part);
        rc = rc != 0 ? rc : frc;
    }
    return rc;
}

// ----------------------------------------------------------------------------
// the slot

extern "C" int
ampc_reduce_cuda(ampc_reduce_op op, ampc_dtype dt, int64_t outer, int64_t r,
                 int64_t inner, const void *x, void *out, int64_t *idx)
{
    if (outer <= 0 || r <= 0 || inner <= 0) {
        return 0;
    }
    RedArgs a = {op, dt, outer, r, inner, 0, 1, nullptr, out, idx};
    switch (dt) {
    case AMPC_FLOAT32:
        return reduce_typed<float>(a, x);
    case AMPC_FLOAT16:
        return reduce_typed<__half>(a, x);
    case AMPC_BFLOAT16:
        return reduce_typed<__nv_bfloat16>(a, x);
    case AMPC_INT64:
        return reduce_typed<int64_t>(a, x);
    default:
        return reduce_typed<uint8_t>(a, x);
    }
}
