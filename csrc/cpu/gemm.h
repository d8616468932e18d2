/* gemm.h - the blocked, packed GEMM that every CPU level shares (BLIS's
 * design): each level brings its parts (panel packing and a register-tiled
 * microkernel), cpu/ref/gemm.c owns the driver that blocks and threads, and
 * cpu/ref/conv2d.c lowers convolutions onto the same parts.  The portable
 * packing and epilogue loops below are inlined into each level's
 * target-tagged functions, so they vectorise for its ISA.
 *
 * Packed panels are float32: float16 and bfloat16 are widened while packing
 * (never copied whole), so the microkernel is float32-only and the tile
 * epilogue rounds each output once (RNE, via the level's converters).
 *
 * NOTE: AVX512_BF16's vdpbf16ps runs at half the float32 FMA rate on this
 * project's CPUs (_C._peak_flops measures both), so bfloat16 is widened to
 * float32 like float16 rather than multiplied in bfloat16 pairs.
 */
#ifndef AMPC_CPU_GEMM_H
#define AMPC_CPU_GEMM_H

#include <stdint.h>
#include <string.h>

#include "amp_math.h"
#include "cpu/cpu.h"
#include "kernels.h"

#define AMPC_GEMM_NR_MAX 48     /* the widest microkernel tile of a level */
#define AMPC_GEMM_ALIGN 64      /* packed panels start on cache lines */

// ----------------------------------------------------------------------------
// the parts a level brings

/* What the microkernel does with its MR x NR float32 result, of which the
 * first m rows and n columns are valid.  A K dimension longer than one
 * packed block is summed in float32 through `acc`: every block but the last
 * writes raw sums there (final == 0), and the last finishes into C.  For a
 * float32 C, acc is C itself. */
typedef struct {
    int m, n;
    float *acc;                 /* float32 partial sums, row stride ldacc */
    int64_t ldacc;
    int acc_in;                 /* add acc's values to the result first */
    int final;                  /* 0: write raw sums to acc; 1: finish C */
    void *c;                    /* C tile, cdt, row stride ldc */
    int64_t ldc;
    ampc_dtype cdt;
    int beta;                   /* add C's old values (when acc is not C) */
    const float *bias_row;      /* m values or NULL */
    const float *bias_col;      /* n values or NULL */
    int relu;
} ampc_gemm_tile;

/* Packs `count` lines of a matrix into panels of `w` lines (zero padded to
 * w), each panel k deep and laid out [p][w]: element p of line l of the
 * matrix is src[l * sl + p * sk] (dtype dt); panel q starts at dst + q * w
 * * k.  A is packed with its rows as lines (w = MR), B with its columns
 * (w = NR). */
typedef void (*ampc_gemm_pack_fn)(ampc_dtype dt, const void *src, int64_t sl,
                                  int64_t sk, int64_t count, int64_t k,
                                  int w, float *dst);

/* a: one packed A panel (k x MR), b: one packed B panel (k x NR). */
typedef void (*ampc_gemm_kernel_fn)(int64_t k, const float *a,
                                    const float *b, const ampc_gemm_tile *t);

/* xp (C, H + 2ph, W + 2pw), the image with its zero padding -> col
 * (C*KH*KW, OH*OW), elements of es bytes (2 or 4). */
typedef void (*ampc_im2col_fn)(const ampc_conv2d_shape *s, size_t es,
                               const void *xp, void *col);
/* imgp (C, H + 2ph, W + 2pw) += the col2im of dcol (C*KH*KW, OH*OW),
 * float32. */
typedef void (*ampc_col2im_fn)(const ampc_conv2d_shape *s, const float *dcol,
                               float *imgp);
/* xp (C, H + 2ph, W + 2pw) of dtype dt -> the column matrix (C*KH*KW,
 * OH*OW) as the GEMM's packed B panels, float32: panel q holds columns
 * [q*nr, q*nr + nr) (zero past OH*OW), K rows of nr, at dst + q*nr*K. */
typedef void (*ampc_im2col_panels_fn)(const ampc_conv2d_shape *s,
                                      ampc_dtype dt, const void *xp, int nr,
                                      float *dst);
/* The depthwise planes' loops (cpu/depthwise.h), float32. */
typedef void (*ampc_dw_fwd_fn)(const ampc_conv2d_shape *s, const float *xp,
                               const float *wk, float *out);
typedef void (*ampc_dw_bwd_input_fn)(const ampc_conv2d_shape *s,
                                     const float *dy, const float *wk,
                                     float *dxp);
typedef void (*ampc_dw_bwd_weight_fn)(const ampc_conv2d_shape *s,
                                      const float *dy, const float *xp,
                                      float *lanes, float *gw);

typedef struct {
    int mr, nr;                 /* microkernel tile */
    int64_t mc, kc, nc;         /* cache blocking: A block mc x kc in L2,
                                 * B panel kc x nr in L1 */
    ampc_gemm_pack_fn pack;
    ampc_gemm_kernel_fn kernel;
    const ampc_converters *cvt;
    ampc_im2col_fn im2col;      /* conv2d's lowering, same ISA */
    ampc_col2im_fn col2im;
    ampc_im2col_panels_fn im2col_panels;
    ampc_dw_fwd_fn dw_fwd;      /* depthwise conv2d, same ISA */
    ampc_dw_bwd_input_fn dw_bwd_input;
    ampc_dw_bwd_weight_fn dw_bwd_weight;
} ampc_gemm_parts;

/* The portable parts (cpu/ref/gemm.c), which ref's conv2d also uses. */
extern const ampc_gemm_parts ampc_gemm_parts_ref;

// ----------------------------------------------------------------------------
// the shared drivers (cpu/ref/gemm.c and cpu/ref/conv2d.c)

/* C = A B + ... for g (kernels.h), with the level's parts. */
int ampc_gemm_run(const ampc_gemm_parts *parts, const ampc_gemm_args *g);
/* The same with A and/or B given already packed (NULL: packed here):
 * float32 panels g->k deep, of parts->mr rows of A (panel q at a_packed +
 * q*mr*k, as ampc_gemm_pack_a writes them) or parts->nr columns of B
 * (panel q at b_packed + q*nr*k, as im2col_panels writes them); the
 * packed operand's pointer and strides in g are not read.  One product
 * (batch 1); the same bits as ampc_gemm_run. */
int ampc_gemm_run_packed(const ampc_gemm_parts *parts,
                         const ampc_gemm_args *g, const float *a_packed,
                         const float *b_packed);
/* g's whole A packed once, for products that share it (a convolution's
 * weights, image after image): a new buffer for free(), NULL when memory
 * is short. */
float *ampc_gemm_pack_a(const ampc_gemm_parts *parts,
                        const ampc_gemm_args *g);

/* The thread count a GEMM of this many flops should use: 1 below the size
 * where waking threads costs more than it saves; nthreads 0 means all. */
int ampc_gemm_threads(double flops, int nthreads);

/* The calling thread's scratch buffer number `slot`, at least nbytes,
 * 64-byte aligned; kept and reused by the thread until it exits (packing
 * runs on every call, so page-faulting fresh memory each time would cost
 * more than the copy).  NULL when memory is short. */
enum {
    AMPC_BUF_PACK_A = 0,
    AMPC_BUF_PACK_B,
    AMPC_BUF_ACC,               /* float32 C partial sums */
    AMPC_BUF_COL,               /* conv2d: im2col matrix of one image */
    AMPC_BUF_IMG,               /* conv2d: padded image, float32 rows */
    AMPC_BUF_GRAD,              /* conv2d: float32 weight/bias gradients */
    AMPC_BUF_ROW,               /* conv2d: one widened row of dy */
    AMPC_NUM_BUFS
};
void *ampc_gemm_buffer(int slot, size_t nbytes);

/* Runs `chunk` (which returns the flops it did) on nthreads threads (0:
 * all) for about `seconds` of CPU time each; the sum of the threads'
 * FLOP/s, each timed by its own CPU clock. */
double ampc_peak_run(double (*chunk)(void), double seconds, int nthreads);

/* x (N, C, H, W), w (OC, C/G, KH, KW), bias (OC) or NULL -> y (N, OC, OH,
 * OW) */
int ampc_conv2d_fwd_run(const ampc_gemm_parts *parts,
                        const ampc_conv2d_shape *s, ampc_dtype dt,
                        const void *x, const void *w, const void *bias,
                        int relu, void *y);
/* dy (N, OC, OH, OW), w (OC, C/G, KH, KW) -> dx (N, C, H, W) */
int ampc_conv2d_bwd_input_run(const ampc_gemm_parts *parts,
                              const ampc_conv2d_shape *s, ampc_dtype dt,
                              const void *dy, const void *w, void *dx);
/* dy (N, OC, OH, OW), x (N, C, H, W) -> dw (OC, C/G, KH, KW) (NULL:
 * skip), db (OC) (NULL: skip) */
int ampc_conv2d_bwd_weight_run(const ampc_gemm_parts *parts,
                               const ampc_conv2d_shape *s, ampc_dtype dt,
                               const void *dy, const void *x, void *dw,
                               void *db);

/* One group of one image of a depthwise convolution (cpu/ref/
 * conv2d_depthwise.c), s the group's shape (C = 1, OC = the multiplier M):
 * x (H, W), w (M, KH, KW), bias (M) or NULL -> y (M, OH, OW) */
int ampc_dw_fwd_task(const ampc_gemm_parts *parts,
                     const ampc_conv2d_shape *s, ampc_dtype dt,
                     const char *x, const char *w, const char *bias,
                     int relu, char *y);
/* dy (M, OH, OW), w (M, KH, KW) -> dx (H, W) */
int ampc_dw_bwd_input_task(const ampc_gemm_parts *parts,
                           const ampc_conv2d_shape *s, ampc_dtype dt,
                           const char *dy, const char *w, char *dx);
/* dy (M, OH, OW), x (H, W) -> gw (M, KH, KW) += the weight gradient,
 * float32 */
int ampc_dw_bwd_weight_task(const ampc_gemm_parts *parts,
                            const ampc_conv2d_shape *s, ampc_dtype dt,
                            const char *dy, const char *x, float *gw);

// ----------------------------------------------------------------------------
// portable packing, inlined into each level

/* Widens n contiguous elements of dt to float32. */
static AMPC_ALWAYS_INLINE void
ampc_gemm_widen(const ampc_converters *cv, ampc_dtype dt, const void *src,
                int64_t n, float *dst)
{
    if (dt == AMPC_FLOAT32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
    else if (dt == AMPC_FLOAT16) {
        cv->f16_to_f32(n, (const uint16_t *)src, dst);
    }
    else {
        cv->bf16_to_f32(n, (const uint16_t *)src, dst);
    }
}

/* Rounds n float32 values to dt (RNE), contiguous. */
static AMPC_ALWAYS_INLINE void
ampc_gemm_narrow(const ampc_converters *cv, ampc_dtype dt, const float *src,
                 int64_t n, void *dst)
{
    if (dt == AMPC_FLOAT32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
    else if (dt == AMPC_FLOAT16) {
        cv->f32_to_f16(n, src, dst);
    }
    else {
        cv->f32_to_bf16(n, src, dst);
    }
}

/* One element of dt as float32, at element offset i. */
static AMPC_ALWAYS_INLINE float
ampc_gemm_load1(ampc_dtype dt, const void *src, int64_t i)
{
    if (dt == AMPC_FLOAT32) {
        return ((const float *)src)[i];
    }
    if (dt == AMPC_FLOAT16) {
        return ampc_f16_to_f32(((const uint16_t *)src)[i]);
    }
    return ampc_bf16_to_f32(((const uint16_t *)src)[i]);
}

/* The packing of ampc_gemm_pack_fn when lines are contiguous (sl == 1):
 * each depth p of a panel is one run of w elements, widened in place. */
static AMPC_ALWAYS_INLINE void
ampc_gemm_pack_runs(const ampc_converters *cv, ampc_dtype dt,
                    const void *src, int64_t sk, int64_t count, int64_t k,
                    int w, float *dst)
{
    size_t es = ampc_dtype_size[dt];
    for (int64_t l0 = 0; l0 < count; l0 += w) {
        int64_t lw = count - l0 < w ? count - l0 : w;
        const char *s = (const char *)src + l0 * (int64_t)es;
        for (int64_t p = 0; p < k; p++) {
            float *d = dst + p * w;
            ampc_gemm_widen(cv, dt, s + p * sk * (int64_t)es, lw, d);
            for (int64_t l = lw; l < w; l++) {
                d[l] = 0.0f;
            }
        }
        dst += w * k;
    }
}

/* The packing of ampc_gemm_pack_fn when each line is contiguous along k
 * (sk == 1), lines [l0, l0 + count) of the panel at dst being transposed:
 * each line is widened in pieces and scattered down its panel column. */
static AMPC_ALWAYS_INLINE void
ampc_gemm_pack_lines(const ampc_converters *cv, ampc_dtype dt,
                     const void *src, int64_t sl, int64_t count, int64_t k,
                     int w, float *dst)
{
    enum { PIECE = 256 };
    float buf[PIECE];
    size_t es = ampc_dtype_size[dt];
    for (int64_t l = 0; l < count; l++) {
        const char *s = (const char *)src + l * sl * (int64_t)es;
        float *d = dst + (l / w) * w * k + l % w;
        for (int64_t p0 = 0; p0 < k; p0 += PIECE) {
            int64_t pn = k - p0 < PIECE ? k - p0 : PIECE;
            ampc_gemm_widen(cv, dt, s + p0 * (int64_t)es, pn, buf);
            for (int64_t p = 0; p < pn; p++) {
                d[(p0 + p) * w] = buf[p];
            }
        }
    }
    /* zero the padding lines of the last panel */
    for (int64_t l = count; l % w != 0; l++) {
        float *d = dst + (l / w) * w * k + l % w;
        for (int64_t p = 0; p < k; p++) {
            d[p * w] = 0.0f;
        }
    }
}

/* Any strides, one element at a time: the fallback for layouts that are
 * contiguous neither along lines nor along k (callers copy such operands
 * first when they are large). */
static AMPC_ALWAYS_INLINE void
ampc_gemm_pack_gather(ampc_dtype dt, const void *src, int64_t sl, int64_t sk,
                      int64_t count, int64_t k, int w, float *dst)
{
    for (int64_t l0 = 0; l0 < count; l0 += w) {
        int64_t lw = count - l0 < w ? count - l0 : w;
        for (int64_t p = 0; p < k; p++) {
            float *d = dst + p * w;
            for (int64_t l = 0; l < lw; l++) {
                d[l] = ampc_gemm_load1(dt, src, (l0 + l) * sl + p * sk);
            }
            for (int64_t l = lw; l < w; l++) {
                d[l] = 0.0f;
            }
        }
        dst += w * k;
    }
}

// ----------------------------------------------------------------------------
// portable tile epilogue, inlined into each level

/* Prefetching of the rows of C (or of the partial sums) that the epilogue
 * will read or write, so they arrive while the microkernel computes: a C
 * bigger than L2 otherwise stalls every tile (measured: ~10% of a 1024^3
 * GEMM).  One cache line per depth step, as a burst of 24 would stall on
 * the line-fill buffers. */
typedef struct {
    const char *base;
    int64_t ld, last;           /* row stride and last byte of a row */
    int64_t steps;              /* lines to fetch: 4 per row */
} ampc_gemm_pf;

static AMPC_ALWAYS_INLINE ampc_gemm_pf
ampc_gemm_pf_init(const ampc_gemm_tile *t)
{
    ampc_gemm_pf pf;
    int to_acc = t->acc_in || !t->final;
    size_t es = to_acc ? sizeof(float) : ampc_dtype_size[t->cdt];
    pf.base = to_acc ? (const char *)t->acc : (const char *)t->c;
    pf.ld = (to_acc ? t->ldacc : t->ldc) * (int64_t)es;
    pf.last = t->n * (int64_t)es - 1;
    pf.steps = 4 * (int64_t)t->m;
    return pf;
}

/* Line p % 4 of row p / 4, for p < pf->steps (4 lines cover a row of up to
 * 48 floats however it is aligned). */
static AMPC_ALWAYS_INLINE void
ampc_gemm_pf_step(const ampc_gemm_pf *pf, int64_t p)
{
    if (p < pf->steps) {
        int64_t off = (p & 3) * 64;
        __builtin_prefetch(pf->base + (p >> 2) * pf->ld +
                               (off < pf->last ? off : pf->last),
                           1, 3);
    }
}

/* Finishes a microkernel result `r` (t->m rows of t->n <= AMPC_GEMM_NR_MAX
 * floats, row stride ldr) as t says: partial sums to acc, or acc + r [+ C]
 * [+ bias] [relu] rounded once to C's dtype.  The row loops are plain
 * float32 arithmetic that the compiler vectorises; narrowing and widening
 * use the level's converters. */
static AMPC_ALWAYS_INLINE void
ampc_gemm_epilogue(const ampc_converters *cv, float *r, int64_t ldr,
                   const ampc_gemm_tile *t)
{
    float old[AMPC_GEMM_NR_MAX];
    int n = t->n;
    for (int i = 0; i < t->m; i++) {
        float *x = r + i * ldr;
        if (t->acc_in) {
            const float *a = t->acc + i * t->ldacc;
            for (int j = 0; j < n; j++) {
                x[j] += a[j];
            }
        }
        if (!t->final) {
            memcpy(t->acc + i * t->ldacc, x, (size_t)n * sizeof(float));
            continue;
        }
        size_t es = ampc_dtype_size[t->cdt];
        char *c = (char *)t->c + i * t->ldc * (int64_t)es;
        if (t->beta) {
            ampc_gemm_widen(cv, t->cdt, c, n, old);
            for (int j = 0; j < n; j++) {
                x[j] += old[j];
            }
        }
        if (t->bias_row != NULL) {
            float b = t->bias_row[i];
            for (int j = 0; j < n; j++) {
                x[j] += b;
            }
        }
        if (t->bias_col != NULL) {
            for (int j = 0; j < n; j++) {
                x[j] += t->bias_col[j];
            }
        }
        if (t->relu) {
            /* relu keeps NaN and maps -0 to +0, as ampc_relu_f32 */
            for (int j = 0; j < n; j++) {
                x[j] = (x[j] > 0.0f || x[j] != x[j]) ? x[j] : 0.0f;
            }
        }
        if (t->cdt == AMPC_FLOAT32) {
            memcpy(c, x, (size_t)n * sizeof(float));
        }
        else if (t->cdt == AMPC_FLOAT16) {
            cv->f32_to_f16(n, x, (uint16_t *)c);
        }
        else {
            cv->f32_to_bf16(n, x, (uint16_t *)c);
        }
    }
}

// ----------------------------------------------------------------------------
// portable im2col and col2im, inlined into each level
//
// Both work on an image that already carries its zero padding, (C, H + 2ph,
// W + 2pw), so every row they copy is a whole, unconditional run: small
// images have short rows (16 elements for the lab's second layer), and the
// per-row bounds logic used to cost more than the copy.

/* xp (C, Hp, Wp) padded -> col (C*KH*KW, OH*OW), elements of 4 or 2 bytes. */
static AMPC_ALWAYS_INLINE void
ampc_im2col_loop(const ampc_conv2d_shape *s, size_t es, const void *xp,
                 void *col)
{
    const int64_t hp = s->h + 2 * s->ph, wp = s->w + 2 * s->pw;
    const int64_t ow = s->ow, sw = s->sw;
    for (int64_t c = 0; c < s->c; c++) {
        for (int64_t kh = 0; kh < s->kh; kh++) {
            for (int64_t kw = 0; kw < s->kw; kw++) {
                int64_t row = (c * s->kh + kh) * s->kw + kw;
                int64_t src0 = (c * hp + kh * s->dh) * wp + kw * s->dw;
                int64_t dst0 = row * s->oh * ow;
                for (int64_t oh = 0; oh < s->oh; oh++) {
                    int64_t si = src0 + oh * s->sh * wp, di = dst0 + oh * ow;
                    if (es == 4) {
                        const uint32_t *src = (const uint32_t *)xp + si;
                        uint32_t *d = (uint32_t *)col + di;
                        for (int64_t j = 0; j < ow; j++) {
                            d[j] = src[j * sw];
                        }
                    }
                    else {
                        const uint16_t *src = (const uint16_t *)xp + si;
                        uint16_t *d = (uint16_t *)col + di;
                        for (int64_t j = 0; j < ow; j++) {
                            d[j] = src[j * sw];
                        }
                    }
                }
            }
        }
    }
}

/* n elements of dt at src, stride ss (elements), widened to float32 at d. */
typedef void (*ampc_widen_fn)(ampc_dtype dt, const void *src, int64_t ss,
                              int64_t n, float *d);

static AMPC_ALWAYS_INLINE void
ampc_widen_strided(ampc_dtype dt, const void *src, int64_t ss, int64_t n,
                   float *d)
{
    if (dt == AMPC_FLOAT32) {
        const float *x = src;
        if (ss == 1) {
            for (int64_t i = 0; i < n; i++) {
                d[i] = x[i];
            }
        }
        else {
            for (int64_t i = 0; i < n; i++) {
                d[i] = x[i * ss];
            }
        }
    }
    else if (dt == AMPC_BFLOAT16) {
        const uint16_t *x = src;
        for (int64_t i = 0; i < n; i++) {
            d[i] = ampc_bf16_to_f32(x[i * ss]);
        }
    }
    else {
        const uint16_t *x = src;
        for (int64_t i = 0; i < n; i++) {
            d[i] = ampc_f16_to_f32(x[i * ss]);
        }
    }
}

/* The forward GEMM's B panels straight from the padded image (what im2col
 * and packing do in two passes, in one): each panel row is the image rows'
 * runs that its nr output positions read, widened by `widen` (the level's,
 * inlined: it is a constant at every call). */
static AMPC_ALWAYS_INLINE void
ampc_im2col_panels_loop(const ampc_conv2d_shape *s, ampc_dtype dt,
                        const void *xp, int nr, float *dst,
                        ampc_widen_fn widen)
{
    const int64_t hp = s->h + 2 * s->ph, wp = s->w + 2 * s->pw;
    const int64_t k = s->c * s->kh * s->kw, ohw = s->oh * s->ow;
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    for (int64_t j0 = 0; j0 < ohw; j0 += nr) {
        int64_t jn = ohw - j0 < nr ? ohw - j0 : nr;
        int64_t oh0 = j0 / s->ow, ow0 = j0 % s->ow;
        float *panel = dst + j0 * k;
        for (int64_t c = 0; c < s->c; c++) {
            for (int64_t kh = 0; kh < s->kh; kh++) {
                for (int64_t kw = 0; kw < s->kw; kw++) {
                    int64_t p = (c * s->kh + kh) * s->kw + kw;
                    const char *base =
                        (const char *)xp +
                        ((c * hp + kh * s->dh) * wp + kw * s->dw) * es;
                    float *d = panel + p * nr;
                    int64_t j = 0, oh = oh0, ow = ow0;
                    while (j < jn) {
                        int64_t len = s->ow - ow < jn - j ? s->ow - ow
                                                          : jn - j;
                        widen(dt, base + (oh * s->sh * wp + ow * s->sw) * es,
                              s->sw, len, d + j);
                        j += len;
                        oh++;
                        ow = 0;
                    }
                    for (; j < nr; j++) {
                        d[j] = 0.0f;
                    }
                }
            }
        }
    }
}

/* imgp (C, Hp, Wp) += the col2im of dcol (C*KH*KW, OH*OW), float32.  Rows
 * that share an input pixel are added in a fixed order, so the result does
 * not depend on the level or the threads. */
static AMPC_ALWAYS_INLINE void
ampc_col2im_loop(const ampc_conv2d_shape *s, const float *dcol, float *imgp)
{
    const int64_t hp = s->h + 2 * s->ph, wp = s->w + 2 * s->pw;
    const int64_t ow = s->ow, sw = s->sw;
    for (int64_t c = 0; c < s->c; c++) {
        for (int64_t kh = 0; kh < s->kh; kh++) {
            for (int64_t kw = 0; kw < s->kw; kw++) {
                int64_t row = (c * s->kh + kh) * s->kw + kw;
                float *d0 = imgp + (c * hp + kh * s->dh) * wp + kw * s->dw;
                const float *r0 = dcol + row * s->oh * ow;
                for (int64_t oh = 0; oh < s->oh; oh++) {
                    float *d = d0 + oh * s->sh * wp;
                    const float *r = r0 + oh * ow;
                    if (sw == 1) {
                        for (int64_t j = 0; j < ow; j++) {
                            d[j] += r[j];
                        }
                    }
                    else {
                        for (int64_t j = 0; j < ow; j++) {
                            d[j * sw] += r[j];
                        }
                    }
                }
            }
        }
    }
}

#endif /* AMPC_CPU_GEMM_H */
