/* softmax.cu - softmax and log_softmax on CUDA, forward and backward, over
 * the CPU's (outer, R, inner) layout.  inner == 1 (the last dim): one warp
 * per row, three passes over the row (max, sum of exp(x - max), output),
 * lanes striding the row so that loads coalesce.  inner > 1: one thread per
 * (outer, column), the same passes down the column, neighbouring threads on
 * neighbouring columns.  Max-subtracted, float32 sums, the per-element math
 * of nn_math.h (the CPU's exp, so the two differ only by summation order).
 */
#include "nn_common.cuh"

#define ROWS_PER_BLOCK (AMPC_NN_THREADS / 32)

// ----------------------------------------------------------------------------
// CUDA kernels

/* x (outer, R) of XT -> y (outer, R) of YT; a warp per row */
template <ampc_dtype XT, ampc_dtype YT, bool LOG>
__global__ void
softmax_rows_kernel(int64_t outer, int64_t r, const nn_t<XT> *x,
                    nn_t<YT> *y)
{
    int lane = threadIdx.x & 31;
    int64_t warp = nn_tid() >> 5, nwarps = nn_nthreads() >> 5;
    for (int64_t row = warp; row < outer; row += nwarps) {
        const nn_t<XT> *xr = x + row * r;
        nn_t<YT> *yr = y + row * r;
        float m = -INFINITY;
        for (int64_t k = lane; k < r; k += 32) {
            m = ampc_nn_max(m, nn_load<XT>(xr[k]));
        }
        m = nn_warp_max(m);
        float sum = 0.0f;
        for (int64_t k = lane; k < r; k += 32) {
            sum += ampc_exp_nonpos_f32(nn_load<XT>(xr[k]) - m);
        }
        sum = nn_warp_sum(sum);
        float ls = ampc_softmax_log_sum((double)sum);
        float inv = ampc_softmax_inv_sum((double)sum);
        for (int64_t k = lane; k < r; k += 32) {
            float v = nn_load<XT>(xr[k]);
            yr[k] = nn_store<YT>(LOG ? ampc_log_softmax_one(v, m, ls)
                                     : ampc_softmax_one(v, m, inv));
        }
    }
}

/* x (outer, R, inner) -> y; a thread per (outer, column) */
template <ampc_dtype XT, ampc_dtype YT, bool LOG>
__global__ void
softmax_cols_kernel(int64_t outer, int64_t r, int64_t inner,
                    const nn_t<XT> *x, nn_t<YT> *y)
{
    int64_t total = outer * inner;
    for (int64_t c = nn_tid(); c < total; c += nn_nthreads()) {
        int64_t o = c / inner, j = c % inner;
        const nn_t<XT> *xc = x + o * r * inner + j;
        nn_t<YT> *yc = y + o * r * inner + j;
        float m = -INFINITY;
        for (int64_t k = 0; k < r; k++) {
            m = ampc_nn_max(m, nn_load<XT>(xc[k * inner]));
        }
        float sum = 0.0f;
        for (int64_t k = 0; k < r; k++) {
            sum += ampc_exp_nonpos_f32(nn_load<XT>(xc[k * inner]) - m);
        }
        float ls = ampc_softmax_log_sum((double)sum);
        float inv = ampc_softmax_inv_sum((double)sum);
        for (int64_t k = 0; k < r; k++) {
            float v = nn_load<XT>(xc[k * inner]);
            yc[k * inner] = nn_store<YT>(
                LOG ? ampc_log_softmax_one(v, m, ls)
                    : ampc_softmax_one(v, m, inv));
        }
    }
}

/* The row's sum for the backward: sum(gy * y) (softmax), sum(gy) (log). */
template <ampc_dtype DT, bool LOG>
__device__ __forceinline__ float
softmax_bwd_term(nn_t<DT> g, nn_t<DT> v)
{
    return LOG ? nn_load<DT>(g) : nn_load<DT>(g) * nn_load<DT>(v);
}

template <ampc_dtype DT, bool LOG>
__device__ __forceinline__ nn_t<DT>
softmax_bwd_out(nn_t<DT> g, nn_t<DT> v, float d)
{
    float gf = nn_load<DT>(g), vf = nn_load<DT>(v);
    return nn_store<DT>(LOG ? ampc_log_softmax_bwd_one(vf, gf, d)
                            : ampc_softmax_bwd_one(vf, gf, d));
}

/* gy, y (outer, R) -> gx; a warp per row */
template <ampc_dtype DT, bool LOG>
__global__ void
softmax_bwd_rows_kernel(int64_t outer, int64_t r, const nn_t<DT> *gy,
                        const nn_t<DT> *y, nn_t<DT> *gx)
{
    int lane = threadIdx.x & 31;
    int64_t warp = nn_tid() >> 5, nwarps = nn_nthreads() >> 5;
    for (int64_t row = warp; row < outer; row += nwarps) {
        int64_t at = row * r;
        float d = 0.0f;
        for (int64_t k = lane; k < r; k += 32) {
            d += softmax_bwd_term<DT, LOG>(gy[at + k], y[at + k]);
        }
        d = nn_warp_sum(d);
        for (int64_t k = lane; k < r; k += 32) {
            gx[at + k] = softmax_bwd_out<DT, LOG>(gy[at + k], y[at + k], d);
        }
    }
}

/* gy, y (outer, R, inner) -> gx; a thread per (outer, column) */
template <ampc_dtype DT, bool LOG>
__global__ void
softmax_bwd_cols_kernel(int64_t outer, int64_t r, int64_t inner,
                        const nn_t<DT> *gy, const nn_t<DT> *y, nn_t<DT> *gx)
{
    int64_t total = outer * inner;
    for (int64_t c = nn_tid(); c < total; c += nn_nthreads()) {
        int64_t base = (c / inner) * r * inner + c % inner;
        float d = 0.0f;
        for (int64_t k = 0; k < r; k++) {
            int64_t at = base + k * inner;
            d += softmax_bwd_term<DT, LOG>(gy[at], y[at]);
        }
        for (int64_t k = 0; k < r; k++) {
            int64_t at = base + k * inner;
            gx[at] = softmax_bwd_out<DT, LOG>(gy[at], y[at], d);
        }
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

template <ampc_dtype XT, ampc_dtype YT, bool LOG>
static void
softmax_fwd_launch(int64_t outer, int64_t r, int64_t inner, const void *x,
                   void *y, cudaStream_t st)
{
    if (inner == 1) {
        softmax_rows_kernel<XT, YT, LOG>
            <<<nn_blocks(outer, ROWS_PER_BLOCK), AMPC_NN_THREADS, 0, st>>>(
                outer, r, (const nn_t<XT> *)x, (nn_t<YT> *)y);
    }
    else {
        softmax_cols_kernel<XT, YT, LOG>
            <<<nn_blocks(outer * inner, AMPC_NN_THREADS), AMPC_NN_THREADS,
               0, st>>>(outer, r, inner, (const nn_t<XT> *)x,
                        (nn_t<YT> *)y);
    }
}

/* x (outer, R, inner) of xdt -> y of ydt, R >= 1 */
extern "C" int
ampc_softmax_fwd_cuda(int log, ampc_dtype xdt, ampc_dtype ydt, int64_t outer,
                      int64_t r, int64_t inner, const void *x, void *y)
{
    if (outer * r * inner <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(xdt, XT, {
        AMPC_NN_DISPATCH(ydt, YT, {
            if (log) {
                softmax_fwd_launch<XT, YT, true>(outer, r, inner, x, y, st);
            }
            else {
                softmax_fwd_launch<XT, YT, false>(outer, r, inner, x, y, st);
            }
        });
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

template <ampc_dtype DT, bool LOG>
static void
softmax_bwd_launch(int64_t outer, int64_t r, int64_t inner, const void *gy,
                   const void *y, void *gx, cudaStream_t st)
{
    if (inner == 1) {
        softmax_bwd_rows_kernel<DT, LOG>
            <<<nn_blocks(outer, ROWS_PER_BLOCK), AMPC_NN_THREADS, 0, st>>>(
                outer, r, (const nn_t<DT> *)gy, (const nn_t<DT> *)y,
                (nn_t<DT> *)gx);
    }
    else {
        softmax_bwd_cols_kernel<DT, LOG>
            <<<nn_blocks(outer * inner, AMPC_NN_THREADS), AMPC_NN_THREADS,
               0, st>>>(outer, r, inner, (const nn_t<DT> *)gy,
                        (const nn_t<DT> *)y, (nn_t<DT> *)gx);
    }
}

/* grad_y, y (outer, R, inner) -> grad_x */
extern "C" int
ampc_softmax_bwd_cuda(int log, ampc_dtype dt, int64_t outer, int64_t r,
                      int64_t inner, const void *grad_y, const void *y,
                      void *grad_x)
{
    if (outer * r * inner <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        if (log) {
            softmax_bwd_launch<DT, true>(outer, r, inner, grad_y, y, grad_x,
                                         st);
        }
        else {
            softmax_bwd_launch<DT, false>(outer, r, inner, grad_y, y,
                                          grad_x, st);
        }
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
