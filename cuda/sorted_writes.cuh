/* sorted_writes.cuh - what the deterministic forms of index_put_
 * (index.cu) and scatter_reduce (scatter.cu) share: n (key, position)
 * pairs in one scratch block, sorted by key with CUB's radix sort, which
 * is stable, so the writes to one destination (one key) end up together
 * in their original order.  A caller's kernel fills keys_in and pos_in
 * (keys in [0, bad], bad marking a skipped write); after the sort one
 * thread per run of equal keys applies the run in order.
 */
#ifndef AMPC_SORTED_WRITES_CUH
#define AMPC_SORTED_WRITES_CUH

#include <limits.h>

#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"

typedef unsigned long long sorted_key;

struct sorted_writes {
    sorted_key *keys_in, *keys;     /* the keys, then sorted */
    int64_t *pos_in, *pos;          /* their positions, then sorted */
    void *temp;                     /* CUB's temporary storage */
    size_t temp_bytes;
    void *block;                    /* the scratch block holding them */
    int64_t n;
    int end_bit;                    /* the key bits sorted */
};

/* Scratch for n pairs of keys in [0, bad] (n <= INT_MAX: CUB counts its
 * items in an int).  0, or an error code (recorded). */
static inline int
sorted_writes_alloc(sorted_writes *s, int64_t n, sorted_key bad)
{
    if (n > (int64_t)INT_MAX) {
        ampc_cuda_record_error(__FILE__, __LINE__,
                               "deterministic index write: more than "
                               "INT_MAX writes",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    s->n = n;
    s->end_bit = 1;
    while (s->end_bit < 64 && (bad >> s->end_bit) != 0) {
        s->end_bit++;
    }
    s->temp_bytes = 0;
    AMPC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        (void *)NULL, s->temp_bytes, (const sorted_key *)NULL,
        (sorted_key *)NULL, (const int64_t *)NULL, (int64_t *)NULL, (int)n,
        0, s->end_bit, ampc_cuda_stream()));
    /* four arrays of n 8-byte values, then the temporary storage (its
     * offset a multiple of 256 bytes) */
    size_t arrays = ((size_t)n * 4 * sizeof(int64_t) + 255) & ~(size_t)255;
    int rc = ampc_cuda_scratch_alloc(arrays + (s->temp_bytes > 0
                                                   ? s->temp_bytes
                                                   : 1),
                                     &s->block);
    if (rc != 0) {
        return rc;
    }
    s->keys_in = (sorted_key *)s->block;
    s->keys = s->keys_in + n;
    s->pos_in = (int64_t *)(s->keys + n);
    s->pos = s->pos_in + n;
    s->temp = (char *)s->block + arrays;
    return 0;
}

/* Sorts the filled pairs (queued on the stream); 0, or an error code
 * (recorded) after freeing the block. */
static inline int
sorted_writes_sort(sorted_writes *s)
{
    size_t bytes = s->temp_bytes;
    cudaError_t err = cub::DeviceRadixSort::SortPairs(
        s->temp, bytes, s->keys_in, s->keys, s->pos_in, s->pos, (int)s->n,
        0, s->end_bit, ampc_cuda_stream());
    if (err != cudaSuccess) {
        ampc_cuda_scratch_free(s->block);
        ampc_cuda_record_error(__FILE__, __LINE__, "radix sort", (int)err);
        return (int)err;
    }
    return 0;
}

/* Whether sorted position i starts a run of equal keys (not a bad one) */
__device__ __forceinline__ bool
sorted_run_head(const sorted_key *keys, int64_t i, sorted_key bad)
{
    return keys[i] != bad && (i == 0 || keys[i - 1] != keys[i]);
}

#endif /* AMPC_SORTED_WRITES_CUH */
