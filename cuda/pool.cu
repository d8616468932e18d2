/* pool.cu - max_pool2d on CUDA, forward and backward.  The forward runs
 * torch's window rule per output (nn_math.h ampc_pool_takes: a NaN wins, a
 * tie keeps the first max); the backward is a gather without atomics, each
 * input element summing, in output order, the gradients whose index points
 * at it: deterministic, and the CPU's bits in float32.  A folded ReLU's
 * masked index (-1 - idx, kernels.h) points at no element, so the gather
 * skips it.
 */
#include "nn_common.cuh"

// ----------------------------------------------------------------------------
// CUDA kernels

/* x (planes, H, W) -> y, idx (planes, OH, OW); one thread per output.
 * Neighbouring threads take neighbouring windows of one row: their loads
 * overlap and are served by L1. */
template <ampc_dtype DT>
__global__ void
max_pool2d_fwd_kernel(ampc_pool2d_shape s, const nn_t<DT> *x, nn_t<DT> *y,
                      int64_t *idx)
{
    int64_t total = s.planes * s.oh * s.ow;
    for (int64_t o = nn_tid(); o < total; o += nn_nthreads()) {
        int64_t j = o % s.ow;
        int64_t i = (o / s.ow) % s.oh;
        int64_t p = o / (s.ow * s.oh);
        const nn_t<DT> *xp = x + p * s.h * s.w;
        int64_t ih0 = i * s.sh - s.ph;
        int64_t ih1 = min(ih0 + (s.kh - 1) * s.dh + 1, s.h);
        ih0 = ampc_pool_first(ih0, s.dh);
        int64_t iw0 = j * s.sw - s.pw;
        int64_t iw1 = min(iw0 + (s.kw - 1) * s.dw + 1, s.w);
        iw0 = ampc_pool_first(iw0, s.dw);
        int64_t best_i = ih0 * s.w + iw0;
        float best = -INFINITY;
        for (int64_t ih = ih0; ih < ih1; ih += s.dh) {
            for (int64_t iw = iw0; iw < iw1; iw += s.dw) {
                int64_t at = ih * s.w + iw;
                float v = nn_load<DT>(xp[at]);
                if (ampc_pool_takes(v, best)) {
                    best = v;
                    best_i = at;
                }
            }
        }
        y[o] = nn_store<DT>(best);
        idx[o] = ampc_pool_masked_index(best_i, best, s.relu_masked);
    }
}

/* Reports the first index outside [0, H*W) (and not a relu_masked one)
 * that this thread sees among idx (planes * OH * OW): the gather below
 * would silently skip it. */
__device__ __forceinline__ void
pool_check_indices(const ampc_pool2d_shape &s, const int64_t *idx,
                   ampc_nn_error *err)
{
    int64_t hw = s.h * s.w, total = s.planes * s.oh * s.ow;
    for (int64_t o = nn_tid(); o < total; o += nn_nthreads()) {
        if ((uint64_t)idx[o] >= (uint64_t)hw &&
            !ampc_pool_masked_ok(idx[o], hw, s.relu_masked)) {
            nn_report(err, idx[o], hw, AMPC_NN_ERR_POOL_INDEX);
            return;
        }
    }
}

/* grad_out, idx (planes, OH, OW) -> grad_in (planes, H, W), the forward's
 * geometry in s: one thread per input element (ih, iw), which lies in the
 * windows of output rows i = (ih + ph - a * dh) / sh (a in [0, KH), exact
 * division) and likewise for columns; they are visited in increasing
 * (i, j), the CPU's order, and summed in float32 from 0. */
template <ampc_dtype DT>
__global__ void
max_pool2d_bwd_gather_kernel(ampc_pool2d_shape s, const nn_t<DT> *gy,
                             const int64_t *idx, nn_t<DT> *gx,
                             ampc_nn_error *err)
{
    pool_check_indices(s, idx, err);
    int64_t total = s.planes * s.h * s.w;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t iw = e % s.w;
        int64_t ih = (e / s.w) % s.h;
        int64_t p = e / (s.w * s.h);
        int64_t at = ih * s.w + iw;
        const int64_t *ip = idx + p * s.oh * s.ow;
        const nn_t<DT> *gp = gy + p * s.oh * s.ow;
        float acc = 0.0f;
        /* a from KH - 1 down to 0: i increases */
        for (int64_t a = s.kh - 1; a >= 0; a--) {
            int64_t num = ih + s.ph - a * s.dh;
            if (num < 0 || num % s.sh != 0) {
                continue;
            }
            int64_t i = num / s.sh;
            if (i >= s.oh) {
                break;
            }
            for (int64_t b = s.kw - 1; b >= 0; b--) {
                int64_t numw = iw + s.pw - b * s.dw;
                if (numw < 0 || numw % s.sw != 0) {
                    continue;
                }
                int64_t j = numw / s.sw;
                if (j >= s.ow) {
                    break;
                }
                if (ip[i * s.ow + j] == at) {
                    acc += nn_load<DT>(gp[i * s.ow + j]);
                }
            }
        }
        gx[e] = nn_store<DT>(acc);
    }
}

/* Without the geometry: one thread per plane zeroes its float32 plane
 * (grad_in itself for float32, else scratch) and adds its outputs'
 * gradients at their indices, in output order. */
template <ampc_dtype DT>
__global__ void
max_pool2d_bwd_scan_kernel(ampc_pool2d_shape s, const nn_t<DT> *gy,
                           const int64_t *idx, float *acc,
                           ampc_nn_error *err)
{
    int64_t hw = s.h * s.w, ohw = s.oh * s.ow;
    for (int64_t p = nn_tid(); p < s.planes; p += nn_nthreads()) {
        float *plane = acc + p * hw;
        for (int64_t k = 0; k < hw; k++) {
            plane[k] = 0.0f;
        }
        for (int64_t k = 0; k < ohw; k++) {
            int64_t at = idx[p * ohw + k];
            if ((uint64_t)at < (uint64_t)hw) {
                plane[at] += nn_load<DT>(gy[p * ohw + k]);
            }
            else if (!ampc_pool_masked_ok(at, hw, s.relu_masked)) {
                nn_report(err, at, hw, AMPC_NN_ERR_POOL_INDEX);
            }
        }
    }
}

/* acc (n) float32 -> out (n) of DT, rounded once */
template <ampc_dtype DT>
__global__ void
narrow_kernel(int64_t n, const float *acc, nn_t<DT> *out)
{
    for (int64_t i = nn_tid(); i < n; i += nn_nthreads()) {
        out[i] = nn_store<DT>(acc[i]);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* Whether one of the `out` windows along an axis of `in` elements holds no
 * element (ceil_mode with padding and dilation: a last window can lie wholly
 * in the padding).  The forward gives such an output -inf and the index
 * ih0 * W + iw0 (torch's rule), which can name an element outside that
 * window, where the CPU's backward adds the gradient; the gather, which
 * visits only windows that hold the element, would miss it. */
static int
pool_axis_has_empty_window(int64_t in, int64_t out, int64_t k, int64_t st,
                           int64_t pad, int64_t dil)
{
    for (int64_t i = 0; i < out; i++) {
        int64_t a0 = i * st - pad;
        int64_t a1 = a0 + (k - 1) * dil + 1 < in ? a0 + (k - 1) * dil + 1
                                                 : in;
        if (ampc_pool_first(a0, dil) >= a1) {
            return 1;
        }
    }
    return 0;
}

/* x (planes, H, W) -> y, idx (planes, OH, OW) */
extern "C" int
ampc_max_pool2d_fwd_cuda(const ampc_pool2d_shape *s, ampc_dtype dt,
                         const void *x, void *y, int64_t *idx)
{
    int64_t total = s->planes * s->oh * s->ow;
    if (total <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        max_pool2d_fwd_kernel<DT><<<nn_blocks(total, AMPC_NN_THREADS),
                                    AMPC_NN_THREADS, 0, st>>>(
            *s, (const nn_t<DT> *)x, (nn_t<DT> *)y, idx);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* grad_out, idx (planes, OH, OW) -> grad_in (planes, H, W) */
extern "C" int
ampc_max_pool2d_bwd_cuda(const ampc_pool2d_shape *s, ampc_dtype dt,
                         const void *grad_out, const int64_t *idx,
                         void *grad_in)
{
    int64_t n = s->planes * s->h * s->w;
    if (n <= 0) {
        return 0;
    }
    ampc_nn_error *err;
    int rc = ampc_nn_error_device(&err);
    if (rc != 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    /* an empty window's index may lie outside it: the scan then, as the CPU */
    if (s->kh > 0 &&
        !pool_axis_has_empty_window(s->h, s->oh, s->kh, s->sh, s->ph,
                                    s->dh) &&
        !pool_axis_has_empty_window(s->w, s->ow, s->kw, s->sw, s->pw,
                                    s->dw)) {
        AMPC_NN_DISPATCH(dt, DT, {
            max_pool2d_bwd_gather_kernel<DT>
                <<<nn_blocks(n, AMPC_NN_THREADS), AMPC_NN_THREADS, 0, st>>>(
                    *s, (const nn_t<DT> *)grad_out, idx,
                    (nn_t<DT> *)grad_in, err);
        });
        AMPC_CUDA_CHECK_LAUNCH();
        return 0;
    }
    float *acc = (float *)grad_in;
    if (dt != AMPC_FLOAT32) {
        rc = ampc_cuda_scratch_alloc((size_t)n * sizeof(float),
                                     (void **)&acc);
        if (rc != 0) {
            return rc;
        }
    }
    AMPC_NN_DISPATCH(dt, DT, {
        max_pool2d_bwd_scan_kernel<DT>
            <<<nn_blocks(s->planes, 128), 128, 0, st>>>(
                *s, (const nn_t<DT> *)grad_out, idx, acc, err);
        rc = (int)cudaGetLastError();
        if (rc == 0 && dt != AMPC_FLOAT32) {
            narrow_kernel<DT><<<nn_blocks(n, AMPC_NN_THREADS),
                                AMPC_NN_THREADS, 0, st>>>(
                n, acc, (nn_t<DT> *)grad_in);
            rc = (int)cudaGetLastError();
        }
    });
    if (acc != (float *)grad_in) {
        /* safe while the kernels above are queued: the block is reused only
         * by later work on this stream */
        ampc_cuda_scratch_free(acc);
    }
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "max_pool2d_bwd_kernel",
                               rc);
    }
    return rc;
}

// ----------------------------------------------------------------------------
// the gather at the indices (second derivatives)

/* out[o] = x[plane(o), idx[o]] for every output o, elements of type T (the
 * dtype's bits: nothing is computed); a relu_masked index gives 0, one
 * outside its plane gives 0 and is reported. */
template <typename T>
__global__ void
max_pool2d_gather_kernel(ampc_pool2d_shape s, const T *x, const int64_t *idx,
                         T *out, ampc_nn_error *err)
{
    int64_t hw = s.h * s.w, ohw = s.oh * s.ow, total = s.planes * ohw;
    for (int64_t o = nn_tid(); o < total; o += nn_nthreads()) {
        int64_t at = idx[o];
        if ((uint64_t)at < (uint64_t)hw) {
            out[o] = x[(o / ohw) * hw + at];
            continue;
        }
        out[o] = T(0);
        if (!ampc_pool_masked_ok(at, hw, s.relu_masked)) {
            nn_report(err, at, hw, AMPC_NN_ERR_POOL_INDEX);
        }
    }
}

extern "C" int
ampc_max_pool2d_gather_cuda(const ampc_pool2d_shape *s, size_t es,
                            const void *x, const int64_t *idx, void *out)
{
    int64_t n = s->planes * s->oh * s->ow;
    if (n <= 0) {
        return 0;
    }
    ampc_nn_error *err;
    int rc = ampc_nn_error_device(&err);
    if (rc != 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    unsigned blocks = nn_blocks(n, AMPC_NN_THREADS);
    if (es == 4) {
        max_pool2d_gather_kernel<uint32_t><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *s, (const uint32_t *)x, idx, (uint32_t *)out, err);
    }
    else if (es == 2) {
        max_pool2d_gather_kernel<uint16_t><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *s, (const uint16_t *)x, idx, (uint16_t *)out, err);
    }
    else {
        ampc_cuda_record_error(__FILE__, __LINE__,
                               "max_pool2d_gather: element size",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
