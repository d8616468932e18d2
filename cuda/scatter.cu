/* scatter.cu - scatter_reduce on the GPU (kernels_cuda.h
 * ampc_cuda_scatter_reduce_fn); csrc/cpu/ref/scatter.c is the CPU version
 * and csrc/scatter_math.h holds the per-element rules both use.  One thread
 * per index element: sum and mean add with atomicAdd, prod, amax and amin
 * retry a compare-and-swap around scatter_math.h's combine.  Up to three
 * launches, in stream order: the identity written where include_self is
 * false, the reduction, and mean's division (once per element: the thread
 * that takes its count divides).  Bad indices go to the deferred error
 * report (kernels_cuda.h ampc_nn_error), so no launch waits.  The
 * deterministic form sorts the index elements by destination first
 * (sorted_writes.cuh) and combines each destination's values in index
 * order on one thread, as the CPU.
 */
#include "nn_common.cuh"
#include "scatter_math.h"
#include "sorted_writes.cuh"

// ----------------------------------------------------------------------------
// the element rules for the two dtypes, as overloads

__device__ __forceinline__ float
sc_combine(ampc_scatter_op op, float acc, float v)
{
    return ampc_scatter_combine_f32(op, acc, v);
}

__device__ __forceinline__ int64_t
sc_combine(ampc_scatter_op op, int64_t acc, int64_t v)
{
    return ampc_scatter_combine_i64(op, acc, v);
}

__device__ __forceinline__ float
sc_mean(float sum, int64_t n)
{
    return ampc_scatter_mean_f32(sum, n);
}

__device__ __forceinline__ int64_t
sc_mean(int64_t sum, int64_t n)
{
    return ampc_scatter_mean_i64(sum, n);
}

/* The word a compare-and-swap works on, and the element's bits in it. */
__device__ __forceinline__ unsigned int *
sc_word(float *p)
{
    return reinterpret_cast<unsigned int *>(p);
}

__device__ __forceinline__ unsigned long long *
sc_word(int64_t *p)
{
    return reinterpret_cast<unsigned long long *>(p);
}

__device__ __forceinline__ unsigned int
sc_bits(float v)
{
    return __float_as_uint(v);
}

__device__ __forceinline__ unsigned long long
sc_bits(int64_t v)
{
    return (unsigned long long)v;
}

__device__ __forceinline__ float
sc_value(unsigned int u, float)
{
    return __uint_as_float(u);
}

__device__ __forceinline__ int64_t
sc_value(unsigned long long u, int64_t)
{
    return (int64_t)u;
}

__device__ __forceinline__ void
sc_add(float *e, float v)
{
    atomicAdd(e, v);
}

/* (int64 sums wrap: added as unsigned) */
__device__ __forceinline__ void
sc_add(int64_t *e, int64_t v)
{
    atomicAdd(sc_word(e), sc_bits(v));
}

/* *e = *e op v, atomically: atomicAdd for sum and mean, else a
 * compare-and-swap loop, which stops early when the element would not
 * change (amax against a smaller value, or a NaN already there). */
template <ampc_scatter_op OP, typename T>
__device__ __forceinline__ void
atomic_combine(T *e, T v)
{
    if constexpr (OP == AMPC_SCATTER_SUM || OP == AMPC_SCATTER_MEAN) {
        sc_add(e, v);
    }
    else {
        auto *w = sc_word(e);
        auto old = *w, seen = old;
        do {
            seen = old;
            auto want = sc_bits(sc_combine(OP, sc_value(seen, v), v));
            if (want == seen) {
                return;
            }
            old = atomicCAS(w, seen, want);
        } while (old != seen);
    }
}

// ----------------------------------------------------------------------------
// kernels

/* Where index element e goes in t (and mean's counts) and what it reads in
 * src; false (reported, *at unset) when its index is out of range. */
struct scatter_at {
    int64_t t, s, c;
};

__device__ __forceinline__ bool
scatter_offsets(const ampc_scatter_geom &g, const int64_t *idx, int64_t e,
                scatter_at *at, ampc_nn_error *err)
{
    int64_t r = e, i_off = 0, s_off = 0, t_off = 0, c_off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t x = r % g.size[d];
        r /= g.size[d];
        i_off += x * g.i_stride[d];
        s_off += x * g.s_stride[d];
        if (d != g.dim) {
            t_off += x * g.t_stride[d];
            c_off += x * g.c_stride[d];
        }
    }
    int64_t p = idx[i_off];
    if ((uint64_t)p >= (uint64_t)g.dim_size) {
        nn_report(err, p, g.dim_size, AMPC_NN_ERR_INDEX);
        return false;
    }
    at->t = t_off + p * g.t_stride[g.dim];
    at->c = c_off + p * g.c_stride[g.dim];
    at->s = s_off;
    return true;
}

/* include_self false: each scattered element starts from the identity
 * (several threads may write it: the same value) */
template <typename T>
__global__ void
scatter_fill_kernel(ampc_scatter_geom g, int64_t total, T *t,
                    const int64_t *idx, T first, ampc_nn_error *err)
{
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        scatter_at at;
        if (scatter_offsets(g, idx, e, &at, err)) {
            t[at.t] = first;
        }
    }
}

template <typename T, ampc_scatter_op OP>
__global__ void
scatter_reduce_kernel(ampc_scatter_geom g, int64_t total, T *t,
                      const int64_t *idx, const T *src,
                      unsigned long long *cnt, ampc_nn_error *err)
{
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        scatter_at at;
        if (!scatter_offsets(g, idx, e, &at, err)) {
            continue;
        }
        atomic_combine<OP>(t + at.t, src[at.s]);
        if constexpr (OP == AMPC_SCATTER_MEAN) {
            atomicAdd(cnt + at.c, 1ULL);
        }
    }
}

/* mean: each scattered element divided once, by the thread that takes its
 * count (the others find 0); the sums are complete (the launch before). */
template <typename T>
__global__ void
scatter_mean_kernel(ampc_scatter_geom g, int64_t total, T *t,
                    const int64_t *idx, unsigned long long *cnt)
{
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        scatter_at at;
        if (!scatter_offsets(g, idx, e, &at, NULL)) {
            continue;               /* (reported by the launch before) */
        }
        unsigned long long n = atomicExch(cnt + at.c, 0ULL);
        if (n != 0) {
            t[at.t] = sc_mean(t[at.t], (int64_t)n + g.include_self);
        }
    }
}

// ----------------------------------------------------------------------------
// launcher

template <typename T>
static int
scatter_launch(const ampc_scatter_geom *g, ampc_scatter_op op, T *t,
               const int64_t *idx, const T *src, int64_t *count, T first)
{
    int64_t total = 1;
    for (int d = 0; d < g->ndim; d++) {
        total *= g->size[d];
    }
    if (total == 0) {
        return 0;
    }
    ampc_nn_error *err;
    int rc = ampc_nn_error_device(&err);
    if (rc != 0) {
        return rc;
    }
    unsigned blocks = nn_blocks(total, AMPC_NN_THREADS);
    cudaStream_t st = ampc_cuda_stream();
    unsigned long long *cnt = reinterpret_cast<unsigned long long *>(count);
    if (!g->include_self) {
        scatter_fill_kernel<T><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *g, total, t, idx, first, err);
        AMPC_CUDA_CHECK_LAUNCH();
    }
#define REDUCE(OP)                                                          \
    scatter_reduce_kernel<T, OP><<<blocks, AMPC_NN_THREADS, 0, st>>>(       \
        *g, total, t, idx, src, cnt, err)
    switch (op) {
    case AMPC_SCATTER_SUM: REDUCE(AMPC_SCATTER_SUM); break;
    case AMPC_SCATTER_PROD: REDUCE(AMPC_SCATTER_PROD); break;
    case AMPC_SCATTER_MEAN: REDUCE(AMPC_SCATTER_MEAN); break;
    case AMPC_SCATTER_AMAX: REDUCE(AMPC_SCATTER_AMAX); break;
    case AMPC_SCATTER_AMIN: REDUCE(AMPC_SCATTER_AMIN); break;
    default:
        ampc_cuda_record_error(__FILE__, __LINE__, "scatter_reduce: op",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
#undef REDUCE
    AMPC_CUDA_CHECK_LAUNCH();
    if (op == AMPC_SCATTER_MEAN) {
        scatter_mean_kernel<T><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *g, total, t, idx, cnt);
        AMPC_CUDA_CHECK_LAUNCH();
    }
    return 0;
}

// ----------------------------------------------------------------------------
// the deterministic form: sorted by destination

/* keys[e]: index element e's destination offset in t less `base` (the
 * lowest offset, so keys are >= 0), or bad for a bad index (reported);
 * pos[e] = e */
__global__ void
scatter_keys_kernel(ampc_scatter_geom g, int64_t total, const int64_t *idx,
                    int64_t base, sorted_key bad, sorted_key *keys,
                    int64_t *pos, ampc_nn_error *err)
{
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        scatter_at at;
        keys[e] = scatter_offsets(g, idx, e, &at, err)
                      ? (sorted_key)(at.t - base)
                      : bad;
        pos[e] = e;
    }
}

/* One thread per run of one destination: from t's value (include_self) or
 * the identity, each value combined in index order, mean divided by the
 * run's length (plus one with include_self), as the CPU. */
template <typename T, ampc_scatter_op OP>
__global__ void
scatter_sorted_kernel(ampc_scatter_geom g, int64_t total, T *t,
                      const int64_t *idx, const T *src, T first,
                      int64_t base, const sorted_key *keys,
                      const int64_t *pos, sorted_key bad)
{
    for (int64_t i = nn_tid(); i < total; i += nn_nthreads()) {
        if (!sorted_run_head(keys, i, bad)) {
            continue;
        }
        T *e = t + (int64_t)keys[i] + base;
        T acc = g.include_self ? *e : first;
        int64_t n = 0;
        for (int64_t q = i; q < total && keys[q] == keys[i]; q++, n++) {
            scatter_at at;
            scatter_offsets(g, idx, pos[q], &at, NULL);
            acc = sc_combine(OP, acc, src[at.s]);
        }
        if constexpr (OP == AMPC_SCATTER_MEAN) {
            acc = sc_mean(acc, n + g.include_self);
        }
        *e = acc;
    }
}

template <typename T>
static int
scatter_sorted(const ampc_scatter_geom *g, ampc_scatter_op op, T *t,
               const int64_t *idx, const T *src, T first)
{
    int64_t total = 1, lo = 0, hi = 0;
    for (int d = 0; d < g->ndim; d++) {
        total *= g->size[d];
        int64_t extent = (d == g->dim ? g->dim_size : g->size[d]) - 1;
        lo += g->t_stride[d] < 0 ? extent * g->t_stride[d] : 0;
        hi += g->t_stride[d] > 0 ? extent * g->t_stride[d] : 0;
    }
    if (total == 0) {
        return 0;
    }
    ampc_nn_error *err;
    int rc = ampc_nn_error_device(&err);
    sorted_key bad = (sorted_key)(hi - lo) + 1;
    sorted_writes s;
    if (rc != 0 || (rc = sorted_writes_alloc(&s, total, bad)) != 0) {
        return rc;
    }
    unsigned blocks = nn_blocks(total, AMPC_NN_THREADS);
    cudaStream_t st = ampc_cuda_stream();
    scatter_keys_kernel<<<blocks, AMPC_NN_THREADS, 0, st>>>(
        *g, total, idx, lo, bad, s.keys_in, s.pos_in, err);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && (rc = sorted_writes_sort(&s)) != 0) {
        return rc;                  /* (the block is freed) */
    }
#define SORTED(OP)                                                          \
    scatter_sorted_kernel<T, OP><<<blocks, AMPC_NN_THREADS, 0, st>>>(       \
        *g, total, t, idx, src, first, lo, s.keys, s.pos, bad)
    if (e == cudaSuccess) {
        switch (op) {
        case AMPC_SCATTER_SUM: SORTED(AMPC_SCATTER_SUM); break;
        case AMPC_SCATTER_PROD: SORTED(AMPC_SCATTER_PROD); break;
        case AMPC_SCATTER_MEAN: SORTED(AMPC_SCATTER_MEAN); break;
        case AMPC_SCATTER_AMAX: SORTED(AMPC_SCATTER_AMAX); break;
        default: SORTED(AMPC_SCATTER_AMIN); break;
        }
        e = cudaGetLastError();
    }
#undef SORTED
    /* NOTE: freed while the kernels may still run: the caching allocator
     * hands the block only to later work on this stream. */
    ampc_cuda_scratch_free(s.block);
    if (e != cudaSuccess) {
        ampc_cuda_record_error(__FILE__, __LINE__, "scatter_reduce sorted",
                               (int)e);
        return (int)e;
    }
    return 0;
}

extern "C" int
ampc_scatter_reduce_sorted_cuda(const ampc_scatter_geom *g, ampc_dtype dt,
                                ampc_scatter_op op, void *t,
                                const int64_t *idx, const void *src)
{
    if (dt == AMPC_FLOAT32) {
        return scatter_sorted<float>(g, op, (float *)t, idx,
                                     (const float *)src,
                                     ampc_scatter_identity_f32(op));
    }
    if (dt == AMPC_INT64) {
        return scatter_sorted<int64_t>(g, op, (int64_t *)t, idx,
                                       (const int64_t *)src,
                                       ampc_scatter_identity_i64(op));
    }
    ampc_cuda_record_error(__FILE__, __LINE__, "scatter_reduce sorted: dtype",
                           (int)cudaErrorInvalidValue);
    return (int)cudaErrorInvalidValue;
}

extern "C" int
ampc_scatter_reduce_cuda(const ampc_scatter_geom *g, ampc_dtype dt,
                         ampc_scatter_op op, void *t, const int64_t *idx,
                         const void *src, int64_t *count)
{
    if (dt == AMPC_FLOAT32) {
        return scatter_launch<float>(g, op, (float *)t, idx,
                                     (const float *)src, count,
                                     ampc_scatter_identity_f32(op));
    }
    if (dt == AMPC_INT64) {
        return scatter_launch<int64_t>(g, op, (int64_t *)t, idx,
                                       (const int64_t *)src, count,
                                       ampc_scatter_identity_i64(op));
    }
    ampc_cuda_record_error(__FILE__, __LINE__, "scatter_reduce: dtype",
                           (int)cudaErrorInvalidValue);
    return (int)cudaErrorInvalidValue;
}
