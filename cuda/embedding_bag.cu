/* embedding_bag.cu - embedding_bag's forward and backward on the GPU
 * (kernels_cuda.h ampc_cuda_embedding_bag_fwd_fn / _bwd_fn); csrc/cpu/ref/
 * embedding_bag.c is the CPU version.  A block per bag, its threads over
 * the D columns: the forward sums (or takes stats_math.h's max of) the
 * bag's rows in order in float32, as the CPU does; the backward adds each
 * bag's gradient into the rows it named with float32 atomics.
 */
#include "nn_common.cuh"
#include "stats_math.h"

// ----------------------------------------------------------------------------
// CUDA kernels

/* bag b's index range [*k0, *k1), offsets clamped to [0, n] */
__device__ __forceinline__ void
bag_range(const ampc_bag_shape &s, const int64_t *offsets, int64_t b,
          int64_t *k0, int64_t *k1)
{
    int64_t a = offsets[b], e = offsets[b + 1];
    a = a < 0 ? 0 : (a > s.n ? s.n : a);
    e = e < a ? a : (e > s.n ? s.n : e);
    *k0 = a;
    *k1 = e;
}

/* weight (num, D), indices (n), offsets (bags + 1) -> out (bags, D),
 * bag_size (bags), max_idx (bags, D) or NULL */
template <ampc_dtype DT>
__global__ void
embedding_bag_fwd_kernel(ampc_bag_shape s, const nn_t<DT> *weight,
                         const int64_t *indices, const int64_t *offsets,
                         const nn_t<DT> *psw, nn_t<DT> *out,
                         int64_t *bag_size, int64_t *max_idx,
                         ampc_nn_error *err)
{
    for (int64_t b = blockIdx.x; b < s.bags; b += gridDim.x) {
        int64_t k0, k1;
        bag_range(s, offsets, b, &k0, &k1);
        for (int64_t e = threadIdx.x; e < s.d; e += blockDim.x) {
            float acc = 0.0f;
            int64_t count = 0, arg = -1;
            for (int64_t k = k0; k < k1; k++) {
                int64_t r = indices[k];
                if ((uint64_t)r >= (uint64_t)s.num) {
                    nn_report(err, r, s.num, AMPC_NN_ERR_INDEX);
                    continue;
                }
                if (r == s.padding_idx) {
                    continue;
                }
                float v = nn_load<DT>(weight[r * s.d + e]);
                if (s.mode == AMPC_BAG_MAX) {
                    if (ampc_bag_max_takes(count == 0, v, acc)) {
                        acc = v;
                        arg = r;
                    }
                }
                else {
                    float w = psw != NULL ? nn_load<DT>(psw[k]) : 1.0f;
                    acc += w * v;
                }
                count++;
            }
            if (s.mode == AMPC_BAG_MEAN && count > 0) {
                acc /= (float)count;
            }
            out[b * s.d + e] = nn_store<DT>(acc);
            if (max_idx != NULL) {
                max_idx[b * s.d + e] = arg;
            }
        }
        if (threadIdx.x == 0) {
            /* counted apart from the columns, so that D == 0 counts too */
            int64_t count = 0;
            for (int64_t k = k0; k < k1; k++) {
                int64_t r = indices[k];
                count += (uint64_t)r < (uint64_t)s.num && r != s.padding_idx;
            }
            bag_size[b] = count;
        }
    }
}

/* grad (bags, D) -> acc (num, D) float32, added to */
template <ampc_dtype DT>
__global__ void
embedding_bag_bwd_kernel(ampc_bag_shape s, const nn_t<DT> *grad,
                         const int64_t *indices, const int64_t *offsets,
                         const float *scale, const int64_t *bag_size,
                         const int64_t *max_idx, float *acc)
{
    for (int64_t b = blockIdx.x; b < s.bags; b += gridDim.x) {
        if (s.mode == AMPC_BAG_MAX) {
            for (int64_t e = threadIdx.x; e < s.d; e += blockDim.x) {
                int64_t r = max_idx[b * s.d + e];
                if ((uint64_t)r < (uint64_t)s.num) {
                    atomicAdd(&acc[r * s.d + e],
                              nn_load<DT>(grad[b * s.d + e]));
                }
            }
            continue;
        }
        int64_t k0, k1;
        bag_range(s, offsets, b, &k0, &k1);
        for (int64_t k = k0; k < k1; k++) {
            int64_t r = indices[k];
            if ((uint64_t)r >= (uint64_t)s.num || r == s.padding_idx) {
                continue;
            }
            float f = scale != NULL ? scale[k] : 1.0f;
            if (s.mode == AMPC_BAG_MEAN) {
                f /= (float)bag_size[b];
            }
            for (int64_t e = threadIdx.x; e < s.d; e += blockDim.x) {
                atomicAdd(&acc[r * s.d + e],
                          f * nn_load<DT>(grad[b * s.d + e]));
            }
        }
    }
}

/* acc (n) float32 -> out (n) of DT, rounded once */
template <ampc_dtype DT>
__global__ void
bag_narrow_kernel(int64_t n, const float *acc, nn_t<DT> *out)
{
    for (int64_t i = nn_tid(); i < n; i += nn_nthreads()) {
        out[i] = nn_store<DT>(acc[i]);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* threads per bag block: D rounded up to a warp, at most 256 */
static int
bag_threads(int64_t d)
{
    int64_t t = CEIL_DIV(d, (int64_t)32) * 32;
    return (int)(t < 32 ? 32 : (t > 256 ? 256 : t));
}

static unsigned int
bag_blocks(int64_t bags)
{
    return (unsigned int)(bags < 1 ? 1 : (bags < AMPC_NN_MAX_BLOCKS
                                              ? bags
                                              : AMPC_NN_MAX_BLOCKS));
}

/* weight (num, D) -> out (bags, D) */
extern "C" int
ampc_embedding_bag_fwd_cuda(const ampc_bag_shape *s, ampc_dtype dt,
                            const void *weight, const int64_t *indices,
                            const int64_t *offsets, const void *psw,
                            void *out, int64_t *bag_size, int64_t *max_idx)
{
    if (s->bags <= 0) {
        return 0;
    }
    ampc_nn_error *err;
    int rc = ampc_nn_error_device(&err);
    if (rc != 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        embedding_bag_fwd_kernel<DT>
            <<<bag_blocks(s->bags), bag_threads(s->d), 0, st>>>(
                *s, (const nn_t<DT> *)weight, indices, offsets,
                (const nn_t<DT> *)psw, (nn_t<DT> *)out, bag_size, max_idx,
                err);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* grad (bags, D) -> grad_weight (num, D) */
extern "C" int
ampc_embedding_bag_bwd_cuda(const ampc_bag_shape *s, ampc_dtype dt,
                            const void *grad, const int64_t *indices,
                            const int64_t *offsets, const float *scale,
                            const int64_t *bag_size, const int64_t *max_idx,
                            void *grad_weight)
{
    int64_t n = s->num * s->d;
    if (n <= 0) {
        return 0;
    }
    float *acc = (float *)grad_weight;
    int rc;
    if (dt != AMPC_FLOAT32) {
        rc = ampc_cuda_scratch_alloc((size_t)n * sizeof(float),
                                     (void **)&acc);
        if (rc != 0) {
            return rc;
        }
    }
    cudaStream_t st = ampc_cuda_stream();
    rc = (int)cudaMemsetAsync(acc, 0, (size_t)n * sizeof(float), st);
    if (rc == 0) {
        AMPC_NN_DISPATCH(dt, DT, {
            if (s->bags > 0) {
                embedding_bag_bwd_kernel<DT>
                    <<<bag_blocks(s->bags), bag_threads(s->d), 0, st>>>(
                        *s, (const nn_t<DT> *)grad, indices, offsets, scale,
                        bag_size, max_idx, acc);
            }
            if (dt != AMPC_FLOAT32) {
                bag_narrow_kernel<DT><<<nn_blocks(n, AMPC_NN_THREADS),
                                        AMPC_NN_THREADS, 0, st>>>(
                    n, acc, (nn_t<DT> *)grad_weight);
            }
        });
        rc = (int)cudaGetLastError();
    }
    if (acc != (float *)grad_weight) {
        /* safe while the kernels above are queued: the block is reused only
         * by later work on this stream */
        ampc_cuda_scratch_free(acc);
    }
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "embedding_bag_bwd", rc);
    }
    return rc;
}
