/* gemm.c - the AVX2 GEMM parts: a 4 x 24 float32 microkernel (12 ymm
 * accumulators, FMA with broadcast A), the shared x86 packing, and the
 * conv2d entry points and peak-FLOP loop of this level.
 */
#if defined(__x86_64__)

#include "cpu/depthwise.h"
#include "cpu/gemm_x86.h"

#define MR 4
#define NR 24               /* 3 ymm */

// ----------------------------------------------------------------------------
// parts

static AMPC_TARGET_AVX2 void
pack_avx2(ampc_dtype dt, const void *src, int64_t sl, int64_t sk,
          int64_t count, int64_t k, int w, float *dst)
{
    /* one copy of the packing loops per dtype, so the loads do not branch */
    switch (dt) {
    case AMPC_FLOAT32:
        ampc_x86_pack(AMPC_FLOAT32, src, sl, sk, count, k, w, dst);
        break;
    case AMPC_FLOAT16:
        ampc_x86_pack(AMPC_FLOAT16, src, sl, sk, count, k, w, dst);
        break;
    default:
        ampc_x86_pack(AMPC_BFLOAT16, src, sl, sk, count, k, w, dst);
        break;
    }
}

/* a (k, 4) packed, b (k, 24) packed -> the 4 x 24 tile t.  Per depth: 3
 * loads of B, 4 broadcasts of A, 12 FMAs into registers. */
static AMPC_TARGET_AVX2 void
kernel_avx2(int64_t k, const float *a, const float *b,
            const ampc_gemm_tile *t)
{
    __m256 c[MR][3];
    __attribute__((aligned(32))) float r[MR * NR];

#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        c[i][0] = _mm256_setzero_ps();
        c[i][1] = _mm256_setzero_ps();
        c[i][2] = _mm256_setzero_ps();
    }
    ampc_gemm_pf pf = ampc_gemm_pf_init(t);
    for (int64_t p = 0; p < k; p++) {
        ampc_gemm_pf_step(&pf, p);
        __m256 b0 = _mm256_loadu_ps(b);
        __m256 b1 = _mm256_loadu_ps(b + 8);
        __m256 b2 = _mm256_loadu_ps(b + 16);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
            c[i][0] = _mm256_fmadd_ps(ai, b0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(ai, b1, c[i][1]);
            c[i][2] = _mm256_fmadd_ps(ai, b2, c[i][2]);
        }
        a += MR;
        b += NR;
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        _mm256_store_ps(r + i * NR, c[i][0]);
        _mm256_store_ps(r + i * NR + 8, c[i][1]);
        _mm256_store_ps(r + i * NR + 16, c[i][2]);
    }
    ampc_gemm_epilogue(&ampc_cvt_avx2, r, NR, t);
}

static AMPC_TARGET_AVX2 void
im2col_avx2(const ampc_conv2d_shape *s, size_t es, const void *x,
            void *col)
{
    /* one copy per element size, so the row loops do not branch */
    if (es == 4) {
        ampc_im2col_loop(s, 4, x, col);
    }
    else {
        ampc_im2col_loop(s, 2, x, col);
    }
}

static AMPC_TARGET_AVX2 void
col2im_avx2(const ampc_conv2d_shape *s, const float *dcol, float *img)
{
    ampc_col2im_loop(s, dcol, img);
}

static AMPC_TARGET_AVX2 void
im2col_panels_avx2(const ampc_conv2d_shape *s, ampc_dtype dt,
                   const void *xp, int nr, float *dst)
{
    /* one copy per dtype, so the widening loads do not branch */
    switch (dt) {
    case AMPC_FLOAT32:
        ampc_im2col_panels_loop(s, AMPC_FLOAT32, xp, nr, dst,
                                ampc_x86_widen);
        break;
    case AMPC_FLOAT16:
        ampc_im2col_panels_loop(s, AMPC_FLOAT16, xp, nr, dst,
                                ampc_x86_widen);
        break;
    default:
        ampc_im2col_panels_loop(s, AMPC_BFLOAT16, xp, nr, dst,
                                ampc_x86_widen);
        break;
    }
}

static AMPC_TARGET_AVX2 void
dw_fwd_avx2(const ampc_conv2d_shape *s, const float *xp, const float *wk,
            float *out)
{
    ampc_dw_fwd_loop(s, xp, wk, out);
}

static AMPC_TARGET_AVX2 void
dw_bwd_input_avx2(const ampc_conv2d_shape *s, const float *dy,
                  const float *wk, float *dxp)
{
    ampc_dw_bwd_input_loop(s, dy, wk, dxp);
}

static AMPC_TARGET_AVX2 void
dw_bwd_weight_avx2(const ampc_conv2d_shape *s, const float *dy,
                   const float *xp, float *lanes, float *gw)
{
    ampc_dw_bwd_weight_loop(s, dy, xp, lanes, gw);
}

static const ampc_gemm_parts parts_avx2 = {
    MR, NR, 256, 128, 1536, pack_avx2, kernel_avx2, &ampc_cvt_avx2,
    im2col_avx2, col2im_avx2, im2col_panels_avx2,
    dw_fwd_avx2, dw_bwd_input_avx2, dw_bwd_weight_avx2,
};

// ----------------------------------------------------------------------------
// kernels

/* A (M, K), B (K, N) -> C (M, N) (kernels.h) */
int
ampc_gemm_avx2(const ampc_gemm_args *g)
{
    return ampc_gemm_run(&parts_avx2, g);
}

/* x (N, C, H, W), w (OC, C, KH, KW), bias (OC) -> y (N, OC, OH, OW) */
int
ampc_conv2d_fwd_avx2(const ampc_conv2d_shape *s, ampc_dtype dt,
                     const void *x, const void *w, const void *bias,
                     int relu, void *y)
{
    return ampc_conv2d_fwd_run(&parts_avx2, s, dt, x, w, bias, relu, y);
}

/* dy (N, OC, OH, OW), w (OC, C, KH, KW) -> dx (N, C, H, W) */
int
ampc_conv2d_bwd_input_avx2(const ampc_conv2d_shape *s, ampc_dtype dt,
                           const void *dy, const void *w, void *dx)
{
    return ampc_conv2d_bwd_input_run(&parts_avx2, s, dt, dy, w, dx);
}

/* dy (N, OC, OH, OW), x (N, C, H, W) -> dw (OC, C, KH, KW), db (OC) */
int
ampc_conv2d_bwd_weight_avx2(const ampc_conv2d_shape *s, ampc_dtype dt,
                            const void *dy, const void *x, void *dw,
                            void *db)
{
    return ampc_conv2d_bwd_weight_run(&parts_avx2, s, dt, dy, x, dw, db);
}

// ----------------------------------------------------------------------------
// peak FLOP/s

enum { PEAK_ITERS = 1 << 18, PEAK_CHAINS = 12 };

/* 12 independent FMA chains of 8 lanes: enough to cover the FMA latency on
 * two ports. */
static AMPC_TARGET_AVX2 double
peak_fma_avx2(void)
{
    volatile float seed = 1.0f;
    __m256 x = _mm256_set1_ps(seed * 0.999f), y = _mm256_set1_ps(seed * 1e-7f);
    __m256 acc[PEAK_CHAINS];
#pragma GCC unroll 12
    for (int l = 0; l < PEAK_CHAINS; l++) {
        acc[l] = _mm256_set1_ps((float)l);
    }
    for (int it = 0; it < PEAK_ITERS; it++) {
#pragma GCC unroll 12
        for (int l = 0; l < PEAK_CHAINS; l++) {
            acc[l] = _mm256_fmadd_ps(acc[l], x, y);
        }
    }
    __m256 s = acc[0];
#pragma GCC unroll 12
    for (int l = 1; l < PEAK_CHAINS; l++) {
        s = _mm256_add_ps(s, acc[l]);
    }
    float out[8];
    _mm256_storeu_ps(out, s);
    seed = out[0] + out[7];
    return 2.0 * 8 * PEAK_CHAINS * PEAK_ITERS;
}

double
ampc_peak_flops_avx2(ampc_peak_kind kind, double seconds, int nthreads)
{
    if (kind != AMPC_PEAK_FMA) {
        return 0.0;
    }
    return ampc_peak_run(peak_fma_avx2, seconds, nthreads);
}

#endif /* __x86_64__ */
