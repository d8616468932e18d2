/* conv_gemm.cu - conv2d without cuDNN (ampc.backends.cudnn.enabled False,
 * or a build without cuDNN): im2col, the gemm slot, and col2im, in chunks
 * of images so that the column buffer stays bounded.  Slower than cuDNN,
 * with the CPU's arithmetic: float32 sums, each result rounded once, and a
 * fixed order (deterministic).
 *
 * Groups: im2col and col2im see all C channels, and group g's rows of the
 * column matrix, [g*CKK/G, (g+1)*CKK/G), are its channels' rows, so each
 * group is one GEMM on slices (its filters, its column rows, its output
 * channels), batched over the chunk's images or, for the weight gradient,
 * over the groups.
 */
#include "linalg.cuh"

#define CG_THREADS 256
/* The most bytes one chunk's column buffer may take. */
#define CG_COL_BYTES ((size_t)256 << 20)

static unsigned int
cg_grid(int64_t n)
{
    int64_t g = CEIL_DIV(n, (int64_t)CG_THREADS);
    return (unsigned int)(g < 1 ? 1 : (g < 65536 ? g : 65536));
}

// ----------------------------------------------------------------------------
// im2col and col2im

/* x (nb, C, H, W) -> col (nb, C*KH*KW, OH*OW): col[n][(c*KH + i)*KW + j]
 * [oh*OW + ow] = x[n][c][oh*sh - ph + i*dh][ow*sw - pw + j*dw], 0 in the
 * padding.  One thread per element of col (writes coalesced). */
template <typename T>
__global__ void
im2col_kernel(int64_t total, ampc_conv2d_shape s, const T *x, T *col)
{
    int64_t ohw = s.oh * s.ow, kk = s.kh * s.kw;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = idx % ohw, r = idx / ohw;
        int64_t row = r % (s.c * kk), n = r / (s.c * kk);
        int64_t c = row / kk, ij = row - c * kk;
        int64_t i = ij / s.kw, j = ij - i * s.kw;
        int64_t oh = q / s.ow, ow = q - oh * s.ow;
        int64_t h = oh * s.sh - s.ph + i * s.dh;
        int64_t w = ow * s.sw - s.pw + j * s.dw;
        T v = T(0);
        if (h >= 0 && h < s.h && w >= 0 && w < s.w) {
            v = x[((n * s.c + c) * s.h + h) * s.w + w];
        }
        col[idx] = v;
    }
}

/* colg (nb, C*KH*KW, OH*OW) float32 -> dx (nb, C, H, W): each dx element
 * gathers, in (i, j) order, the column entries its pixel was copied to
 * (no atomics: deterministic), summed in float32 and rounded once. */
template <typename S>
__global__ void
col2im_kernel(int64_t total, ampc_conv2d_shape s, const float *colg,
              typename S::type *dx)
{
    int64_t ohw = s.oh * s.ow, kk = s.kh * s.kw;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t w = idx % s.w, r = idx / s.w;
        int64_t h = r % s.h, nc = r / s.h;
        int64_t c = nc % s.c, n = nc / s.c;
        const float *base = colg + (n * s.c + c) * kk * ohw;
        float acc = 0.0f;
        for (int64_t i = 0; i < s.kh; i++) {
            int64_t th = h + s.ph - i * s.dh;
            if (th < 0 || th % s.sh != 0 || th / s.sh >= s.oh) {
                continue;
            }
            int64_t oh = th / s.sh;
            for (int64_t j = 0; j < s.kw; j++) {
                int64_t tw = w + s.pw - j * s.dw;
                if (tw < 0 || tw % s.sw != 0 || tw / s.sw >= s.ow) {
                    continue;
                }
                acc += base[(i * s.kw + j) * ohw + oh * s.ow + tw / s.sw];
            }
        }
        dx[idx] = S::store(acc);
    }
}

static int
im2col_launch(const ampc_conv2d_shape *s, int64_t nb, size_t es,
              const void *x, void *col)
{
    int64_t total = nb * s->c * s->kh * s->kw * s->oh * s->ow;
    if (es == 2) {
        im2col_kernel<uint16_t>
            <<<cg_grid(total), CG_THREADS, 0, ampc_cuda_stream()>>>(
                total, *s, (const uint16_t *)x, (uint16_t *)col);
    }
    else {
        im2col_kernel<float>
            <<<cg_grid(total), CG_THREADS, 0, ampc_cuda_stream()>>>(
                total, *s, (const float *)x, (float *)col);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

template <typename S>
static int
col2im_run(const ampc_conv2d_shape *s, int64_t nb, const float *colg,
           void *dx)
{
    int64_t total = nb * s->c * s->h * s->w;
    col2im_kernel<S><<<cg_grid(total), CG_THREADS, 0, ampc_cuda_stream()>>>(
        total, *s, colg, (typename S::type *)dx);
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

static int
col2im_launch(const ampc_conv2d_shape *s, ampc_dtype dt, int64_t nb,
              const float *colg, void *dx)
{
    switch (dt) {
    case AMPC_FLOAT16:
        return col2im_run<ampc_st_f16>(s, nb, colg, dx);
    case AMPC_BFLOAT16:
        return col2im_run<ampc_st_bf16>(s, nb, colg, dx);
    default:
        return col2im_run<ampc_st_f32>(s, nb, colg, dx);
    }
}

/* Images per chunk: the column buffer (of col_es-byte elements) at most
 * CG_COL_BYTES, at least one image. */
static int64_t
chunk_images(const ampc_conv2d_shape *s, size_t col_es)
{
    int64_t per = s->c * s->kh * s->kw * s->oh * s->ow * (int64_t)col_es;
    int64_t nb = per > 0 ? (int64_t)CG_COL_BYTES / per : s->n;
    nb = nb < 1 ? 1 : nb;
    return nb < s->n ? nb : s->n;
}

// ----------------------------------------------------------------------------
// the three directions

/* x (N, C, H, W), w (OC, C/G*KH*KW) -> y (N, OC, OH*OW) = w_g @ col[n]_g
 * + bias (per row) [relu] for each group g, one strided-batched GEMM per
 * chunk and group. */
int
ampc_conv2d_fwd_gemm(const ampc_conv2d_shape *s, ampc_dtype dt,
                     const void *x, const void *w, const void *bias,
                     int relu, void *y)
{
    size_t es = ampc_dtype_size[dt];
    int64_t ckk = s->c * s->kh * s->kw, ohw = s->oh * s->ow;
    int64_t kg = ckk / s->groups, ocg = s->oc / s->groups;
    int64_t nb = chunk_images(s, es);
    ampc_scratch col;
    int rc = ampc_cuda_scratch_alloc((size_t)(nb * ckk * ohw) * es, &col.p);
    for (int64_t n0 = 0; rc == 0 && n0 < s->n; n0 += nb) {
        int64_t cnt = s->n - n0 < nb ? s->n - n0 : nb;
        rc = im2col_launch(s, cnt, es,
                           (const char *)x + n0 * s->c * s->h * s->w * es,
                           col.p);
        if (rc != 0) {
            break;
        }
        for (int64_t gi = 0; rc == 0 && gi < s->groups; gi++) {
            ampc_gemm_args g = {};
            g.m = ocg;
            g.n = ohw;
            g.k = kg;
            g.dt = dt;
            g.a = (const char *)w + gi * ocg * kg * es;
            g.rsa = kg;
            g.csa = 1;
            g.b = (const char *)col.p + gi * kg * ohw * es;
            g.rsb = ohw;
            g.csb = 1;
            g.c = (char *)y + (n0 * s->oc + gi * ocg) * ohw * es;
            g.cdt = dt;
            g.ldc = ohw;
            g.bias = bias != NULL ? (const char *)bias + gi * ocg * es
                                  : NULL;
            g.bias_mode = bias != NULL ? AMPC_BIAS_ROW : AMPC_BIAS_NONE;
            g.relu = relu;
            g.batch = cnt;
            g.sba = 0;
            g.sbb = ckk * ohw;
            g.sbc = s->oc * ohw;
            rc = ampc_gemm_cuda(&g, 0);
        }
    }
    return rc;
}

/* dy (N, OC, OH*OW), w (OC, C/G*KH*KW) -> colg[n]_g = w_g^T @ dy[n]_g in
 * float32 for each group g, then dx (N, C, H, W) = col2im(colg). */
int
ampc_conv2d_bwd_input_gemm(const ampc_conv2d_shape *s, ampc_dtype dt,
                           const void *dy, const void *w, void *dx)
{
    size_t es = ampc_dtype_size[dt];
    int64_t ckk = s->c * s->kh * s->kw, ohw = s->oh * s->ow;
    int64_t kg = ckk / s->groups, ocg = s->oc / s->groups;
    int64_t nb = chunk_images(s, sizeof(float));
    ampc_scratch colg;
    int rc = ampc_cuda_scratch_alloc((size_t)(nb * ckk * ohw) *
                                         sizeof(float),
                                     &colg.p);
    for (int64_t n0 = 0; rc == 0 && n0 < s->n; n0 += nb) {
        int64_t cnt = s->n - n0 < nb ? s->n - n0 : nb;
        for (int64_t gi = 0; rc == 0 && gi < s->groups; gi++) {
            ampc_gemm_args g = {};
            g.m = kg;
            g.n = ohw;
            g.k = ocg;
            g.dt = dt;
            g.a = (const char *)w + gi * ocg * kg * es;
            g.rsa = 1;
            g.csa = kg;
            g.b = (const char *)dy + (n0 * s->oc + gi * ocg) * ohw * es;
            g.rsb = ohw;
            g.csb = 1;
            g.c = (float *)colg.p + gi * kg * ohw;
            g.cdt = AMPC_FLOAT32;
            g.ldc = ohw;
            g.batch = cnt;
            g.sba = 0;
            g.sbb = s->oc * ohw;
            g.sbc = ckk * ohw;
            rc = ampc_gemm_cuda(&g, 0);
        }
        if (rc == 0) {
            rc = col2im_launch(s, dt, cnt, (const float *)colg.p,
                               (char *)dx + n0 * s->c * s->h * s->w * es);
        }
    }
    return rc;
}

/* dy (N, OC, OH*OW), x -> dw (OC, C/G*KH*KW): group g's rows = sum over
 * n of dy[n]_g @ col[n]_g^T, summed in a float32 buffer image by image (a
 * fixed order), one GEMM batched over the groups per image, rounded
 * once. */
int
ampc_conv2d_bwd_weight_gemm(const ampc_conv2d_shape *s, ampc_dtype dt,
                            const void *dy, const void *x, void *dw)
{
    size_t es = ampc_dtype_size[dt];
    int64_t ckk = s->c * s->kh * s->kw, ohw = s->oh * s->ow;
    int64_t kg = ckk / s->groups, ocg = s->oc / s->groups;
    int64_t nb = chunk_images(s, es);
    ampc_scratch col, acc;
    int rc = ampc_cuda_scratch_alloc((size_t)(nb * ckk * ohw) * es, &col.p);
    if (rc == 0) {
        rc = ampc_cuda_scratch_alloc((size_t)(s->oc * kg) * sizeof(float),
                                     &acc.p);
    }
    for (int64_t n0 = 0; rc == 0 && n0 < s->n; n0 += nb) {
        int64_t cnt = s->n - n0 < nb ? s->n - n0 : nb;
        rc = im2col_launch(s, cnt, es,
                           (const char *)x + n0 * s->c * s->h * s->w * es,
                           col.p);
        for (int64_t i = 0; rc == 0 && i < cnt; i++) {
            ampc_gemm_args g = {};
            g.m = ocg;
            g.n = kg;
            g.k = ohw;
            g.dt = dt;
            g.a = (const char *)dy + (n0 + i) * s->oc * ohw * es;
            g.rsa = ohw;
            g.csa = 1;
            g.b = (const char *)col.p + i * ckk * ohw * es;
            g.rsb = 1;
            g.csb = ohw;
            g.c = acc.p;
            g.cdt = AMPC_FLOAT32;
            g.ldc = kg;
            g.beta = n0 + i > 0;
            g.batch = s->groups;
            g.sba = ocg * ohw;
            g.sbb = kg * ohw;
            g.sbc = ocg * kg;
            rc = ampc_gemm_cuda(&g, 0);
        }
    }
    if (rc == 0) {
        /* the float32 sums rounded once into dw */
        rc = ampc_gemm_epilogue_launch(1, s->oc, kg, (const float *)acc.p,
                                       dw, dt, kg, 0, 0, NULL, dt,
                                       AMPC_BIAS_NONE, 0);
    }
    return rc;
}
