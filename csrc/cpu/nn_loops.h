/* nn_loops.h - the bodies of the NN kernels (relu backward, max_pool2d,
 * softmax, dropout's masked scale), written once in portable C as
 * cpu/loops.h writes the element-wise ones; cpu/loss_loops.h (the losses)
 * and cpu/optim_loops.h (the fused optimizer steps) build on it.  Each
 * level calls a body from a range function tagged with its target and
 * passes its converters, so the body is inlined and vectorised for that
 * ISA; ampc_parallel_for (cpu/ref/parallel.c) splits the items (rows,
 * planes, chunks) over threads and calls the range function on pieces.
 *
 * The per-element math (exp, the window and loss rules, the optimizer
 * updates) is in nn_math.h, shared with the CUDA kernels.
 *
 * Every item is computed the same way whatever the split, and float sums are
 * folded in a fixed order, so results never depend on the thread count.  The
 * only libm call is a scalar log per row, exp is nn_math.h's ampc_exp_f32,
 * square roots are exact at every level, and -std=c11 keeps the compiler
 * from contracting a * b + c into an FMA: every level also gives the same
 * bits.
 */
#ifndef AMPC_CPU_NN_LOOPS_H
#define AMPC_CPU_NN_LOOPS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/nn_runs.h"
#include "cpu/reduce_loops.h"
#include "nn_math.h"

#define AMPC_NN_ROW 4096            /* floats of a row held per pass */
#define AMPC_NN_TILE 64             /* columns per softmax column tile */
#define AMPC_NN_GRAIN 32768         /* elements worth a thread */

static inline int64_t
ampc_nn_min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Items per thread task so that each task has about AMPC_NN_GRAIN elements
 * of work when one item has `work` elements. */
static inline int64_t
ampc_nn_grain(int64_t work)
{
    return work >= AMPC_NN_GRAIN ? 1 : AMPC_NN_GRAIN / (work > 0 ? work : 1);
}

// ----------------------------------------------------------------------------
// relu backward

typedef struct {
    ampc_dtype dt;
    const void *grad_out, *out;
    void *grad_in;
} ampc_relu_bwd_ctx;

/* On the bits (nn_math.h), which needs no conversion and vectorises at
 * every level. */
static AMPC_ALWAYS_INLINE void
ampc_relu_bwd_range(const ampc_relu_bwd_ctx *c, int64_t b, int64_t e)
{
    int64_t i;
    if (c->dt == AMPC_FLOAT32) {
        const uint32_t *g = c->grad_out, *o = c->out;
        uint32_t *gi = c->grad_in;
        for (i = b; i < e; i++) {
            gi[i] = ampc_relu_bwd_bits32(g[i], o[i]);
        }
        return;
    }
    const uint16_t *g = c->grad_out, *o = c->out;
    uint16_t *gi = c->grad_in;
    uint16_t inf = c->dt == AMPC_FLOAT16 ? 0x7c00u : 0x7f80u;
    for (i = b; i < e; i++) {
        gi[i] = ampc_relu_bwd_bits16(g[i], o[i], inf);
    }
}

static inline void
ampc_relu_bwd_launch(ampc_range_fn range, ampc_dtype dt, int64_t n,
                     const void *grad_out, const void *out, void *grad_in)
{
    ampc_relu_bwd_ctx c = {dt, grad_out, out, grad_in};
    ampc_parallel_for(n, AMPC_NN_GRAIN, range, &c);
}

// ----------------------------------------------------------------------------
// masked scale (dropout and its backward)

typedef struct {
    ampc_dtype dt;
    const void *x;
    const uint8_t *mask;
    float scale;
    void *y;
} ampc_masked_scale_ctx;

/* y = (x * mask) * scale (nn_math.h ampc_masked_scale_one) */
static AMPC_ALWAYS_INLINE void
ampc_masked_scale_range(const ampc_converters *cv,
                        const ampc_masked_scale_ctx *c, int64_t b, int64_t e)
{
    size_t es = ampc_dtype_size[c->dt];
    float buf[AMPC_BLOCK];
    for (int64_t i = b; i < e; i += AMPC_BLOCK) {
        int64_t m = ampc_nn_min(AMPC_BLOCK, e - i);
        const float *x = ampc_load_block_f32(
            cv, c->dt, ampc_at(c->x, i, 1, es), 1, m, buf, NULL);
        float *y = c->dt == AMPC_FLOAT32 ? (float *)c->y + i : buf;
        const uint8_t *k = c->mask + i;
        for (int64_t j = 0; j < m; j++) {
            y[j] = ampc_masked_scale_one(x[j], k[j], c->scale);
        }
        ampc_store_block_f32(cv, c->dt, y, m, (char *)c->y + i * (int64_t)es,
                             1, NULL);
    }
}

static inline void
ampc_masked_scale_launch(ampc_range_fn range, ampc_dtype dt, int64_t n,
                         const void *x, const uint8_t *mask, float scale,
                         void *y)
{
    ampc_masked_scale_ctx c = {dt, x, mask, scale, y};
    ampc_parallel_for(n, AMPC_NN_GRAIN, range, &c);
}

// ----------------------------------------------------------------------------
// max_pool2d

typedef struct {
    const ampc_pool2d_shape *s;
    ampc_dtype dt;
    const void *x;
    void *y;
    int64_t *idx;
    const void *grad_out;
    const int64_t *gidx;
    void *grad_in;
    int status;                 /* backward: ampc_nn_status bits */
} ampc_pool_ctx;

/* 2x2 windows at stride 2 with no padding, all inside the input (the
 * SimpleCNN case): one output row from input rows r0 and r1.  Blocks of
 * AMPC_BLOCK outputs are widened once; the winner of each window is picked in
 * torch's order (row by row, a later element wins when greater or NaN) as a
 * code 0..3, and the indices are formed from the codes in a second loop so
 * that both loops vectorise. */
static AMPC_ALWAYS_INLINE void
ampc_max_pool2x2_row(const ampc_converters *cv, ampc_dtype dt, int64_t w,
                     int64_t ow, const char *r0, const char *r1, char *y,
                     int64_t *idx, int64_t base, int relu_masked)
{
    size_t es = ampc_dtype_size[dt];
    float b0[2 * AMPC_BLOCK], b1[2 * AMPC_BLOCK], v[AMPC_BLOCK];
    int32_t code[AMPC_BLOCK];
    for (int64_t j0 = 0; j0 < ow; j0 += AMPC_BLOCK) {
        int64_t m = ampc_nn_min(AMPC_BLOCK, ow - j0);
        const float *a = ampc_load_block_f32(cv, dt, r0 + 2 * j0 * (int64_t)es,
                                             1, 2 * m, b0, NULL);
        const float *c = ampc_load_block_f32(cv, dt, r1 + 2 * j0 * (int64_t)es,
                                             1, 2 * m, b1, NULL);
        float *out = dt == AMPC_FLOAT32 ? (float *)y + j0 : v;
        for (int64_t j = 0; j < m; j++) {
            float best = a[2 * j];
            int32_t k = 0;
            float e1 = a[2 * j + 1], e2 = c[2 * j], e3 = c[2 * j + 1];
            int u1 = ampc_pool_takes(e1, best);
            best = u1 ? e1 : best;
            k = u1 ? 1 : k;
            int u2 = ampc_pool_takes(e2, best);
            best = u2 ? e2 : best;
            k = u2 ? 2 : k;
            int u3 = ampc_pool_takes(e3, best);
            best = u3 ? e3 : best;
            k = u3 ? 3 : k;
            out[j] = best;
            code[j] = k;
        }
        int64_t *ix = idx + j0;
        int64_t at = base + 2 * j0;
        for (int64_t j = 0; j < m; j++) {
            int64_t v = at + 2 * j + (code[j] & 1) + (code[j] >> 1) * w;
            ix[j] = ampc_pool_masked_index(v, out[j], relu_masked);
        }
        ampc_store_block_f32(cv, dt, out, m, y + j0 * (int64_t)es, 1, NULL);
    }
}

/* Any geometry: output row i of plane x, element by element, exactly as
 * torch's CPU kernel (max starts at -inf with the index of the first
 * in-bounds element; a later element wins when greater or NaN).  dt is a
 * constant at each call, so each dtype gets its own loop. */
static AMPC_ALWAYS_INLINE void
ampc_max_pool_row_any(ampc_dtype dt, const ampc_pool2d_shape *s,
                      const char *x, int64_t i, char *y, int64_t *idx)
{
    size_t es = ampc_dtype_size[dt];
    int64_t ih0 = i * s->sh - s->ph;
    int64_t ih1 = ampc_nn_min(ih0 + (s->kh - 1) * s->dh + 1, s->h);
    ih0 = ampc_pool_first(ih0, s->dh);
    for (int64_t j = 0; j < s->ow; j++) {
        int64_t iw0 = j * s->sw - s->pw;
        int64_t iw1 = ampc_nn_min(iw0 + (s->kw - 1) * s->dw + 1, s->w);
        iw0 = ampc_pool_first(iw0, s->dw);
        int64_t best_i = ih0 * s->w + iw0;
        float best = -INFINITY;
        for (int64_t ih = ih0; ih < ih1; ih += s->dh) {
            for (int64_t iw = iw0; iw < iw1; iw += s->dw) {
                int64_t at = ih * s->w + iw;
                float v = ampc_load_f32(dt, x + at * (int64_t)es);
                if (ampc_pool_takes(v, best)) {
                    best = v;
                    best_i = at;
                }
            }
        }
        ampc_store_f64(dt, y + j * (int64_t)es, best);
        idx[j] = ampc_pool_masked_index(best_i, best, s->relu_masked);
    }
}

static inline int
ampc_pool_is_2x2(const ampc_pool2d_shape *s)
{
    return s->kh == 2 && s->kw == 2 && s->sh == 2 && s->sw == 2 &&
           s->ph == 0 && s->pw == 0 && s->dh == 1 && s->dw == 1 &&
           2 * s->oh <= s->h && 2 * s->ow <= s->w;
}

/* items: planes * OH output rows */
static AMPC_ALWAYS_INLINE void
ampc_max_pool2d_fwd_range(const ampc_converters *cv, const ampc_pool_ctx *c,
                          int64_t b, int64_t e)
{
    const ampc_pool2d_shape *s = c->s;
    size_t es = ampc_dtype_size[c->dt];
    int fast = ampc_pool_is_2x2(s);
    for (int64_t item = b; item < e; item++) {
        int64_t p = item / s->oh, i = item % s->oh;
        const char *x = (const char *)c->x + p * s->h * s->w * (int64_t)es;
        char *y = (char *)c->y + item * s->ow * (int64_t)es;
        int64_t *idx = c->idx + item * s->ow;
        if (fast) {
            const char *r0 = x + 2 * i * s->w * (int64_t)es;
            ampc_max_pool2x2_row(cv, c->dt, s->w, s->ow, r0,
                                 r0 + s->w * (int64_t)es, y, idx,
                                 2 * i * s->w, s->relu_masked);
        }
        else if (c->dt == AMPC_FLOAT32) {
            ampc_max_pool_row_any(AMPC_FLOAT32, s, x, i, y, idx);
        }
        else if (c->dt == AMPC_FLOAT16) {
            ampc_max_pool_row_any(AMPC_FLOAT16, s, x, i, y, idx);
        }
        else {
            ampc_max_pool_row_any(AMPC_BFLOAT16, s, x, i, y, idx);
        }
    }
}

static inline void
ampc_max_pool2d_fwd_launch(ampc_range_fn range, const ampc_pool2d_shape *s,
                           ampc_dtype dt, const void *x, void *y,
                           int64_t *idx)
{
    ampc_pool_ctx c = {.s = s, .dt = dt, .x = x, .y = y, .idx = idx};
    int64_t work = s->ow * s->kh * s->kw;
    ampc_parallel_for(s->planes * s->oh, ampc_nn_grain(work), range, &c);
}

/* items: planes.  Each plane is zeroed and the gradients are added at their
 * indices, in output order.  float32 adds straight into grad_in; float16 and
 * bfloat16 add into a float32 plane that is rounded once at the end. */
static AMPC_ALWAYS_INLINE void
ampc_max_pool2d_bwd_range(const ampc_converters *cv, ampc_pool_ctx *c,
                          int64_t b, int64_t e)
{
    const ampc_pool2d_shape *s = c->s;
    size_t es = ampc_dtype_size[c->dt];
    int64_t hw = s->h * s->w, ohw = s->oh * s->ow;
    int status = AMPC_NN_OK;
    float *acc = NULL;
    float buf[AMPC_BLOCK];

    if (c->dt != AMPC_FLOAT32) {
        acc = malloc((size_t)hw * sizeof(float));
        if (acc == NULL) {
#pragma omp atomic update
            c->status |= AMPC_NN_NO_MEMORY;
            return;
        }
    }
    for (int64_t p = b; p < e; p++) {
        float *plane = acc != NULL ? acc : (float *)c->grad_in + p * hw;
        const int64_t *ix = c->gidx + p * ohw;
        const char *g = (const char *)c->grad_out + p * ohw * (int64_t)es;
        memset(plane, 0, (size_t)hw * sizeof(float));
        for (int64_t k0 = 0; k0 < ohw; k0 += AMPC_BLOCK) {
            int64_t m = ampc_nn_min(AMPC_BLOCK, ohw - k0);
            const float *gv = ampc_load_block_f32(
                cv, c->dt, g + k0 * (int64_t)es, 1, m, buf, NULL);
            for (int64_t k = 0; k < m; k++) {
                int64_t at = ix[k0 + k];
                /* unsigned: a negative index is out of range too */
                if ((uint64_t)at < (uint64_t)hw) {
                    plane[at] += gv[k];
                }
                else if (!ampc_pool_masked_ok(at, hw, s->relu_masked)) {
                    status |= AMPC_NN_BAD_INDEX;
                }
            }
        }
        if (acc != NULL) {
            ampc_store_block_f32(cv, c->dt, acc, hw,
                                 (char *)c->grad_in + p * hw * (int64_t)es,
                                 1, NULL);
        }
    }
    free(acc);
    if (status != AMPC_NN_OK) {
#pragma omp atomic update
        c->status |= status;
    }
}

static inline int
ampc_max_pool2d_bwd_launch(ampc_range_fn range, const ampc_pool2d_shape *s,
                           ampc_dtype dt, const void *grad_out,
                           const int64_t *idx, void *grad_in)
{
    ampc_pool_ctx c = {.s = s, .dt = dt, .grad_out = grad_out, .gidx = idx,
                       .grad_in = grad_in, .status = AMPC_NN_OK};
    int64_t work = s->h * s->w + s->oh * s->ow;
    ampc_parallel_for(s->planes, ampc_nn_grain(work), range, &c);
    if (c.status & AMPC_NN_NO_MEMORY) {
        return AMPC_NN_NO_MEMORY;
    }
    return c.status ? AMPC_NN_BAD_INDEX : AMPC_NN_OK;
}

// ----------------------------------------------------------------------------
// softmax and log_softmax

typedef struct {
    int is_log;
    ampc_dtype xdt, ydt;        /* backward: grad_y and y both ydt */
    int64_t outer, r, inner;
    const void *x;              /* forward: the input; backward: grad_y */
    const void *y;              /* backward: the forward's output */
    void *out;                  /* forward: y; backward: grad_x */
} ampc_softmax_ctx;

/* One row x (r) -> out (r), r >= 1.  Blocks of AMPC_NN_ROW: max, then the
 * sum of exp(x - max), then the output; a row of one block is widened once
 * and keeps its exponentials between the passes. */
static AMPC_ALWAYS_INLINE void
ampc_softmax_row(const ampc_converters *cv, int is_log, ampc_dtype xdt,
                 ampc_dtype ydt, int64_t r, const char *x, char *out)
{
    size_t xes = ampc_dtype_size[xdt], yes = ampc_dtype_size[ydt];
    float xb[AMPC_NN_ROW], eb[AMPC_NN_ROW];
    int one = r <= AMPC_NN_ROW;
    const float *xf = NULL;
    float m = -INFINITY;
    double sum = 0.0;
    int64_t i, n, j;

    for (i = 0; i < r; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, r - i);
        xf = ampc_load_block_f32(cv, xdt, x + i * (int64_t)xes, 1, n, xb,
                                 NULL);
        m = ampc_maximum_f32(m, ampc_nn_max_run(xf, n));
    }
    for (i = 0; i < r; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, r - i);
        if (!one) {
            xf = ampc_load_block_f32(cv, xdt, x + i * (int64_t)xes, 1, n, xb,
                                     NULL);
        }
        sum += ampc_exp_sum_f32(xf, n, m, eb);
    }
    float ls = ampc_softmax_log_sum(sum);
    float inv = ampc_softmax_inv_sum(sum);
    for (i = 0; i < r; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, r - i);
        float *o = ydt == AMPC_FLOAT32 ? (float *)out + i : eb;
        if (!one) {
            xf = ampc_load_block_f32(cv, xdt, x + i * (int64_t)xes, 1, n, xb,
                                     NULL);
        }
        if (is_log) {
            for (j = 0; j < n; j++) {
                o[j] = ampc_log_softmax_one(xf[j], m, ls);
            }
        }
        else if (one) {
            /* the exponentials kept from the sum: the same bits */
            for (j = 0; j < n; j++) {
                o[j] = eb[j] * inv;
            }
        }
        else {
            for (j = 0; j < n; j++) {
                o[j] = ampc_softmax_one(xf[j], m, inv);
            }
        }
        ampc_store_block_f32(cv, ydt, o, n, out + i * (int64_t)yes, 1, NULL);
    }
}

/* Columns j0 .. j0 + nc of x (r, inner) -> out: the same three passes, each
 * across nc <= AMPC_NN_TILE columns at once.  Column sums keep
 * AMPC_RED_LANES rows in float32 before folding into doubles. */
static AMPC_ALWAYS_INLINE void
ampc_softmax_cols(const ampc_converters *cv, int is_log, ampc_dtype xdt,
                  ampc_dtype ydt, int64_t r, int64_t inner, int64_t nc,
                  const char *x, char *out)
{
    size_t xes = ampc_dtype_size[xdt], yes = ampc_dtype_size[ydt];
    float m[AMPC_NN_TILE], acc[AMPC_NN_TILE], xb[AMPC_NN_TILE];
    float ob[AMPC_NN_TILE], ls[AMPC_NN_TILE], inv[AMPC_NN_TILE];
    double sum[AMPC_NN_TILE];
    int64_t k, j;

    for (j = 0; j < nc; j++) {
        m[j] = -INFINITY;
        sum[j] = 0.0;
    }
    for (k = 0; k < r; k++) {
        const float *v = ampc_load_block_f32(
            cv, xdt, x + k * inner * (int64_t)xes, 1, nc, xb, NULL);
        for (j = 0; j < nc; j++) {
            m[j] = ampc_nn_max(m[j], v[j]);
        }
    }
    for (int64_t k0 = 0; k0 < r; k0 += AMPC_RED_LANES) {
        int64_t k1 = ampc_nn_min(r, k0 + AMPC_RED_LANES);
        for (j = 0; j < nc; j++) {
            acc[j] = 0.0f;
        }
        for (k = k0; k < k1; k++) {
            const float *v = ampc_load_block_f32(
                cv, xdt, x + k * inner * (int64_t)xes, 1, nc, xb, NULL);
            for (j = 0; j < nc; j++) {
                acc[j] += ampc_exp_nonpos_f32(v[j] - m[j]);
            }
        }
        for (j = 0; j < nc; j++) {
            sum[j] += acc[j];
        }
    }
    for (j = 0; j < nc; j++) {
        ls[j] = ampc_softmax_log_sum(sum[j]);
        inv[j] = ampc_softmax_inv_sum(sum[j]);
    }
    for (k = 0; k < r; k++) {
        const float *v = ampc_load_block_f32(
            cv, xdt, x + k * inner * (int64_t)xes, 1, nc, xb, NULL);
        char *o = out + k * inner * (int64_t)yes;
        float *of = ydt == AMPC_FLOAT32 ? (float *)o : ob;
        if (is_log) {
            for (j = 0; j < nc; j++) {
                of[j] = ampc_log_softmax_one(v[j], m[j], ls[j]);
            }
        }
        else {
            for (j = 0; j < nc; j++) {
                of[j] = ampc_softmax_one(v[j], m[j], inv[j]);
            }
        }
        ampc_store_block_f32(cv, ydt, of, nc, o, 1, NULL);
    }
}

static inline int64_t
ampc_softmax_tiles(int64_t inner)
{
    return (inner + AMPC_NN_TILE - 1) / AMPC_NN_TILE;
}

/* items: outer rows when inner == 1, else outer * column tiles */
static AMPC_ALWAYS_INLINE void
ampc_softmax_fwd_range(const ampc_converters *cv, const ampc_softmax_ctx *c,
                       int64_t b, int64_t e)
{
    size_t xes = ampc_dtype_size[c->xdt], yes = ampc_dtype_size[c->ydt];
    if (c->inner == 1) {
        for (int64_t o = b; o < e; o++) {
            ampc_softmax_row(cv, c->is_log, c->xdt, c->ydt, c->r,
                             (const char *)c->x + o * c->r * (int64_t)xes,
                             (char *)c->out + o * c->r * (int64_t)yes);
        }
        return;
    }
    int64_t tiles = ampc_softmax_tiles(c->inner);
    for (int64_t item = b; item < e; item++) {
        int64_t o = item / tiles, j0 = (item % tiles) * AMPC_NN_TILE;
        int64_t at = o * c->r * c->inner + j0;
        ampc_softmax_cols(cv, c->is_log, c->xdt, c->ydt, c->r, c->inner,
                          ampc_nn_min(AMPC_NN_TILE, c->inner - j0),
                          (const char *)c->x + at * (int64_t)xes,
                          (char *)c->out + at * (int64_t)yes);
    }
}

static inline void
ampc_softmax_launch(ampc_range_fn range, ampc_softmax_ctx *c)
{
    if (c->inner == 1) {
        ampc_parallel_for(c->outer, ampc_nn_grain(c->r), range, c);
    }
    else {
        int64_t tiles = ampc_softmax_tiles(c->inner);
        ampc_parallel_for(c->outer * tiles,
                          ampc_nn_grain(c->r * AMPC_NN_TILE), range, c);
    }
}

/* Backward of one row: softmax gx = y * (gy - sum(gy * y)), log_softmax
 * gx = gy - exp(y) * sum(gy); two passes, the row widened once when it is
 * one block. */
static AMPC_ALWAYS_INLINE void
ampc_softmax_bwd_row(const ampc_converters *cv, int is_log, ampc_dtype dt,
                     int64_t r, const char *gy, const char *y, char *gx)
{
    size_t es = ampc_dtype_size[dt];
    float gb[AMPC_NN_ROW], yb[AMPC_NN_ROW], pb[AMPC_NN_ROW];
    int one = r <= AMPC_NN_ROW;
    const float *g = NULL, *v = NULL;
    double dot = 0.0;
    int64_t i, n, j;

    for (i = 0; i < r; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, r - i);
        g = ampc_load_block_f32(cv, dt, gy + i * (int64_t)es, 1, n, gb, NULL);
        if (is_log) {
            dot += ampc_nn_sum_run(g, n);
            continue;
        }
        v = ampc_load_block_f32(cv, dt, y + i * (int64_t)es, 1, n, yb, NULL);
        for (j = 0; j < n; j++) {
            pb[j] = g[j] * v[j];
        }
        dot += ampc_nn_sum_run(pb, n);
    }
    float d = (float)dot;
    for (i = 0; i < r; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, r - i);
        if (!one) {
            g = ampc_load_block_f32(cv, dt, gy + i * (int64_t)es, 1, n, gb,
                                    NULL);
        }
        if (!one || is_log) {
            v = ampc_load_block_f32(cv, dt, y + i * (int64_t)es, 1, n, yb,
                                    NULL);
        }
        float *o = dt == AMPC_FLOAT32 ? (float *)gx + i : pb;
        if (is_log) {
            for (j = 0; j < n; j++) {
                o[j] = ampc_log_softmax_bwd_one(v[j], g[j], d);
            }
        }
        else {
            for (j = 0; j < n; j++) {
                o[j] = ampc_softmax_bwd_one(v[j], g[j], d);
            }
        }
        ampc_store_block_f32(cv, dt, o, n, gx + i * (int64_t)es, 1, NULL);
    }
}

static AMPC_ALWAYS_INLINE void
ampc_softmax_bwd_cols(const ampc_converters *cv, int is_log, ampc_dtype dt,
                      int64_t r, int64_t inner, int64_t nc, const char *gy,
                      const char *y, char *gx)
{
    size_t es = ampc_dtype_size[dt];
    float gb[AMPC_NN_TILE], yb[AMPC_NN_TILE], ob[AMPC_NN_TILE];
    float acc[AMPC_NN_TILE], d[AMPC_NN_TILE];
    double dot[AMPC_NN_TILE];
    int64_t k, j;

    for (j = 0; j < nc; j++) {
        dot[j] = 0.0;
    }
    for (int64_t k0 = 0; k0 < r; k0 += AMPC_RED_LANES) {
        int64_t k1 = ampc_nn_min(r, k0 + AMPC_RED_LANES);
        for (j = 0; j < nc; j++) {
            acc[j] = 0.0f;
        }
        for (k = k0; k < k1; k++) {
            int64_t at = k * inner * (int64_t)es;
            const float *g = ampc_load_block_f32(cv, dt, gy + at, 1, nc, gb,
                                                 NULL);
            if (is_log) {
                for (j = 0; j < nc; j++) {
                    acc[j] += g[j];
                }
                continue;
            }
            const float *v = ampc_load_block_f32(cv, dt, y + at, 1, nc, yb,
                                                 NULL);
            for (j = 0; j < nc; j++) {
                acc[j] += g[j] * v[j];
            }
        }
        for (j = 0; j < nc; j++) {
            dot[j] += acc[j];
        }
    }
    for (j = 0; j < nc; j++) {
        d[j] = (float)dot[j];
    }
    for (k = 0; k < r; k++) {
        int64_t at = k * inner * (int64_t)es;
        const float *g = ampc_load_block_f32(cv, dt, gy + at, 1, nc, gb,
                                             NULL);
        const float *v = ampc_load_block_f32(cv, dt, y + at, 1, nc, yb,
                                             NULL);
        float *o = dt == AMPC_FLOAT32 ? (float *)(gx + at) : ob;
        if (is_log) {
            for (j = 0; j < nc; j++) {
                o[j] = ampc_log_softmax_bwd_one(v[j], g[j], d[j]);
            }
        }
        else {
            for (j = 0; j < nc; j++) {
                o[j] = ampc_softmax_bwd_one(v[j], g[j], d[j]);
            }
        }
        ampc_store_block_f32(cv, dt, o, nc, gx + at, 1, NULL);
    }
}

static AMPC_ALWAYS_INLINE void
ampc_softmax_bwd_range(const ampc_converters *cv, const ampc_softmax_ctx *c,
                       int64_t b, int64_t e)
{
    size_t es = ampc_dtype_size[c->ydt];
    if (c->inner == 1) {
        for (int64_t o = b; o < e; o++) {
            int64_t at = o * c->r * (int64_t)es;
            ampc_softmax_bwd_row(cv, c->is_log, c->ydt, c->r,
                                 (const char *)c->x + at,
                                 (const char *)c->y + at,
                                 (char *)c->out + at);
        }
        return;
    }
    int64_t tiles = ampc_softmax_tiles(c->inner);
    for (int64_t item = b; item < e; item++) {
        int64_t o = item / tiles, j0 = (item % tiles) * AMPC_NN_TILE;
        int64_t at = (o * c->r * c->inner + j0) * (int64_t)es;
        ampc_softmax_bwd_cols(cv, c->is_log, c->ydt, c->r, c->inner,
                              ampc_nn_min(AMPC_NN_TILE, c->inner - j0),
                              (const char *)c->x + at,
                              (const char *)c->y + at, (char *)c->out + at);
    }
}

#endif /* AMPC_CPU_NN_LOOPS_H */
