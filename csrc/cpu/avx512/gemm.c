/* gemm.c - the AVX-512 GEMM parts: an 8 x 48 float32 microkernel (24 zmm
 * accumulators, FMA with broadcast A), the shared x86 packing, and the
 * conv2d entry points and peak-FLOP loops of this level.
 */
#if defined(__x86_64__)

#include "cpu/depthwise.h"
#include "cpu/gemm_x86.h"

#define MR 8
#define NR 48               /* 3 zmm */

#define AMPC_TARGET_AVX512_BF16 \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl," \
                          "avx512bf16")))

// ----------------------------------------------------------------------------
// parts

static AMPC_TARGET_AVX512 void
pack_avx512(ampc_dtype dt, const void *src, int64_t sl, int64_t sk,
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

// ----------------------------------------------------------------------------
// the tile epilogue
//
// A tile of whole rows (all but the bottom edge of C) is finished straight
// from the registers, 16 columns at a time with masks for a ragged right
// edge, and one copy of the stores per case, so the common cases carry no
// tests between them: measured on one core at K = 27 (the lab's first
// layer), 170 GFLOP/s against 120 through gemm.h's portable epilogue, whose
// converter and memcpy calls per row cost a third of the microkernel.  The
// bottom edge and C += A B go through a stack copy and rolled loops
// (finish_tile), kept out of line: the same work unrolled into every
// microkernel variant ran slower than the portable epilogue (measured).

#define AMPC_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* 16 elements of dt at p (those in mask k; the rest read as 0) as float32. */
static AMPC_TARGET_AVX512 __attribute__((always_inline)) inline __m512
load16(ampc_dtype dt, const char *p, __mmask16 k)
{
    if (dt == AMPC_FLOAT32) {
        return _mm512_maskz_loadu_ps(k, p);
    }
    __m256i h = _mm256_maskz_loadu_epi16(k, p);
    if (dt == AMPC_FLOAT16) {
        return _mm512_cvtph_ps(h);
    }
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h),
                                                 16));
}

/* Stores the elements of v in mask k to p as dt, rounded once (RNE; for
 * bfloat16 as ampc_f32_to_bf16, NaN kept quiet). */
static AMPC_TARGET_AVX512 __attribute__((always_inline)) inline void
store16(ampc_dtype dt, char *p, __mmask16 k, __m512 v)
{
    if (dt == AMPC_FLOAT32) {
        _mm512_mask_storeu_ps(p, k, v);
        return;
    }
    __m256i h;
    if (dt == AMPC_FLOAT16) {
        h = _mm512_cvtps_ph(v, AMPC_RNE);
    }
    else {
        __m512i u = _mm512_castps_si512(v);
        __m512i hi = _mm512_srli_epi32(u, 16);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(
            _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
            _mm512_set1_epi32(0x7f800000));
        __m512i bias = _mm512_add_epi32(
            _mm512_and_si512(hi, _mm512_set1_epi32(1)),
            _mm512_set1_epi32(0x7fff));
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
        r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
        h = _mm512_cvtepi32_epi16(r);
    }
    _mm256_mask_storeu_epi16(p, k, h);
}

/* The tile r (MR x NR floats) finished as t says (gemm.h's
 * ampc_gemm_tile), for C of dtype cdt. */
static AMPC_TARGET_AVX512 __attribute__((always_inline)) inline void
finish_rows(ampc_dtype cdt, const float *r, const ampc_gemm_tile *t)
{
    const int64_t es = (int64_t)ampc_dtype_size[cdt];
    for (int i = 0; i < t->m; i++) {
        const float *ri = r + i * NR;
        float *acc = t->acc_in || !t->final ? t->acc + i * t->ldacc : NULL;
        char *crow = (char *)t->c + i * t->ldc * es;
        for (int v = 0; v * 16 < t->n; v++) {
            int rem = t->n - 16 * v;
            __mmask16 k = rem >= 16 ? (__mmask16)0xffff
                                    : (__mmask16)((1u << rem) - 1u);
            __m512 x = _mm512_load_ps(ri + 16 * v);
            if (t->acc_in) {
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, acc + 16 * v));
            }
            if (!t->final) {
                _mm512_mask_storeu_ps(acc + 16 * v, k, x);
                continue;
            }
            if (t->beta) {
                x = _mm512_add_ps(x, load16(cdt, crow + 16 * v * es, k));
            }
            if (t->bias_row != NULL) {
                x = _mm512_add_ps(x, _mm512_set1_ps(t->bias_row[i]));
            }
            if (t->bias_col != NULL) {
                x = _mm512_add_ps(
                    x, _mm512_maskz_loadu_ps(k, t->bias_col + 16 * v));
            }
            if (t->relu) {
                /* keep x > 0 and NaN; -0 and below become +0 */
                x = _mm512_maskz_mov_ps(
                    _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ),
                    x);
            }
            store16(cdt, crow + 16 * v * es, k, x);
        }
    }
}

static AMPC_TARGET_AVX512 __attribute__((noinline)) void
finish_tile(const float *r, const ampc_gemm_tile *t)
{
    switch (t->cdt) {
    case AMPC_FLOAT32:
        finish_rows(AMPC_FLOAT32, r, t);
        break;
    case AMPC_FLOAT16:
        finish_rows(AMPC_FLOAT16, r, t);
        break;
    default:
        finish_rows(AMPC_BFLOAT16, r, t);
        break;
    }
}

/* The first nv vectors of every row of the tile in registers to memory
 * (columns past t->n masked off): dst of dtype cdt (raw float32 sums to
 * acc, or C), adding acc's sums first when acc_in, and the bias and ReLU
 * when extras. */
static AMPC_TARGET_AVX512 __attribute__((always_inline)) inline void
store_rows(int nv, __m512 c[MR][3], const ampc_gemm_tile *t, char *dst,
           int64_t ld, ampc_dtype cdt, int acc_in, int extras)
{
    const int64_t es = (int64_t)ampc_dtype_size[cdt];
    __mmask16 mk[3];
    for (int v = 0; v < 3; v++) {
        int rem = t->n - 16 * v;
        mk[v] = rem >= 16 ? (__mmask16)0xffff
                          : (rem > 0 ? (__mmask16)((1u << rem) - 1u) : 0);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        const float *src = acc_in ? t->acc + i * t->ldacc : NULL;
        char *d = dst + i * ld * es;
        for (int v = 0; v < nv; v++) {
            __m512 x = c[i][v];
            if (acc_in) {
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk[v],
                                                           src + 16 * v));
            }
            if (extras && t->bias_row != NULL) {
                x = _mm512_add_ps(x, _mm512_set1_ps(t->bias_row[i]));
            }
            if (extras && t->bias_col != NULL) {
                x = _mm512_add_ps(
                    x, _mm512_maskz_loadu_ps(mk[v], t->bias_col + 16 * v));
            }
            if (extras && t->relu) {
                x = _mm512_maskz_mov_ps(
                    _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ),
                    x);
            }
            store16(cdt, d + 16 * v * es, mk[v], x);
        }
    }
}

/* One copy of store_rows per case, so the common ones (raw sums, a plain
 * float32 C) carry no tests between the stores: with the tests in, the
 * plain case ran a quarter slower (measured). */
static AMPC_TARGET_AVX512 __attribute__((always_inline)) inline void
finish_rows_nv(int nv, __m512 c[MR][3], const ampc_gemm_tile *t)
{
    if (!t->final) {
        if (t->acc_in) {
            store_rows(nv, c, t, (char *)t->acc, t->ldacc, AMPC_FLOAT32, 1,
                       0);
        }
        else {
            store_rows(nv, c, t, (char *)t->acc, t->ldacc, AMPC_FLOAT32, 0,
                       0);
        }
        return;
    }
    char *dst = t->c;
    int extras = t->bias_row != NULL || t->bias_col != NULL || t->relu;
    if (t->cdt == AMPC_FLOAT32) {
        if (extras) {
            store_rows(nv, c, t, dst, t->ldc, AMPC_FLOAT32, t->acc_in, 1);
        }
        else if (t->acc_in) {
            store_rows(nv, c, t, dst, t->ldc, AMPC_FLOAT32, 1, 0);
        }
        else {
            store_rows(nv, c, t, dst, t->ldc, AMPC_FLOAT32, 0, 0);
        }
    }
    else if (t->cdt == AMPC_FLOAT16) {
        store_rows(nv, c, t, dst, t->ldc, AMPC_FLOAT16, t->acc_in, 1);
    }
    else {
        store_rows(nv, c, t, dst, t->ldc, AMPC_BFLOAT16, t->acc_in, 1);
    }
}

// ----------------------------------------------------------------------------
// the microkernel

/* a (k, 8) packed, b (k, 48) packed -> the 8 x (16 nv) left part of the
 * tile t.  Per depth: nv loads of B, 8 broadcasts of A, 8 nv FMAs into
 * registers; every loop over the tile is unrolled so the accumulators never
 * leave registers. */
static AMPC_TARGET_AVX512 __attribute__((always_inline)) inline void
kernel_body(int nv, int64_t k, const float *a, const float *b,
            const ampc_gemm_tile *t)
{
    __m512 c[MR][3];

#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        c[i][0] = _mm512_setzero_ps();
        c[i][1] = _mm512_setzero_ps();
        c[i][2] = _mm512_setzero_ps();
    }
    ampc_gemm_pf pf = ampc_gemm_pf_init(t);
    for (int64_t p = 0; p < k; p++) {
        ampc_gemm_pf_step(&pf, p);
        __m512 b0 = _mm512_load_ps(b);
        __m512 b1 = nv > 1 ? _mm512_load_ps(b + 16) : b0;
        __m512 b2 = nv > 2 ? _mm512_load_ps(b + 32) : b0;
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
            c[i][0] = _mm512_fmadd_ps(ai, b0, c[i][0]);
            if (nv > 1) {
                c[i][1] = _mm512_fmadd_ps(ai, b1, c[i][1]);
            }
            if (nv > 2) {
                c[i][2] = _mm512_fmadd_ps(ai, b2, c[i][2]);
            }
        }
        a += MR;
        b += NR;
    }
    /* A tile of whole rows goes from the registers straight to memory
     * (measured: 170 against 120 GFLOP/s through a stack copy at K = 27);
     * one short of rows, or one that adds C's old values, through
     * finish_tile. */
    if (t->m == MR && !t->beta) {
        finish_rows_nv(nv, c, t);
        return;
    }
    __attribute__((aligned(64))) float r[MR * NR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        _mm512_store_ps(r + i * NR, c[i][0]);
        _mm512_store_ps(r + i * NR + 16, c[i][1]);
        _mm512_store_ps(r + i * NR + 32, c[i][2]);
    }
    finish_tile(r, t);
}

/* a (k, 8) packed, b (k, 48) packed -> the 8 x 48 tile t.  A tile whose
 * valid columns fit in 32 or 16 skips the rest: narrow products (the lab's
 * 27-column conv weight gradient, its 10-class layer) waste less. */
static AMPC_TARGET_AVX512 void
kernel_avx512(int64_t k, const float *a, const float *b,
              const ampc_gemm_tile *t)
{
    if (t->n > 32) {
        kernel_body(3, k, a, b, t);
    }
    else if (t->n > 16) {
        kernel_body(2, k, a, b, t);
    }
    else {
        kernel_body(1, k, a, b, t);
    }
}

static AMPC_TARGET_AVX512 void
im2col_avx512(const ampc_conv2d_shape *s, size_t es, const void *x,
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

static AMPC_TARGET_AVX512 void
col2im_avx512(const ampc_conv2d_shape *s, const float *dcol, float *img)
{
    ampc_col2im_loop(s, dcol, img);
}

/* ampc_widen_fn: 16 elements at a time where they are contiguous, the
 * ragged end under a mask (an image row of the lab's is 16 or 32 long). */
static AMPC_TARGET_AVX512 __attribute__((always_inline)) inline void
widen_avx512(ampc_dtype dt, const void *src, int64_t ss, int64_t n, float *d)
{
    if (ss != 1) {
        ampc_widen_strided(dt, src, ss, n, d);
        return;
    }
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(d + i, load16(dt, (const char *)src + i * es,
                                       (__mmask16)0xffff));
    }
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(d + i, k,
                              load16(dt, (const char *)src + i * es, k));
    }
}

static AMPC_TARGET_AVX512 void
im2col_panels_avx512(const ampc_conv2d_shape *s, ampc_dtype dt,
                     const void *xp, int nr, float *dst)
{
    /* one copy per dtype, so the widening loads do not branch */
    switch (dt) {
    case AMPC_FLOAT32:
        ampc_im2col_panels_loop(s, AMPC_FLOAT32, xp, nr, dst,
                                widen_avx512);
        break;
    case AMPC_FLOAT16:
        ampc_im2col_panels_loop(s, AMPC_FLOAT16, xp, nr, dst,
                                widen_avx512);
        break;
    default:
        ampc_im2col_panels_loop(s, AMPC_BFLOAT16, xp, nr, dst,
                                widen_avx512);
        break;
    }
}

static AMPC_TARGET_AVX512 void
dw_fwd_avx512(const ampc_conv2d_shape *s, const float *xp, const float *wk,
              float *out)
{
    ampc_dw_fwd_loop(s, xp, wk, out);
}

static AMPC_TARGET_AVX512 void
dw_bwd_input_avx512(const ampc_conv2d_shape *s, const float *dy,
                    const float *wk, float *dxp)
{
    ampc_dw_bwd_input_loop(s, dy, wk, dxp);
}

static AMPC_TARGET_AVX512 void
dw_bwd_weight_avx512(const ampc_conv2d_shape *s, const float *dy,
                     const float *xp, float *lanes, float *gw)
{
    ampc_dw_bwd_weight_loop(s, dy, xp, lanes, gw);
}

static const ampc_gemm_parts parts_avx512 = {
    MR, NR, 256, 192, 1536, pack_avx512, kernel_avx512, &ampc_cvt_avx512,
    im2col_avx512, col2im_avx512, im2col_panels_avx512,
    dw_fwd_avx512, dw_bwd_input_avx512, dw_bwd_weight_avx512,
};

// ----------------------------------------------------------------------------
// kernels

/* A (M, K), B (K, N) -> C (M, N) (kernels.h) */
int
ampc_gemm_avx512(const ampc_gemm_args *g)
{
    return ampc_gemm_run(&parts_avx512, g);
}

/* x (N, C, H, W), w (OC, C, KH, KW), bias (OC) -> y (N, OC, OH, OW) */
int
ampc_conv2d_fwd_avx512(const ampc_conv2d_shape *s, ampc_dtype dt,
                       const void *x, const void *w, const void *bias,
                       int relu, void *y)
{
    return ampc_conv2d_fwd_run(&parts_avx512, s, dt, x, w, bias, relu, y);
}

/* dy (N, OC, OH, OW), w (OC, C, KH, KW) -> dx (N, C, H, W) */
int
ampc_conv2d_bwd_input_avx512(const ampc_conv2d_shape *s, ampc_dtype dt,
                             const void *dy, const void *w, void *dx)
{
    return ampc_conv2d_bwd_input_run(&parts_avx512, s, dt, dy, w, dx);
}

/* dy (N, OC, OH, OW), x (N, C, H, W) -> dw (OC, C, KH, KW), db (OC) */
int
ampc_conv2d_bwd_weight_avx512(const ampc_conv2d_shape *s, ampc_dtype dt,
                              const void *dy, const void *x, void *dw,
                              void *db)
{
    return ampc_conv2d_bwd_weight_run(&parts_avx512, s, dt, dy, x, dw, db);
}

// ----------------------------------------------------------------------------
// peak FLOP/s

enum { PEAK_ITERS = 1 << 18, PEAK_CHAINS = 12 };

/* 12 independent FMA chains of 16 lanes: enough to cover the FMA latency on
 * two ports. */
static AMPC_TARGET_AVX512 double
peak_fma_avx512(void)
{
    volatile float seed = 1.0f;
    __m512 x = _mm512_set1_ps(seed * 0.999f), y = _mm512_set1_ps(seed * 1e-7f);
    __m512 acc[PEAK_CHAINS];
#pragma GCC unroll 12
    for (int l = 0; l < PEAK_CHAINS; l++) {
        acc[l] = _mm512_set1_ps((float)l);
    }
    for (int it = 0; it < PEAK_ITERS; it++) {
#pragma GCC unroll 12
        for (int l = 0; l < PEAK_CHAINS; l++) {
            acc[l] = _mm512_fmadd_ps(acc[l], x, y);
        }
    }
    __m512 s = acc[0];
#pragma GCC unroll 12
    for (int l = 1; l < PEAK_CHAINS; l++) {
        s = _mm512_add_ps(s, acc[l]);
    }
    seed = _mm512_reduce_add_ps(s);
    return 2.0 * 16 * PEAK_CHAINS * PEAK_ITERS;
}

/* The same with vdpbf16ps: 16 lanes, each two bfloat16 products a step. */
static AMPC_TARGET_AVX512_BF16 double
peak_bf16_avx512(void)
{
    volatile int seed = 0x3f7f3f7f;
    __m512bh x = (__m512bh)_mm512_set1_epi32(seed);
    __m512bh y = (__m512bh)_mm512_set1_epi32(seed ^ 0x0c000c00);
    __m512 acc[PEAK_CHAINS];
#pragma GCC unroll 12
    for (int l = 0; l < PEAK_CHAINS; l++) {
        acc[l] = _mm512_set1_ps((float)l);
    }
    for (int it = 0; it < PEAK_ITERS; it++) {
#pragma GCC unroll 12
        for (int l = 0; l < PEAK_CHAINS; l++) {
            acc[l] = _mm512_dpbf16_ps(acc[l], x, y);
        }
    }
    __m512 s = acc[0];
#pragma GCC unroll 12
    for (int l = 1; l < PEAK_CHAINS; l++) {
        s = _mm512_add_ps(s, acc[l]);
    }
    seed = (int)_mm512_reduce_add_ps(s);
    return 4.0 * 16 * PEAK_CHAINS * PEAK_ITERS;
}

double
ampc_peak_flops_avx512(ampc_peak_kind kind, double seconds, int nthreads)
{
    if (kind == AMPC_PEAK_FMA) {
        return ampc_peak_run(peak_fma_avx512, seconds, nthreads);
    }
    if (kind == AMPC_PEAK_BF16_DOT && ampc_cpu_has("avx512bf16")) {
        return ampc_peak_run(peak_bf16_avx512, seconds, nthreads);
    }
    return 0.0;
}

#endif /* __x86_64__ */
