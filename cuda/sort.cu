/* sort.cu - sort, argsort and topk on the GPU (kernels_cuda.h
 * ampc_cuda_sort_fn); csrc/cpu/ref/sort.c is the CPU version and
 * csrc/sort_math.h the order both use.  Each element becomes its
 * sort_math.h key (NaN largest, -0.0 equal to 0.0, inverted for a
 * descending sort) beside its position in the line; CUB's segmented radix
 * sort (stable) sorts each line's (key, position) pairs; a last kernel
 * writes the first k positions and reads the values at them from the
 * input, so values keep their exact bits.  topk sorts whole lines and
 * keeps k.  Lines are sorted in chunks of at most INT_MAX elements (CUB's
 * item count is an int); temporary storage comes from the caching
 * allocator.
 */
#include <cub/device/device_segmented_radix_sort.cuh>

#include "nn_common.cuh"
#include "sort_math.h"

// ----------------------------------------------------------------------------
// per-dtype element and key types

template <ampc_dtype DT> struct SortKey;

template <> struct SortKey<AMPC_FLOAT32> {
    using T = float;
    using K = unsigned int;
    static __device__ __forceinline__ K key(T v, int desc)
    {
        return ampc_sort_key_f32(v, desc);
    }
};

template <> struct SortKey<AMPC_FLOAT16> {
    using T = uint16_t;
    using K = unsigned short;
    static __device__ __forceinline__ K key(T v, int desc)
    {
        return (K)ampc_sort_key_16(v, 0x7c00u, desc);
    }
};

template <> struct SortKey<AMPC_BFLOAT16> {
    using T = uint16_t;
    using K = unsigned short;
    static __device__ __forceinline__ K key(T v, int desc)
    {
        return (K)ampc_sort_key_16(v, 0x7f80u, desc);
    }
};

template <> struct SortKey<AMPC_INT64> {
    using T = int64_t;
    using K = unsigned long long;
    static __device__ __forceinline__ K key(T v, int desc)
    {
        return (K)ampc_sort_key_i64(v, desc);
    }
};

template <> struct SortKey<AMPC_BOOL> {
    using T = uint8_t;
    using K = unsigned char;
    static __device__ __forceinline__ K key(T v, int desc)
    {
        return (K)ampc_sort_key_bool(v, desc);
    }
};

// ----------------------------------------------------------------------------
// CUDA kernels

/* x (total = lines * n) -> keys, pos (the position in the line) */
template <ampc_dtype DT>
__global__ void
sort_keys_kernel(int64_t total, int64_t n, int desc,
                 const typename SortKey<DT>::T *x,
                 typename SortKey<DT>::K *keys, int64_t *pos)
{
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        keys[e] = SortKey<DT>::key(x[e], desc);
        pos[e] = e % n;
    }
}

/* off[r] = r * n for r in [0, lines] */
__global__ void
sort_offsets_kernel(int64_t lines, int64_t n, int *off)
{
    for (int64_t r = nn_tid(); r <= lines; r += nn_nthreads()) {
        off[r] = (int)(r * n);
    }
}

/* sorted positions (lines, n) -> indices (lines, k) and values (lines, k)
 * read from x (lines, n), unless values is NULL */
template <typename T>
__global__ void
sort_output_kernel(int64_t lines, int64_t n, int64_t k, const T *x,
                   const int64_t *pos, T *values, int64_t *indices)
{
    int64_t total = lines * k;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t r = e / k, j = e % k;
        int64_t p = pos[r * n + j];
        indices[e] = p;
        if (values != NULL) {
            values[e] = x[r * n + p];
        }
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* The scratch of one sort: buffers for chunk lines of n. */
typedef struct {
    void *keys_in, *keys_out, *temp;
    int64_t *pos_in, *pos_out;
    int *off;
    size_t temp_bytes;
} sort_scratch;

static int
scratch_release(sort_scratch *s)
{
    void *all[] = {s->keys_in, s->keys_out, s->temp, s->pos_in, s->pos_out,
                   s->off};
    int rc = 0;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (all[i] != NULL) {
            int r = ampc_cuda_scratch_free(all[i]);
            rc = rc != 0 ? rc : r;
        }
    }
    return rc;
}

/* Sorts lines [0, lines) of x (rows of n) in chunks of `chunk` lines. */
template <ampc_dtype DT>
static int
sort_chunks(sort_scratch *s, int desc, int64_t lines, int64_t n, int64_t k,
            int64_t chunk, const void *x, void *values, int64_t *indices)
{
    using SK = SortKey<DT>;
    using T = typename SK::T;
    using K = typename SK::K;
    cudaStream_t stream = ampc_cuda_stream();
    const T *xt = static_cast<const T *>(x);
    for (int64_t r0 = 0; r0 < lines; r0 += chunk) {
        int64_t c = lines - r0 < chunk ? lines - r0 : chunk;
        int64_t items = c * n;
        const T *xc = xt + r0 * n;
        sort_keys_kernel<DT>
            <<<nn_blocks(items, AMPC_NN_THREADS), AMPC_NN_THREADS, 0,
               stream>>>(items, n, desc, xc, static_cast<K *>(s->keys_in),
                         s->pos_in);
        AMPC_CUDA_CHECK_LAUNCH();
        sort_offsets_kernel<<<nn_blocks(c + 1, AMPC_NN_THREADS),
                              AMPC_NN_THREADS, 0, stream>>>(c, n, s->off);
        AMPC_CUDA_CHECK_LAUNCH();
        size_t bytes = s->temp_bytes;
        AMPC_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
            s->temp, bytes, static_cast<const K *>(s->keys_in),
            static_cast<K *>(s->keys_out), s->pos_in, s->pos_out, (int)items,
            (int)c, s->off, s->off + 1, 0, (int)(sizeof(K) * 8), stream));
        T *vc = values != NULL ? static_cast<T *>(values) + r0 * k : NULL;
        sort_output_kernel<T>
            <<<nn_blocks(c * k, AMPC_NN_THREADS), AMPC_NN_THREADS, 0,
               stream>>>(c, n, k, xc, s->pos_out, vc, indices + r0 * k);
        AMPC_CUDA_CHECK_LAUNCH();
    }
    return 0;
}

template <ampc_dtype DT>
static int
sort_dtype(int desc, int64_t lines, int64_t n, int64_t k, const void *x,
           void *values, int64_t *indices)
{
    using K = typename SortKey<DT>::K;
    if (n > (int64_t)INT_MAX) {
        ampc_cuda_record_error(__FILE__, __LINE__,
                               "sort: a line longer than INT_MAX",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    int64_t chunk = (int64_t)INT_MAX / n;
    chunk = chunk < lines ? chunk : lines;
    int64_t items = chunk * n;
    sort_scratch s = {};
    /* the temporary storage CUB needs for the largest chunk */
    AMPC_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
        (void *)NULL, s.temp_bytes, (const K *)NULL, (K *)NULL,
        (const int64_t *)NULL, (int64_t *)NULL, (int)items, (int)chunk,
        (const int *)NULL, (const int *)NULL + 1, 0, (int)(sizeof(K) * 8),
        ampc_cuda_stream()));
    int rc = ampc_cuda_scratch_alloc((size_t)items * sizeof(K), &s.keys_in);
    if (rc == 0) {
        rc = ampc_cuda_scratch_alloc((size_t)items * sizeof(K), &s.keys_out);
    }
    if (rc == 0) {
        rc = ampc_cuda_scratch_alloc((size_t)items * sizeof(int64_t),
                                     (void **)&s.pos_in);
    }
    if (rc == 0) {
        rc = ampc_cuda_scratch_alloc((size_t)items * sizeof(int64_t),
                                     (void **)&s.pos_out);
    }
    if (rc == 0) {
        rc = ampc_cuda_scratch_alloc((size_t)(chunk + 1) * sizeof(int),
                                     (void **)&s.off);
    }
    if (rc == 0) {
        rc = ampc_cuda_scratch_alloc(s.temp_bytes > 0 ? s.temp_bytes : 1,
                                     &s.temp);
    }
    if (rc == 0) {
        rc = sort_chunks<DT>(&s, desc, lines, n, k, chunk, x, values,
                             indices);
    }
    int rc_free = scratch_release(&s);
    return rc != 0 ? rc : rc_free;
}

/* x (rows, n) -> values (NULL: argsort), indices (rows, k) */
extern "C" int
ampc_sort_cuda(ampc_dtype dt, int descending, int64_t rows, int64_t n,
               int64_t k, const void *x, void *values, int64_t *indices)
{
    if (rows == 0 || n == 0 || k == 0) {
        return 0;
    }
    switch (dt) {
    case AMPC_FLOAT32:
        return sort_dtype<AMPC_FLOAT32>(descending, rows, n, k, x, values,
                                        indices);
    case AMPC_FLOAT16:
        return sort_dtype<AMPC_FLOAT16>(descending, rows, n, k, x, values,
                                        indices);
    case AMPC_BFLOAT16:
        return sort_dtype<AMPC_BFLOAT16>(descending, rows, n, k, x, values,
                                         indices);
    case AMPC_INT64:
        return sort_dtype<AMPC_INT64>(descending, rows, n, k, x, values,
                                      indices);
    default:
        return sort_dtype<AMPC_BOOL>(descending, rows, n, k, x, values,
                                     indices);
    }
}
