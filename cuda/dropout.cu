/* dropout.cu - dropout's masked scale on CUDA, forward and backward:
 * y = (x * mask) * scale (nn_math.h ampc_masked_scale_one).  The mask itself
 * comes from the `random` slot (cuda/random.cu), the same bits as the CPU's
 * for the same seed and offset.
 */
#include "nn_common.cuh"

// ----------------------------------------------------------------------------
// CUDA kernels

/* x, mask (bool), y (n); vec: x and y 16-byte aligned (the mask is read a
 * byte at a time: 1/4 or 1/2 of the traffic of x, coalesced) */
template <ampc_dtype DT>
__global__ void
masked_scale_kernel(int64_t n, const nn_t<DT> *x, const uint8_t *mask,
                    float scale, nn_t<DT> *y, int vec)
{
    constexpr int N = nn_pack<DT>::N;
    int64_t stride = nn_nthreads();
    int64_t nvec = vec ? n / N : 0;
    for (int64_t v = nn_tid(); v < nvec; v += stride) {
        nn_pack<DT> p;
        p.load(x + v * N);
#pragma unroll
        for (int k = 0; k < N; k++) {
            p.f[k] = ampc_masked_scale_one(p.f[k], mask[v * N + k], scale);
        }
        p.store(y + v * N);
    }
    for (int64_t i = nvec * N + nn_tid(); i < n; i += stride) {
        y[i] = nn_store<DT>(
            ampc_masked_scale_one(nn_load<DT>(x[i]), mask[i], scale));
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* x, mask, y (n) */
extern "C" int
ampc_masked_scale_cuda(ampc_dtype dt, int64_t n, const void *x,
                       const uint8_t *mask, float scale, void *y)
{
    if (n <= 0) {
        return 0;
    }
    int vec = nn_aligned16(x) && nn_aligned16(y);
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        int64_t work = vec ? CEIL_DIV(n, nn_pack<DT>::N) : n;
        masked_scale_kernel<DT><<<nn_blocks(work, AMPC_NN_THREADS),
                                  AMPC_NN_THREADS, 0, st>>>(
            n, (const nn_t<DT> *)x, mask, scale, (nn_t<DT> *)y, vec);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
