/* adaptive_max_pool.cu - adaptive_max_pool2d's forward on the GPU
 * (kernels_cuda.h ampc_cuda_adaptive_max_pool2d_fn); csrc/cpu/ref/
 * adaptive_max_pool.c is the CPU version.  Both take the windows from
 * avg_pool_math.h's ampc_avg_window (adaptive) and the max by nn_math.h's
 * ampc_pool_takes, in the same order, so they give the same outputs and
 * indices.  The backward is max_pool2d_bwd (pool.cu) at these indices.
 */
#include "avg_pool_math.h"
#include "nn_common.cuh"

// ----------------------------------------------------------------------------
// CUDA kernels

/* x (planes, H, W) -> y, idx (planes, OH, OW); one thread per output,
 * neighbours on neighbouring windows of one row (their loads overlap) */
template <ampc_dtype DT>
__global__ void
adaptive_max_pool2d_kernel(ampc_pool2d_shape s, const nn_t<DT> *x,
                           nn_t<DT> *y, int64_t *idx)
{
    ampc_avg_axis ah = {s.h, s.oh, 1, 1, 0};
    ampc_avg_axis aw = {s.w, s.ow, 1, 1, 0};
    int64_t total = s.planes * s.oh * s.ow;
    for (int64_t o = nn_tid(); o < total; o += nn_nthreads()) {
        int64_t j = o % s.ow;
        int64_t i = (o / s.ow) % s.oh;
        int64_t p = o / (s.ow * s.oh);
        const nn_t<DT> *xp = x + p * s.h * s.w;
        int64_t h0, h1, w0, w1;
        ampc_avg_window(&ah, 1, 0, i, &h0, &h1);
        ampc_avg_window(&aw, 1, 0, j, &w0, &w1);
        int64_t best_i = h0 * s.w + w0;
        float best = -INFINITY;
        for (int64_t ih = h0; ih < h1; ih++) {
            for (int64_t iw = w0; iw < w1; iw++) {
                float v = nn_load<DT>(xp[ih * s.w + iw]);
                if (ampc_pool_takes(v, best)) {
                    best = v;
                    best_i = ih * s.w + iw;
                }
            }
        }
        y[o] = nn_store<DT>(best);
        idx[o] = best_i;
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* x (planes, H, W) -> y, idx (planes, OH, OW) */
extern "C" int
ampc_adaptive_max_pool2d_cuda(const ampc_pool2d_shape *s, ampc_dtype dt,
                              const void *x, void *y, int64_t *idx)
{
    int64_t total = s->planes * s->oh * s->ow;
    if (total <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        adaptive_max_pool2d_kernel<DT><<<nn_blocks(total, AMPC_NN_THREADS),
                                         AMPC_NN_THREADS, 0, st>>>(
            *s, (const nn_t<DT> *)x, (nn_t<DT> *)y, idx);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
