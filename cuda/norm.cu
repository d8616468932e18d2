/* norm.cu - batch norm and layer norm on CUDA, forward and backward, with
 * the CPU's semantics (csrc/cpu/norm_loops.h) and per-element math
 * (csrc/norm_math.h).  Batch norm: one block per channel, which sums over
 * N and HW (two passes: mean, then centred sums), updates that channel's
 * running statistics and normalises, so nothing waits on the host.  Layer
 * norm: one warp per row for the statistics and grad_x; the weight and bias
 * gradients are column sums over the rows, taken per chunk of rows into
 * scratch partials and folded in double in chunk order.  Thread partials are
 * float32 folded into doubles every AMPC_NORM_FOLD terms; block and warp
 * reductions are fixed trees, so results are deterministic.
 */
#include "norm.cuh"

#define BN_THREADS 512              /* threads per channel block */
#define LN_ROWS_PER_BLOCK (AMPC_NN_THREADS / 32)
#define LN_CHUNK 64                 /* rows per weight-gradient partial */
#define LN_COLS 32                  /* columns per weight-gradient block */
#define LN_ROW_LANES 8              /* rows a weight-gradient block spans */

// ----------------------------------------------------------------------------
// CUDA kernels: sums

/* Calls f(offset) for every element of channel ch of x (N, C, HW) that
 * this thread owns: threads tile (images, plane), so that a narrow plane
 * (HW = 1 for (N, C) inputs) still keeps the whole block busy. */
template <typename F>
__device__ __forceinline__ void
bn_for_channel(const ampc_batch_norm_shape &s, int64_t ch, F f)
{
    if (s.n * s.hw == 0) {
        return;
    }
    int64_t tw = s.hw < (int64_t)blockDim.x ? s.hw : (int64_t)blockDim.x;
    int64_t rows = (int64_t)blockDim.x / tw;
    int64_t tn = threadIdx.x / tw, tj = threadIdx.x % tw;
    if (tn >= rows) {
        return;
    }
    for (int64_t n = tn; n < s.n; n += rows) {
        int64_t base = (n * s.c + ch) * s.hw;
        for (int64_t j = tj; j < s.hw; j += tw) {
            f(base + j);
        }
    }
}

// ----------------------------------------------------------------------------
// CUDA kernels: batch norm

template <ampc_dtype PT>
__device__ __forceinline__ double
bn_param(const nn_t<PT> *t, int64_t ch, double dflt)
{
    return t == NULL ? dflt : (double)nn_load<PT>(t[ch]);
}

/* x (N, C, HW) -> y; a block per channel */
template <ampc_dtype XT, ampc_dtype PT>
__global__ void
batch_norm_fwd_kernel(ampc_batch_norm_shape s, const nn_t<XT> *x,
                      const nn_t<PT> *w, const nn_t<PT> *b, nn_t<PT> *rm,
                      nn_t<PT> *rv, float *mean, float *invstd, nn_t<XT> *y)
{
    __shared__ float chan[3];       /* mean, scale, shift */
    int64_t ch = blockIdx.x, count = s.n * s.hw;
    double mu = 0.0, var = 0.0;
    if (s.training && count > 0) {
        norm_acc acc;
        bn_for_channel(s, ch, [&](int64_t at) {
            acc.add(AMPC_NORM_SUM, nn_load<XT>(x[at]), 0.0f, 0.0f);
        });
        acc.fold();
        float m0 = (float)(nn_block_sum_d(acc.d1) / (double)count);
        norm_acc dev;
        bn_for_channel(s, ch, [&](int64_t at) {
            dev.add(AMPC_NORM_DEV, nn_load<XT>(x[at]), 0.0f, m0);
        });
        dev.fold();
        double s1 = nn_block_sum_d(dev.d1);
        double s2 = nn_block_sum_d(dev.d2);
        ampc_norm_moments(m0, s1, s2, count, &mu, &var);
    }
    if (threadIdx.x == 0) {
        if (!s.training) {
            mu = bn_param<PT>(rm, ch, 0.0);
            var = bn_param<PT>(rv, ch, 1.0);
        }
        else if (count > 0 && rm != NULL) {
            rm[ch] = nn_store_f64<PT>(ampc_norm_running(
                nn_load<PT>(rm[ch]), mu, s.momentum));
            rv[ch] = nn_store_f64<PT>(ampc_norm_running(
                nn_load<PT>(rv[ch]), ampc_norm_unbiased(var, count),
                s.momentum));
        }
        double inv = ampc_norm_invstd(var, s.eps);
        mean[ch] = chan[0] = (float)mu;
        invstd[ch] = (float)inv;
        chan[1] = (float)(bn_param<PT>(w, ch, 1.0) * inv);
        chan[2] = (float)bn_param<PT>(b, ch, 0.0);
    }
    __syncthreads();
    float m = chan[0], scale = chan[1], shift = chan[2];
    bn_for_channel(s, ch, [&](int64_t at) {
        y[at] = nn_store<XT>(ampc_norm_apply(nn_load<XT>(x[at]), m, scale,
                                             shift));
    });
}

/* grad_y, x (N, C, HW) -> grad_x, grad_weight, grad_bias; a block per
 * channel */
template <ampc_dtype XT, ampc_dtype PT>
__global__ void
batch_norm_bwd_kernel(ampc_batch_norm_shape s, const nn_t<XT> *gy,
                      const nn_t<XT> *x, const nn_t<PT> *w, const float *mean,
                      const float *invstd, nn_t<XT> *gx, nn_t<PT> *gw,
                      nn_t<PT> *gb)
{
    __shared__ float chan[3];       /* scale, mg, proj */
    int64_t ch = blockIdx.x, count = s.n * s.hw;
    int batch = s.training && count > 0;
    float m = mean[ch];
    double inv = invstd[ch], s1 = 0.0, s2 = 0.0;
    if (batch || gw != NULL || gb != NULL) {
        norm_acc acc;
        bn_for_channel(s, ch, [&](int64_t at) {
            acc.add(AMPC_NORM_GRAD, nn_load<XT>(x[at]), nn_load<XT>(gy[at]),
                    m);
        });
        acc.fold();
        s1 = nn_block_sum_d(acc.d1);
        s2 = nn_block_sum_d(acc.d2);
    }
    if (threadIdx.x == 0) {
        if (gb != NULL) {
            gb[ch] = nn_store_f64<PT>(s1);
        }
        if (gw != NULL) {
            gw[ch] = nn_store_f64<PT>(s2 * inv);
        }
        float mg = 0.0f, proj = 0.0f;
        if (batch) {
            ampc_norm_bwd_consts(s1, s2, count, inv, &mg, &proj);
        }
        chan[0] = (float)(bn_param<PT>(w, ch, 1.0) * inv);
        chan[1] = mg;
        chan[2] = proj;
    }
    __syncthreads();
    if (gx == NULL) {
        return;
    }
    float scale = chan[0], mg = chan[1], proj = chan[2];
    bn_for_channel(s, ch, [&](int64_t at) {
        float g = nn_load<XT>(gy[at]);
        gx[at] = nn_store<XT>(
            batch ? ampc_norm_bwd_one(g, nn_load<XT>(x[at]), m, mg, proj,
                                      scale)
                  : AMPC_MUL(g, scale));
    });
}

// ----------------------------------------------------------------------------
// CUDA kernels: layer norm

/* The warp's sums of `kind` over row xr (D elements; gr for NORM_GRAD,
 * times w when w is not NULL), every lane getting the totals. */
template <ampc_dtype XT, ampc_dtype PT>
__device__ __forceinline__ void
ln_row_sums(int kind, int64_t d, const nn_t<XT> *xr, const nn_t<XT> *gr,
            const nn_t<PT> *w, float m, double *s1, double *s2)
{
    norm_acc acc;
    for (int64_t k = threadIdx.x & 31; k < d; k += 32) {
        float g = 0.0f;
        if (kind == AMPC_NORM_GRAD) {
            g = nn_load<XT>(gr[k]);
            if (w != NULL) {
                g = AMPC_MUL(g, nn_load<PT>(w[k]));
            }
        }
        acc.add(kind, nn_load<XT>(xr[k]), g, m);
    }
    acc.fold();
    *s1 = nn_warp_sum_d(acc.d1);
    *s2 = nn_warp_sum_d(acc.d2);
}

/* x (rows, D) -> y, mean, rstd (rows); a warp per row */
template <ampc_dtype XT, ampc_dtype PT>
__global__ void
layer_norm_fwd_kernel(ampc_layer_norm_shape s, const nn_t<XT> *x,
                      const nn_t<PT> *w, const nn_t<PT> *b, float *mean,
                      float *rstd, nn_t<XT> *y)
{
    int lane = threadIdx.x & 31;
    int64_t warp = nn_tid() >> 5, nwarps = nn_nthreads() >> 5;
    for (int64_t row = warp; row < s.rows; row += nwarps) {
        const nn_t<XT> *xr = x + row * s.d;
        nn_t<XT> *yr = y + row * s.d;
        double s1, s2, mu, var;
        ln_row_sums<XT, PT>(AMPC_NORM_SUM, s.d, xr, NULL, NULL, 0.0f, &s1,
                            &s2);
        float m0 = (float)(s1 / (double)s.d);
        ln_row_sums<XT, PT>(AMPC_NORM_DEV, s.d, xr, NULL, NULL, m0, &s1,
                            &s2);
        ampc_norm_moments(m0, s1, s2, s.d, &mu, &var);
        float mf = (float)mu, rf = (float)ampc_norm_invstd(var, s.eps);
        if (lane == 0) {
            mean[row] = mf;
            rstd[row] = rf;
        }
        for (int64_t k = lane; k < s.d; k += 32) {
            float wk = w != NULL ? nn_load<PT>(w[k]) : 1.0f;
            float bk = b != NULL ? nn_load<PT>(b[k]) : 0.0f;
            yr[k] = nn_store<XT>(ampc_layer_norm_one(nn_load<XT>(xr[k]), mf,
                                                     rf, wk, bk));
        }
    }
}

/* grad_y, x (rows, D) -> grad_x; a warp per row */
template <ampc_dtype XT, ampc_dtype PT>
__global__ void
layer_norm_bwd_input_kernel(ampc_layer_norm_shape s, const nn_t<XT> *gy,
                            const nn_t<XT> *x, const nn_t<PT> *w,
                            const float *mean, const float *rstd,
                            nn_t<XT> *gx)
{
    int lane = threadIdx.x & 31;
    int64_t warp = nn_tid() >> 5, nwarps = nn_nthreads() >> 5;
    for (int64_t row = warp; row < s.rows; row += nwarps) {
        int64_t at = row * s.d;
        float mf = mean[row], rf = rstd[row], mg, proj;
        double s1, s2;
        ln_row_sums<XT, PT>(AMPC_NORM_GRAD, s.d, x + at, gy + at, w, mf, &s1,
                            &s2);
        ampc_norm_bwd_consts(s1, s2, s.d, rf, &mg, &proj);
        for (int64_t k = lane; k < s.d; k += 32) {
            float g = nn_load<XT>(gy[at + k]);
            if (w != NULL) {
                g = AMPC_MUL(g, nn_load<PT>(w[k]));
            }
            gx[at + k] = nn_store<XT>(ampc_norm_bwd_one(
                g, nn_load<XT>(x[at + k]), mf, mg, proj, rf));
        }
    }
}

/* part_w, part_b (chunks, D): the weight and bias gradients of one chunk
 * of LN_CHUNK rows for LN_COLS columns; block (LN_COLS, LN_ROW_LANES),
 * grid (column tiles, chunks).  Each thread sums its rows in float, then
 * the row lanes are added in a fixed order. */
template <ampc_dtype XT>
__global__ void
layer_norm_bwd_params_kernel(ampc_layer_norm_shape s, const nn_t<XT> *gy,
                             const nn_t<XT> *x, const float *mean,
                             const float *rstd, float *part_w, float *part_b)
{
    __shared__ float sw[LN_ROW_LANES][LN_COLS], sb[LN_ROW_LANES][LN_COLS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int64_t col = (int64_t)blockIdx.x * LN_COLS + tx;
    /* chunks beyond gridDim.y's 65535 are taken in turn (the same for
     * every thread of the block, so the barriers stay uniform) */
    for (int64_t chunk = blockIdx.y; chunk * LN_CHUNK < s.rows;
         chunk += gridDim.y) {
        int64_t r0 = chunk * LN_CHUNK;
        int64_t r1 = r0 + LN_CHUNK < s.rows ? r0 + LN_CHUNK : s.rows;
        float aw = 0.0f, ab = 0.0f;
        if (col < s.d) {
            for (int64_t r = r0 + ty; r < r1; r += LN_ROW_LANES) {
                float g = nn_load<XT>(gy[r * s.d + col]);
                aw = ampc_norm_wgrad_acc(aw, g,
                                         nn_load<XT>(x[r * s.d + col]),
                                         mean[r], rstd[r]);
                ab = AMPC_ADD(ab, g);
            }
        }
        sw[ty][tx] = aw;
        sb[ty][tx] = ab;
        __syncthreads();
        if (ty == 0 && col < s.d) {
            for (int k = 1; k < LN_ROW_LANES; k++) {
                aw = AMPC_ADD(aw, sw[k][tx]);
                ab = AMPC_ADD(ab, sb[k][tx]);
            }
            int64_t at = chunk * s.d + col;
            if (part_w != NULL) {
                part_w[at] = aw;
            }
            if (part_b != NULL) {
                part_b[at] = ab;
            }
        }
        __syncthreads();    /* sw, sb are rewritten for the next chunk */
    }
}

/* The partials (chunks, D) summed over chunks in order, in double. */
template <ampc_dtype PT>
__global__ void
layer_norm_fold_kernel(int64_t chunks, int64_t d, const float *part_w,
                       const float *part_b, nn_t<PT> *gw, nn_t<PT> *gb)
{
    for (int64_t col = nn_tid(); col < d; col += nn_nthreads()) {
        double sw = 0.0, sb = 0.0;
        for (int64_t k = 0; k < chunks; k++) {
            if (gw != NULL) {
                sw += part_w[k * d + col];
            }
            if (gb != NULL) {
                sb += part_b[k * d + col];
            }
        }
        if (gw != NULL) {
            gw[col] = nn_store_f64<PT>(sw);
        }
        if (gb != NULL) {
            gb[col] = nn_store_f64<PT>(sb);
        }
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* x (N, C, HW) -> y (N, C, HW); mean, invstd (C); running stats updated */
extern "C" int
ampc_batch_norm_fwd_cuda(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                         ampc_dtype pdt, const void *x, const void *weight,
                         const void *bias, void *running_mean,
                         void *running_var, float *mean, float *invstd,
                         void *y)
{
    if (s->c <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    NORM_DISPATCH(xdt, pdt, {
        batch_norm_fwd_kernel<XT, PT><<<(unsigned int)s->c, BN_THREADS, 0,
                                        st>>>(
            *s, (const nn_t<XT> *)x, (const nn_t<PT> *)weight,
            (const nn_t<PT> *)bias, (nn_t<PT> *)running_mean,
            (nn_t<PT> *)running_var, mean, invstd, (nn_t<XT> *)y);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* grad_y, x (N, C, HW) -> grad_x (N, C, HW), grad_weight, grad_bias (C) */
extern "C" int
ampc_batch_norm_bwd_cuda(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                         ampc_dtype pdt, const void *grad_y, const void *x,
                         const void *weight, const float *mean,
                         const float *invstd, void *grad_x, void *grad_weight,
                         void *grad_bias)
{
    if (s->c <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    NORM_DISPATCH(xdt, pdt, {
        batch_norm_bwd_kernel<XT, PT><<<(unsigned int)s->c, BN_THREADS, 0,
                                        st>>>(
            *s, (const nn_t<XT> *)grad_y, (const nn_t<XT> *)x,
            (const nn_t<PT> *)weight, mean, invstd, (nn_t<XT> *)grad_x,
            (nn_t<PT> *)grad_weight, (nn_t<PT> *)grad_bias);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* x (rows, D) -> y (rows, D); mean, rstd (rows) */
extern "C" int
ampc_layer_norm_fwd_cuda(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                         ampc_dtype pdt, const void *x, const void *weight,
                         const void *bias, float *mean, float *rstd, void *y)
{
    if (s->rows * s->d <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    NORM_DISPATCH(xdt, pdt, {
        layer_norm_fwd_kernel<XT, PT>
            <<<nn_blocks(s->rows, LN_ROWS_PER_BLOCK), AMPC_NN_THREADS, 0,
               st>>>(*s, (const nn_t<XT> *)x, (const nn_t<PT> *)weight,
                     (const nn_t<PT> *)bias, mean, rstd, (nn_t<XT> *)y);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* The weight and bias gradients: partials per chunk of rows, then the
 * fold; the scratch is freed behind the queued kernels (the allocator
 * reuses it only for later work on the same stream). */
template <ampc_dtype XT, ampc_dtype PT>
static int
layer_norm_params_launch(const ampc_layer_norm_shape *s, const void *gy,
                         const void *x, const float *mean, const float *rstd,
                         void *gw, void *gb, cudaStream_t st)
{
    int64_t chunks = CEIL_DIV(s->rows, (int64_t)LN_CHUNK);
    size_t part = (size_t)chunks * (size_t)s->d;
    void *scratch = NULL;
    int rc = ampc_cuda_scratch_alloc(2 * part * sizeof(float) + 1, &scratch);
    if (rc != 0) {
        return rc;
    }
    float *pw = gw != NULL ? (float *)scratch : NULL;
    float *pb = gb != NULL ? (float *)scratch + part : NULL;
    if (chunks > 0) {
        dim3 grid((unsigned int)CEIL_DIV(s->d, (int64_t)LN_COLS),
                  (unsigned int)(chunks < 65535 ? chunks : 65535));
        layer_norm_bwd_params_kernel<XT>
            <<<grid, dim3(LN_COLS, LN_ROW_LANES), 0, st>>>(
                *s, (const nn_t<XT> *)gy, (const nn_t<XT> *)x, mean, rstd,
                pw, pb);
        rc = (int)cudaGetLastError();
    }
    if (rc == 0) {
        layer_norm_fold_kernel<PT>
            <<<nn_blocks(s->d, AMPC_NN_THREADS), AMPC_NN_THREADS, 0, st>>>(
                chunks, s->d, pw, pb, (nn_t<PT> *)gw, (nn_t<PT> *)gb);
        rc = (int)cudaGetLastError();
    }
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "layer_norm_bwd launch",
                               rc);
        ampc_cuda_scratch_free(scratch);
        return rc;
    }
    return ampc_cuda_scratch_free(scratch);
}

/* grad_y, x (rows, D) -> grad_x (rows, D), grad_weight, grad_bias (D) */
extern "C" int
ampc_layer_norm_bwd_cuda(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                         ampc_dtype pdt, const void *grad_y, const void *x,
                         const void *weight, const float *mean,
                         const float *rstd, void *grad_x, void *grad_weight,
                         void *grad_bias)
{
    if (s->d <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    int rc = 0;
    NORM_DISPATCH(xdt, pdt, {
        if (grad_x != NULL && s->rows > 0) {
            layer_norm_bwd_input_kernel<XT, PT>
                <<<nn_blocks(s->rows, LN_ROWS_PER_BLOCK), AMPC_NN_THREADS,
                   0, st>>>(*s, (const nn_t<XT> *)grad_y,
                            (const nn_t<XT> *)x, (const nn_t<PT> *)weight,
                            mean, rstd, (nn_t<XT> *)grad_x);
            AMPC_CUDA_CHECK_LAUNCH();
        }
        if (grad_weight != NULL || grad_bias != NULL) {
            rc = layer_norm_params_launch<XT, PT>(s, grad_y, x, mean, rstd,
                                                  grad_weight, grad_bias,
                                                  st);
        }
    });
    return rc;
}
