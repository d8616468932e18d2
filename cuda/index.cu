/* index.cu - advanced indexing (gather and put at rows of int64 indices)
 * and nonzero on the GPU; csrc/cpu/ref/index.c is the CPU version.  The
 * shapes are kernels.h's ampc_index_geom; bad indices go to the deferred
 * error report (kernels_cuda.h ampc_nn_error), so no launch waits.  A put
 * is a thread per element (an accumulation atomic), or, deterministic,
 * sorted by destination first (sorted_writes.cuh).
 */
#include "nn_common.cuh"
#include "sorted_writes.cuh"

#define NONZERO_THREADS 256         /* a round is one element per thread */
#define NONZERO_WARPS (NONZERO_THREADS / 32)
#define NONZERO_SCAN_THREADS 1024

// ----------------------------------------------------------------------------
// CUDA kernels: gather and put

/* The offsets in t and v of element e of the (n, rest...) iteration; false
 * (reported, *to unset) when its index tuple is out of range. */
/* The offsets in t and v of element r of the rest dims. */
__device__ __forceinline__ void
index_rest_offsets(const ampc_index_geom &g, int64_t r, int64_t *to,
                   int64_t *vo)
{
    int64_t t_off = 0, v_off = 0;
    for (int d = g.nrest - 1; d >= 0; d--) {
        int64_t c = r % g.rest[d];
        r /= g.rest[d];
        t_off += c * g.t_rest_stride[d];
        v_off += c * g.v_rest_stride[d];
    }
    *to = t_off;
    *vo = v_off;
}

__device__ __forceinline__ bool
index_offsets(const ampc_index_geom &g, const int64_t *idx, int64_t e,
              int64_t *to, int64_t *vo, ampc_nn_error *err)
{
    int64_t j = e / g.rest_numel, t_off, v_off;
    index_rest_offsets(g, e - j * g.rest_numel, &t_off, &v_off);
    *vo = v_off + j * g.v_stride;
    for (int d = 0; d < g.k; d++) {
        int64_t i = idx[d * g.n + j];
        int64_t w = i < 0 && g.wrap ? i + g.size[d] : i;
        if ((uint64_t)w >= (uint64_t)g.size[d]) {
            nn_report(err, i, g.size[d], AMPC_NN_ERR_INDEX);
            return false;
        }
        t_off += w * g.stride[d];
    }
    *to = t_off;
    return true;
}

/* A gather (v = t at the index; 0 for a bad index) or a put (t at the
 * index = v); T: an unsigned integer of the element's size (the bits are
 * moved). */
template <typename T, bool GATHER>
__global__ void
index_move_kernel(ampc_index_geom g, T *t, const int64_t *idx, T *v,
                  ampc_nn_error *err)
{
    int64_t total = g.n * g.rest_numel;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t to, vo;
        bool ok = index_offsets(g, idx, e, &to, &vo, err);
        if (GATHER) {
            v[vo] = ok ? t[to] : T(0);
        }
        else if (ok) {
            t[to] = v[vo];
        }
    }
}

/* T float or unsigned long long (int64 adds wrap, as two's complement) */
template <typename T>
__global__ void
index_add_kernel(ampc_index_geom g, T *t, const int64_t *idx, const T *v,
                 ampc_nn_error *err)
{
    int64_t total = g.n * g.rest_numel;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t to, vo;
        if (index_offsets(g, idx, e, &to, &vo, err)) {
            atomicAdd(t + to, v[vo]);
        }
    }
}

// ----------------------------------------------------------------------------
// CUDA kernels: the deterministic put (sorted by destination)

/* keys[j]: tuple j's position in the indexed dims (row-major), or bad
 * (their element count) for a bad index (reported); pos[j] = j */
__global__ void
index_keys_kernel(ampc_index_geom g, const int64_t *idx, sorted_key bad,
                  sorted_key *keys, int64_t *pos, ampc_nn_error *err)
{
    for (int64_t j = nn_tid(); j < g.n; j += nn_nthreads()) {
        sorted_key key = 0;
        for (int d = 0; d < g.k; d++) {
            int64_t i = idx[d * g.n + j];
            int64_t w = i < 0 && g.wrap ? i + g.size[d] : i;
            if ((uint64_t)w >= (uint64_t)g.size[d]) {
                nn_report(err, i, g.size[d], AMPC_NN_ERR_INDEX);
                key = bad;
                break;
            }
            key = key * (sorted_key)g.size[d] + (sorted_key)w;
        }
        keys[j] = key;
        pos[j] = j;
    }
}

/* One thread per (run of one destination tuple, rest element): the run's
 * values added to t in order of j (ADD; T float or the unsigned 64-bit
 * int64 adds wrap in), or the last one written (T an unsigned integer of
 * the element's size). */
template <typename T, bool ADD>
__global__ void
index_sorted_kernel(ampc_index_geom g, T *t, const T *v,
                    const sorted_key *keys, const int64_t *pos,
                    sorted_key bad)
{
    int64_t total = g.n * g.rest_numel;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t i = e / g.rest_numel;
        if (!sorted_run_head(keys, i, bad)) {
            continue;
        }
        int64_t to, vo;
        index_rest_offsets(g, e - i * g.rest_numel, &to, &vo);
        sorted_key key = keys[i];
        for (int d = g.k - 1; d >= 0; d--) {
            to += (int64_t)(key % (sorted_key)g.size[d]) * g.stride[d];
            key /= (sorted_key)g.size[d];
        }
        if constexpr (ADD) {
            T acc = t[to];
            for (int64_t q = i; q < g.n && keys[q] == keys[i]; q++) {
                acc += v[pos[q] * g.v_stride + vo];
            }
            t[to] = acc;
        }
        else {
            int64_t last = i;
            while (last + 1 < g.n && keys[last + 1] == keys[i]) {
                last++;
            }
            t[to] = v[pos[last] * g.v_stride + vo];
        }
    }
}

// ----------------------------------------------------------------------------
// CUDA kernels: nonzero

/* offsets[b] = the number of true bools in tile b */
__global__ void
nonzero_count_kernel(int64_t n, const uint8_t *mask, int64_t *offsets)
{
    __shared__ int64_t part[NONZERO_WARPS];
    int64_t lo = (int64_t)blockIdx.x * AMPC_NONZERO_TILE;
    int64_t hi = min(lo + AMPC_NONZERO_TILE, n);
    int c = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        c += mask[i] != 0;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        c += __shfl_xor_sync(0xffffffffu, c, o);
    }
    if ((threadIdx.x & 31) == 0) {
        part[threadIdx.x >> 5] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t s = 0;
        for (int w = 0; w < NONZERO_WARPS; w++) {
            s += part[w];
        }
        offsets[blockIdx.x] = s;
    }
}

/* One block: offsets[0, tiles) from counts to exclusive prefix sums, and
 * the total into offsets[tiles].  Each thread sums a segment in order,
 * thread 0 scans the segment sums, each thread rewrites its segment. */
__global__ void
nonzero_scan_kernel(int64_t tiles, int64_t *offsets)
{
    __shared__ int64_t seg[NONZERO_SCAN_THREADS];
    int64_t per = CEIL_DIV(tiles, (int64_t)blockDim.x);
    int64_t lo = threadIdx.x * per, hi = min(lo + per, tiles);
    int64_t s = 0;
    for (int64_t i = lo; i < hi; i++) {
        s += offsets[i];
    }
    seg[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t run = 0;
        for (int t = 0; t < (int)blockDim.x; t++) {
            int64_t c = seg[t];
            seg[t] = run;
            run += c;
        }
        offsets[tiles] = run;
    }
    __syncthreads();
    int64_t run = seg[threadIdx.x];
    for (int64_t i = lo; i < hi; i++) {
        int64_t c = offsets[i];
        offsets[i] = run;
        run += c;
    }
}

typedef struct {
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
} nonzero_shape;

/* Tile b from output row offsets[b] on, in rounds of one element per
 * thread; a warp ballot and the warps' counts order the writes. */
__global__ void
nonzero_write_kernel(nonzero_shape s, int64_t n, const uint8_t *mask,
                     const int64_t *offsets, int64_t *out)
{
    __shared__ int counts[NONZERO_WARPS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int64_t lo = (int64_t)blockIdx.x * AMPC_NONZERO_TILE;
    int64_t hi = min(lo + AMPC_NONZERO_TILE, n);
    int64_t row = offsets[blockIdx.x];
    for (int64_t base = lo; base < hi; base += NONZERO_THREADS) {
        int64_t i = base + threadIdx.x;
        bool flag = i < hi && mask[i] != 0;
        unsigned ballot = __ballot_sync(0xffffffffu, flag);
        if (lane == 0) {
            counts[warp] = __popc(ballot);
        }
        __syncthreads();
        int before = 0, round = 0;
        for (int w = 0; w < NONZERO_WARPS; w++) {
            before += w < warp ? counts[w] : 0;
            round += counts[w];
        }
        if (flag) {
            int64_t r = row + before + __popc(ballot & ((1u << lane) - 1u));
            int64_t f = i;
            for (int d = s.ndim - 1; d >= 0; d--) {
                out[r * s.ndim + d] = f % s.shape[d];
                f /= s.shape[d];
            }
        }
        row += round;
        __syncthreads();            /* counts[] is rewritten next round */
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* The error record and grid of a launch over g's (n, rest...) elements;
 * *blocks is 0 when there are none.  0 or an error code. */
static int
index_launch(const ampc_index_geom *g, ampc_nn_error **err, unsigned *blocks)
{
    int64_t total = g->n * g->rest_numel;
    *blocks = total > 0 ? nn_blocks(total, AMPC_NN_THREADS) : 0;
    return total > 0 ? ampc_nn_error_device(err) : 0;
}

/* A gather or put of es-byte elements; t (k indexed dims, rest...), idx
 * (k, n), v (n, rest...). */
template <bool GATHER>
static int
index_move(const ampc_index_geom *g, size_t es, void *t, const int64_t *idx,
           void *v)
{
    ampc_nn_error *err;
    unsigned blocks;
    int rc = index_launch(g, &err, &blocks);
    if (rc != 0 || blocks == 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
#define MOVE(T)                                                             \
    index_move_kernel<T, GATHER><<<blocks, AMPC_NN_THREADS, 0, st>>>(       \
        *g, (T *)t, idx, (T *)v, err)
    switch (es) {
    case 1: MOVE(uint8_t); break;
    case 2: MOVE(uint16_t); break;
    case 4: MOVE(uint32_t); break;
    case 8: MOVE(uint64_t); break;
    default:
        ampc_cuda_record_error(__FILE__, __LINE__, "index: element size",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
#undef MOVE
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

extern "C" int
ampc_index_gather_cuda(const ampc_index_geom *g, size_t es, const void *t,
                       const int64_t *idx, void *v)
{
    return index_move<true>(g, es, (void *)t, idx, v);
}

extern "C" int
ampc_index_put_cuda(const ampc_index_geom *g, ampc_dtype dt, int accumulate,
                    void *t, const int64_t *idx, const void *v)
{
    if (!accumulate) {
        return index_move<false>(g, ampc_dtype_size[dt], t, idx, (void *)v);
    }
    ampc_nn_error *err;
    unsigned blocks;
    int rc = index_launch(g, &err, &blocks);
    if (rc != 0 || blocks == 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    if (dt == AMPC_FLOAT32) {
        index_add_kernel<float><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *g, (float *)t, idx, (const float *)v, err);
    }
    else if (dt == AMPC_INT64) {
        typedef unsigned long long u64;
        index_add_kernel<u64><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *g, (u64 *)t, idx, (const u64 *)v, err);
    }
    else {
        ampc_cuda_record_error(__FILE__, __LINE__, "index_put: dtype",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* The deterministic put: sorted by destination, then each run applied by
 * one thread (per rest element) in order. */
template <typename T, bool ADD>
static int
index_sorted(const ampc_index_geom *g, void *t, const int64_t *idx,
             const void *v)
{
    ampc_nn_error *err;
    unsigned blocks;
    int rc = index_launch(g, &err, &blocks);
    if (rc != 0 || blocks == 0) {
        return rc;
    }
    sorted_key bad = 1;
    for (int d = 0; d < g->k; d++) {
        bad *= (sorted_key)g->size[d];
    }
    sorted_writes s;
    rc = sorted_writes_alloc(&s, g->n, bad);
    if (rc != 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    index_keys_kernel<<<nn_blocks(g->n, AMPC_NN_THREADS), AMPC_NN_THREADS,
                        0, st>>>(*g, idx, bad, s.keys_in, s.pos_in, err);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && (rc = sorted_writes_sort(&s)) != 0) {
        return rc;                  /* (the block is freed) */
    }
    if (e == cudaSuccess) {
        index_sorted_kernel<T, ADD><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *g, (T *)t, (const T *)v, s.keys, s.pos, bad);
        e = cudaGetLastError();
    }
    /* NOTE: freed while the kernels may still run: the caching allocator
     * hands the block only to later work on this stream. */
    ampc_cuda_scratch_free(s.block);
    if (e != cudaSuccess) {
        ampc_cuda_record_error(__FILE__, __LINE__, "index_put sorted",
                               (int)e);
        return (int)e;
    }
    return 0;
}

extern "C" int
ampc_index_put_sorted_cuda(const ampc_index_geom *g, ampc_dtype dt,
                           int accumulate, void *t, const int64_t *idx,
                           const void *v)
{
    typedef unsigned long long u64;
    if (accumulate && dt == AMPC_FLOAT32) {
        return index_sorted<float, true>(g, t, idx, v);
    }
    if (accumulate && dt == AMPC_INT64) {
        return index_sorted<u64, true>(g, t, idx, v);
    }
    switch (accumulate ? 0 : ampc_dtype_size[dt]) {
    case 1: return index_sorted<uint8_t, false>(g, t, idx, v);
    case 2: return index_sorted<uint16_t, false>(g, t, idx, v);
    case 4: return index_sorted<uint32_t, false>(g, t, idx, v);
    case 8: return index_sorted<u64, false>(g, t, idx, v);
    default:
        ampc_cuda_record_error(__FILE__, __LINE__, "index_put sorted: dtype",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
}

/* mask (n) bools -> offsets (tiles + 1), tiles = ceil(n / TILE) */
extern "C" int
ampc_nonzero_count_cuda(int64_t n, const uint8_t *mask, int64_t *offsets)
{
    int64_t tiles = CEIL_DIV(n, (int64_t)AMPC_NONZERO_TILE);
    cudaStream_t st = ampc_cuda_stream();
    if (tiles > 0) {
        nonzero_count_kernel<<<(unsigned)tiles, NONZERO_THREADS, 0, st>>>(
            n, mask, offsets);
        AMPC_CUDA_CHECK_LAUNCH();
    }
    nonzero_scan_kernel<<<1, NONZERO_SCAN_THREADS, 0, st>>>(tiles, offsets);
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* mask (n) bools of a contiguous tensor of `shape` -> out (count, ndim) */
extern "C" int
ampc_nonzero_cuda(int ndim, const int64_t *shape, int64_t n,
                  const uint8_t *mask, const int64_t *offsets, int64_t *out)
{
    int64_t tiles = CEIL_DIV(n, (int64_t)AMPC_NONZERO_TILE);
    if (tiles == 0 || ndim == 0) {
        return 0;
    }
    nonzero_shape s = {ndim, {0}};
    for (int d = 0; d < ndim; d++) {
        s.shape[d] = shape[d];
    }
    nonzero_write_kernel<<<(unsigned)tiles, NONZERO_THREADS, 0,
                           ampc_cuda_stream()>>>(s, n, mask, offsets, out);
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
