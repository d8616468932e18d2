/* histc.cu - torch.histc on the GPU (kernels_cuda.h ampc_cuda_histc_fn);
 * csrc/cpu/ref/histc.c is the CPU version, and both take each element's
 * bin from stats_math.h's ampc_histc_bin.  Each block counts its grid-
 * stride share of the elements in shared memory (when the bins fit, else
 * straight into the global counts), adds its counts to int64 counts in
 * scratch with atomics, and a last kernel rounds each count once to the
 * output's dtype.  Counts are integers, so the order of the atomics does
 * not matter: the result is deterministic.
 */
#include "nn_common.cuh"
#include "stats_math.h"

/* bins counted in shared memory (32-bit counters, 32 KiB) */
#define HISTC_SHARED_BINS 8192

// ----------------------------------------------------------------------------
// CUDA kernels

/* x (n) -> counts (bins), added to */
template <ampc_dtype DT>
__global__ void
histc_kernel(ampc_histc_shape s, const nn_t<DT> *x,
             unsigned long long *counts)
{
    __shared__ unsigned int local[HISTC_SHARED_BINS];
    bool shared = s.bins <= HISTC_SHARED_BINS;
    if (shared) {
        for (int64_t k = threadIdx.x; k < s.bins; k += blockDim.x) {
            local[k] = 0u;
        }
        __syncthreads();
    }
    for (int64_t i = nn_tid(); i < s.n; i += nn_nthreads()) {
        int64_t pos = ampc_histc_bin(DT, nn_load<DT>(x[i]), s.lo, s.hi,
                                     s.bins);
        if (pos < 0) {
            continue;
        }
        if (shared) {
            atomicAdd(&local[pos], 1u);
        }
        else {
            atomicAdd(&counts[pos], 1ull);
        }
    }
    if (shared) {
        __syncthreads();
        for (int64_t k = threadIdx.x; k < s.bins; k += blockDim.x) {
            if (local[k] != 0u) {
                atomicAdd(&counts[k], (unsigned long long)local[k]);
            }
        }
    }
}

/* counts (bins) -> out (bins) of DT, each rounded once */
template <ampc_dtype DT>
__global__ void
histc_store_kernel(int64_t bins, const unsigned long long *counts,
                   nn_t<DT> *out)
{
    for (int64_t k = nn_tid(); k < bins; k += nn_nthreads()) {
        out[k] = nn_store_f64<DT>((double)counts[k]);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* x (n) of dt -> out (bins) of dt */
extern "C" int
ampc_histc_cuda(const ampc_histc_shape *s, ampc_dtype dt, const void *x,
                void *out)
{
    unsigned long long *counts;
    size_t nbytes = (size_t)s->bins * sizeof(unsigned long long);
    int rc = ampc_cuda_scratch_alloc(nbytes, (void **)&counts);
    if (rc != 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    rc = (int)cudaMemsetAsync(counts, 0, nbytes, st);
    if (rc == 0) {
        /* a block per 8 elements a thread, at most the grid cap */
        unsigned int blocks = nn_blocks(CEIL_DIV(s->n, (int64_t)8),
                                        AMPC_NN_THREADS);
        AMPC_NN_DISPATCH(dt, DT, {
            if (s->n > 0) {
                histc_kernel<DT><<<blocks, AMPC_NN_THREADS, 0, st>>>(
                    *s, (const nn_t<DT> *)x, counts);
            }
            histc_store_kernel<DT><<<nn_blocks(s->bins, AMPC_NN_THREADS),
                                     AMPC_NN_THREADS, 0, st>>>(
                s->bins, counts, (nn_t<DT> *)out);
        });
        rc = (int)cudaGetLastError();
    }
    /* safe while the kernels above are queued: the block is reused only by
     * later work on this stream */
    ampc_cuda_scratch_free(counts);
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "histc_kernel", rc);
    }
    return rc;
}
