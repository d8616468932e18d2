/* scan.cu - cumsum and cumprod on the GPU (kernels_cuda.h
 * ampc_cuda_scan_fn); csrc/cpu/ref/scan.c is the CPU version.  Below them,
 * cummax and cummin (ampc_cuda_scan_minmax_fn, CPU: cpu/ref/
 * scan_minmax.c) in the same two shapes, scanning (value, position) pairs
 * by stats_math.h's rule.  The running
 * value has the CPU's type (double for float32, float for float16 and
 * bfloat16, wrapping uint64 for int64) and each output is rounded once.
 * Two shapes of work:
 * - columns (inner > 1, or short rows): a thread per line walks down it,
 *   neighbouring threads on neighbouring columns (coalesced);
 * - long rows (inner == 1): a block per row scans tiles of SCAN_ITEMS *
 *   SCAN_THREADS elements with cub::BlockScan, carrying the tile's total
 *   into the next.
 */
#include <cub/block/block_scan.cuh>

#include "nn_common.cuh"
#include "stats_math.h"

#define SCAN_THREADS 256
#define SCAN_ITEMS 4
/* rows up to this long take the column kernel (a thread per row) */
#define SCAN_SHORT_ROW 64

// ----------------------------------------------------------------------------
// per-dtype storage, running value, widening and rounding

/* float16 and bfloat16: a float running value, nn_common.cuh's
 * conversions */
template <ampc_dtype DT> struct ScanT {
    using T = nn_t<DT>;
    using A = float;
    static __device__ __forceinline__ A load(T v) { return nn_load<DT>(v); }
    static __device__ __forceinline__ T store(A a) { return nn_store<DT>(a); }
};

template <> struct ScanT<AMPC_FLOAT32> {
    using T = float;
    using A = double;
    static __device__ __forceinline__ A load(T v) { return (A)v; }
    static __device__ __forceinline__ T store(A a) { return (float)a; }
};

template <> struct ScanT<AMPC_INT64> {
    using T = int64_t;
    using A = unsigned long long;   /* wraps, as the CPU's uint64_t */
    static __device__ __forceinline__ A load(T v) { return (A)v; }
    static __device__ __forceinline__ T store(A a) { return (T)a; }
};

template <typename A, bool PROD> struct ScanOp {
    __device__ __forceinline__ A
    operator()(const A &a, const A &b) const
    {
        if constexpr (PROD) {
            return a * b;
        }
        else {
            return a + b;
        }
    }
};

// ----------------------------------------------------------------------------
// CUDA kernels

/* x, out (outer, n, inner): a thread per line (o, i) */
template <ampc_dtype DT, bool PROD>
__global__ void
scan_cols_kernel(int64_t lines, int64_t n, int64_t inner,
                 const typename ScanT<DT>::T *x, typename ScanT<DT>::T *out)
{
    using S = ScanT<DT>;
    using A = typename S::A;
    ScanOp<A, PROD> op;
    for (int64_t l = nn_tid(); l < lines; l += nn_nthreads()) {
        int64_t o = l / inner, i = l % inner;
        int64_t base = o * n * inner + i;
        A acc = PROD ? (A)1 : (A)0;
        for (int64_t j = 0; j < n; j++) {
            acc = op(acc, S::load(x[base + j * inner]));
            out[base + j * inner] = S::store(acc);
        }
    }
}

/* The running total carried from tile to tile of one row: thread 0's
 * answer is the prefix of the tile, and the total moves on. */
template <typename A, bool PROD> struct ScanCarry {
    A total;

    __device__ __forceinline__ A
    operator()(A tile_total)
    {
        A before = total;
        total = ScanOp<A, PROD>()(total, tile_total);
        return before;
    }
};

/* x, out (rows, n): a block per row, grid-stride over rows */
template <ampc_dtype DT, bool PROD>
__global__ void __launch_bounds__(SCAN_THREADS)
scan_rows_kernel(int64_t rows, int64_t n, const typename ScanT<DT>::T *x,
                 typename ScanT<DT>::T *out)
{
    using S = ScanT<DT>;
    using A = typename S::A;
    using BlockScan = cub::BlockScan<A, SCAN_THREADS>;
    __shared__ typename BlockScan::TempStorage temp;
    ScanOp<A, PROD> op;
    const A identity = PROD ? (A)1 : (A)0;
    const int64_t tile = (int64_t)SCAN_THREADS * SCAN_ITEMS;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const typename S::T *xr = x + r * n;
        typename S::T *orow = out + r * n;
        ScanCarry<A, PROD> carry = {identity};
        for (int64_t t0 = 0; t0 < n; t0 += tile) {
            /* each thread's SCAN_ITEMS neighbours, scanned in order */
            int64_t first = t0 + (int64_t)threadIdx.x * SCAN_ITEMS;
            A v[SCAN_ITEMS];
            A run = identity;
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; k++) {
                A e = first + k < n ? S::load(xr[first + k]) : identity;
                run = op(run, e);
                v[k] = run;
            }
            A before;
            BlockScan(temp).ExclusiveScan(run, before, op, carry);
            __syncthreads();    /* temp is reused by the next tile */
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; k++) {
                if (first + k < n) {
                    orow[first + k] = S::store(op(before, v[k]));
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

template <ampc_dtype DT, bool PROD>
static int
scan_launch(int64_t outer, int64_t n, int64_t inner, const void *x,
            void *out)
{
    using T = typename ScanT<DT>::T;
    cudaStream_t stream = ampc_cuda_stream();
    const T *xt = static_cast<const T *>(x);
    T *ot = static_cast<T *>(out);
    if (inner > 1 || n <= SCAN_SHORT_ROW) {
        int64_t lines = outer * inner;
        scan_cols_kernel<DT, PROD>
            <<<nn_blocks(lines, AMPC_NN_THREADS), AMPC_NN_THREADS, 0,
               stream>>>(lines, n, inner, xt, ot);
    }
    else {
        int blocks = (int)(outer < AMPC_NN_MAX_BLOCKS ? outer
                                                      : AMPC_NN_MAX_BLOCKS);
        scan_rows_kernel<DT, PROD>
            <<<blocks, SCAN_THREADS, 0, stream>>>(outer, n, xt, ot);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

template <ampc_dtype DT>
static int
scan_dtype(ampc_scan_op op, int64_t outer, int64_t n, int64_t inner,
           const void *x, void *out)
{
    if (op == AMPC_SCAN_PROD) {
        return scan_launch<DT, true>(outer, n, inner, x, out);
    }
    return scan_launch<DT, false>(outer, n, inner, x, out);
}

/* x, out (outer, n, inner) of dt */
extern "C" int
ampc_scan_cuda(ampc_scan_op op, ampc_dtype dt, int64_t outer, int64_t n,
               int64_t inner, const void *x, void *out)
{
    if (outer == 0 || n == 0 || inner == 0) {
        return 0;
    }
    switch (dt) {
    case AMPC_FLOAT32:
        return scan_dtype<AMPC_FLOAT32>(op, outer, n, inner, x, out);
    case AMPC_FLOAT16:
        return scan_dtype<AMPC_FLOAT16>(op, outer, n, inner, x, out);
    case AMPC_BFLOAT16:
        return scan_dtype<AMPC_BFLOAT16>(op, outer, n, inner, x, out);
    default:
        return scan_dtype<AMPC_INT64>(op, outer, n, inner, x, out);
    }
}

// ----------------------------------------------------------------------------
// cummax and cummin: the running value and its position

/* per dtype: the storage T and the compared value V (floats compare in
 * float32, exactly), with stats_math.h's rule */
template <ampc_dtype DT> struct MinMaxT {
    using T = nn_t<DT>;
    using V = float;
    static __device__ __forceinline__ V load(T v) { return nn_load<DT>(v); }
    static __device__ __forceinline__ bool
    takes(bool is_min, V x, V best)
    {
        return ampc_cummax_takes(is_min, x, best);
    }
};

template <> struct MinMaxT<AMPC_INT64> {
    using T = int64_t;
    using V = int64_t;
    static __device__ __forceinline__ V load(T v) { return v; }
    static __device__ __forceinline__ bool
    takes(bool is_min, V x, V best)
    {
        return ampc_cummax_takes_i64(is_min, x, best);
    }
};

template <> struct MinMaxT<AMPC_BOOL> {
    using T = uint8_t;
    using V = int64_t;
    static __device__ __forceinline__ V load(T v) { return (V)v; }
    static __device__ __forceinline__ bool
    takes(bool is_min, V x, V best)
    {
        return ampc_cummax_takes_i64(is_min, x, best);
    }
};

/* A running value: its bits, its compared value and its position (-1: the
 * empty pair, before any element) */
template <ampc_dtype DT> struct MinMaxPair {
    typename MinMaxT<DT>::T raw;
    typename MinMaxT<DT>::V v;
    int64_t at;
};

/* a then b (b later): the rule picks the greatest pair, so it is
 * associative and cub may group the pairs */
template <ampc_dtype DT, bool MIN> struct MinMaxOp {
    __device__ __forceinline__ MinMaxPair<DT>
    operator()(const MinMaxPair<DT> &a, const MinMaxPair<DT> &b) const
    {
        if (b.at < 0) {
            return a;
        }
        if (a.at < 0) {
            return b;
        }
        return MinMaxT<DT>::takes(MIN, b.v, a.v) ? b : a;
    }
};

/* x, values, indices (outer, n, inner): a thread per line (o, i) */
template <ampc_dtype DT, bool MIN>
__global__ void
minmax_cols_kernel(int64_t lines, int64_t n, int64_t inner,
                   const typename MinMaxT<DT>::T *x,
                   typename MinMaxT<DT>::T *values, int64_t *indices)
{
    using M = MinMaxT<DT>;
    for (int64_t l = nn_tid(); l < lines; l += nn_nthreads()) {
        int64_t o = l / inner, i = l % inner;
        int64_t base = o * n * inner + i;
        typename M::T raw = x[base];
        typename M::V best = M::load(raw);
        int64_t at = 0;
        for (int64_t j = 0; j < n; j++) {
            typename M::T e = x[base + j * inner];
            typename M::V v = M::load(e);
            if (M::takes(MIN, v, best)) {
                best = v;
                raw = e;
                at = j;
            }
            values[base + j * inner] = raw;
            indices[base + j * inner] = at;
        }
    }
}

/* The pair carried from tile to tile of one row (scan_rows_kernel's
 * ScanCarry for pairs) */
template <ampc_dtype DT, bool MIN> struct MinMaxCarry {
    MinMaxPair<DT> total;

    __device__ __forceinline__ MinMaxPair<DT>
    operator()(MinMaxPair<DT> tile_total)
    {
        MinMaxPair<DT> before = total;
        total = MinMaxOp<DT, MIN>()(total, tile_total);
        return before;
    }
};

/* x, values, indices (rows, n): a block per row, grid-stride over rows */
template <ampc_dtype DT, bool MIN>
__global__ void __launch_bounds__(SCAN_THREADS)
minmax_rows_kernel(int64_t rows, int64_t n, const typename MinMaxT<DT>::T *x,
                   typename MinMaxT<DT>::T *values, int64_t *indices)
{
    using M = MinMaxT<DT>;
    using P = MinMaxPair<DT>;
    using BlockScan = cub::BlockScan<P, SCAN_THREADS>;
    __shared__ typename BlockScan::TempStorage temp;
    MinMaxOp<DT, MIN> op;
    P none = {};
    none.at = -1;
    const int64_t tile = (int64_t)SCAN_THREADS * SCAN_ITEMS;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const typename M::T *xr = x + r * n;
        MinMaxCarry<DT, MIN> carry = {none};
        for (int64_t t0 = 0; t0 < n; t0 += tile) {
            int64_t first = t0 + (int64_t)threadIdx.x * SCAN_ITEMS;
            P v[SCAN_ITEMS];
            P run = none;
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; k++) {
                P e = none;
                if (first + k < n) {
                    e.raw = xr[first + k];
                    e.v = M::load(e.raw);
                    e.at = first + k;
                }
                run = op(run, e);
                v[k] = run;
            }
            P before;
            BlockScan(temp).ExclusiveScan(run, before, op, carry);
            __syncthreads();    /* temp is reused by the next tile */
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; k++) {
                if (first + k < n) {
                    P out = op(before, v[k]);
                    values[r * n + first + k] = out.raw;
                    indices[r * n + first + k] = out.at;
                }
            }
        }
    }
}

template <ampc_dtype DT, bool MIN>
static int
minmax_launch(int64_t outer, int64_t n, int64_t inner, const void *x,
              void *values, int64_t *indices)
{
    using T = typename MinMaxT<DT>::T;
    cudaStream_t stream = ampc_cuda_stream();
    const T *xt = static_cast<const T *>(x);
    T *vt = static_cast<T *>(values);
    if (inner > 1 || n <= SCAN_SHORT_ROW) {
        int64_t lines = outer * inner;
        minmax_cols_kernel<DT, MIN>
            <<<nn_blocks(lines, AMPC_NN_THREADS), AMPC_NN_THREADS, 0,
               stream>>>(lines, n, inner, xt, vt, indices);
    }
    else {
        int blocks = (int)(outer < AMPC_NN_MAX_BLOCKS ? outer
                                                      : AMPC_NN_MAX_BLOCKS);
        minmax_rows_kernel<DT, MIN>
            <<<blocks, SCAN_THREADS, 0, stream>>>(outer, n, xt, vt, indices);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

template <ampc_dtype DT>
static int
minmax_dtype(int is_min, int64_t outer, int64_t n, int64_t inner,
             const void *x, void *values, int64_t *indices)
{
    if (is_min) {
        return minmax_launch<DT, true>(outer, n, inner, x, values, indices);
    }
    return minmax_launch<DT, false>(outer, n, inner, x, values, indices);
}

/* x, values, indices (outer, n, inner); x and values of dt */
extern "C" int
ampc_scan_minmax_cuda(int is_min, ampc_dtype dt, int64_t outer, int64_t n,
                      int64_t inner, const void *x, void *values,
                      int64_t *indices)
{
    if (outer == 0 || n == 0 || inner == 0) {
        return 0;
    }
    switch (dt) {
    case AMPC_FLOAT32:
        return minmax_dtype<AMPC_FLOAT32>(is_min, outer, n, inner, x, values,
                                          indices);
    case AMPC_FLOAT16:
        return minmax_dtype<AMPC_FLOAT16>(is_min, outer, n, inner, x, values,
                                          indices);
    case AMPC_BFLOAT16:
        return minmax_dtype<AMPC_BFLOAT16>(is_min, outer, n, inner, x,
                                           values, indices);
    case AMPC_INT64:
        return minmax_dtype<AMPC_INT64>(is_min, outer, n, inner, x, values,
                                        indices);
    default:
        return minmax_dtype<AMPC_BOOL>(is_min, outer, n, inner, x, values,
                                       indices);
    }
}
