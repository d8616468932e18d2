/* avg_pool.cu - avg_pool2d and adaptive_avg_pool2d on CUDA, forward and
 * backward, with the CPU's window rules (avg_pool_math.h) and the CPU's
 * order of float32 sums (kernels.h ampc_avg_pool2d_fwd_fn / _bwd_fn), so
 * float32 gives the CPU's bits.  The backward is a gather: each input
 * element sums the outputs whose windows hold it, so there are no atomics
 * and the result is deterministic.
 */
#include "avg_pool_math.h"
#include "nn_common.cuh"

// ----------------------------------------------------------------------------
// CUDA kernels

/* x (planes, H, W) -> y (planes, OH, OW); one thread per output, its
 * window summed by columns, each column's rows in order. */
template <ampc_dtype DT>
__global__ void
avg_pool2d_fwd_kernel(ampc_avg_pool2d_shape s, const nn_t<DT> *x,
                      nn_t<DT> *y)
{
    ampc_avg_axis ah = ampc_avg_axis_h(&s), aw = ampc_avg_axis_w(&s);
    int64_t total = s.planes * s.oh * s.ow;
    for (int64_t o = nn_tid(); o < total; o += nn_nthreads()) {
        int64_t j = o % s.ow;
        int64_t i = (o / s.ow) % s.oh;
        const nn_t<DT> *xp = x + (o / (s.ow * s.oh)) * s.h * s.w;
        int64_t lo, hi, lo_w, hi_w;
        int64_t fh = ampc_avg_window(&ah, s.adaptive, s.count_include_pad,
                                     i, &lo, &hi);
        int64_t fw = ampc_avg_window(&aw, s.adaptive, s.count_include_pad,
                                     j, &lo_w, &hi_w);
        float acc = 0.0f;
        for (int64_t c = lo_w; c < hi_w; c++) {
            float col = 0.0f;
            for (int64_t r = lo; r < hi; r++) {
                col += nn_load<DT>(xp[r * s.w + c]);
            }
            acc += col;
        }
        y[o] = nn_store<DT>(__fdiv_rn(acc, ampc_avg_divisor(&s, fh, fw)));
    }
}

/* grad_out (planes, OH, OW) -> grad_in (planes, H, W); one thread per
 * input element, summing over the output rows that hold it (in order) the
 * sums over the output columns likewise of grad_out / divisor. */
template <ampc_dtype DT>
__global__ void
avg_pool2d_bwd_kernel(ampc_avg_pool2d_shape s, const nn_t<DT> *gy,
                      nn_t<DT> *gx)
{
    ampc_avg_axis ah = ampc_avg_axis_h(&s), aw = ampc_avg_axis_w(&s);
    int64_t total = s.planes * s.h * s.w;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t c = e % s.w;
        int64_t r = (e / s.w) % s.h;
        const nn_t<DT> *gp = gy + (e / (s.w * s.h)) * s.oh * s.ow;
        int64_t first_i, last_i, first_j, last_j, lo, hi;
        ampc_avg_cover(&ah, s.adaptive, r, &first_i, &last_i);
        ampc_avg_cover(&aw, s.adaptive, c, &first_j, &last_j);
        float acc = 0.0f;
        for (int64_t i = first_i; i <= last_i; i++) {
            int64_t fh = ampc_avg_window(&ah, s.adaptive,
                                         s.count_include_pad, i, &lo, &hi);
            float t = 0.0f;
            for (int64_t j = first_j; j <= last_j; j++) {
                int64_t fw = ampc_avg_window(&aw, s.adaptive,
                                             s.count_include_pad, j, &lo,
                                             &hi);
                t += __fdiv_rn(nn_load<DT>(gp[i * s.ow + j]),
                               ampc_avg_divisor(&s, fh, fw));
            }
            acc += t;
        }
        gx[e] = nn_store<DT>(acc);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* x (planes, H, W) -> y (planes, OH, OW) */
extern "C" int
ampc_avg_pool2d_fwd_cuda(const ampc_avg_pool2d_shape *s, ampc_dtype dt,
                         const void *x, void *y)
{
    int64_t total = s->planes * s->oh * s->ow;
    if (total <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        avg_pool2d_fwd_kernel<DT><<<nn_blocks(total, AMPC_NN_THREADS),
                                    AMPC_NN_THREADS, 0, st>>>(
            *s, (const nn_t<DT> *)x, (nn_t<DT> *)y);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* grad_out (planes, OH, OW) -> grad_in (planes, H, W) */
extern "C" int
ampc_avg_pool2d_bwd_cuda(const ampc_avg_pool2d_shape *s, ampc_dtype dt,
                         const void *grad_out, void *grad_in)
{
    int64_t total = s->planes * s->h * s->w;
    if (total <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        avg_pool2d_bwd_kernel<DT><<<nn_blocks(total, AMPC_NN_THREADS),
                                    AMPC_NN_THREADS, 0, st>>>(
            *s, (const nn_t<DT> *)grad_out, (nn_t<DT> *)grad_in);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
