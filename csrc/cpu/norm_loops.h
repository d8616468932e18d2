/* norm_loops.h - the bodies of the batch norm and layer norm kernels,
 * written once in portable C as cpu/nn_loops.h writes the other NN loops;
 * cpu/{ref,avx2,avx512}/norm.c compile them for their ISA.  The
 * per-element math (moments, running update, normalize + affine, the
 * backward combination) is norm_math.h's, shared with cuda/norm.cu.
 *
 * Batch norm works on channel items: one channel when its planes are wide
 * (HW > AMPC_NN_TILE: each image's run of HW is summed by float32 lanes),
 * else a tile of AMPC_NN_TILE / HW channels whose N rows of tile-width
 * elements are summed column by column (so (N, C) inputs vectorise across
 * channels instead of striding).  All passes of an item run back to back,
 * so its data is still in cache for the second and third.  Layer norm
 * works on rows, widened once when a row fits AMPC_NN_ROW floats; its
 * weight and bias gradients are column sums that each chunk of
 * AMPC_RED_LANES rows adds up in float32 and the launcher folds in double,
 * chunk by chunk.  Every sum has a fixed order: the results never depend
 * on the thread count.
 */
#ifndef AMPC_CPU_NORM_LOOPS_H
#define AMPC_CPU_NORM_LOOPS_H

#include <stdint.h>
#include <stdlib.h>

#include "cpu/nn_loops.h"
#include "norm_math.h"

// ----------------------------------------------------------------------------
// lanes

/* Running sums of a pass: AMPC_RED_LANES float32 lanes, each adding at most
 * AMPC_RED_LANES terms before the lanes are folded (a float32 tree, then
 * into the doubles s1, s2), so short runs (a 16 x 16 plane, a row of 768)
 * share one fold instead of paying one each. */
typedef struct {
    float a1[AMPC_RED_LANES], a2[AMPC_RED_LANES];
    int64_t terms;              /* per lane since the last fold */
    double s1, s2;
} ampc_norm_lanes;

static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_clear(ampc_norm_lanes *L)
{
    for (int l = 0; l < AMPC_RED_LANES; l++) {
        L->a1[l] = L->a2[l] = 0.0f;
    }
    L->terms = 0;
}

static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_fold(ampc_norm_lanes *L)
{
    for (int w = AMPC_RED_LANES / 2; w > 0; w /= 2) {
        for (int l = 0; l < w; l++) {
            L->a1[l] += L->a1[l + w];
            L->a2[l] += L->a2[l + w];
        }
    }
    L->s1 += L->a1[0];
    L->s2 += L->a2[0];
    ampc_norm_lanes_clear(L);
}

static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_init(ampc_norm_lanes *L)
{
    ampc_norm_lanes_clear(L);
    L->s1 = L->s2 = 0.0;
}

/* Adds the terms of `kind` (norm_math.h) over x[0:n] (g[0:n] too for
 * AMPC_NORM_GRAD) around m, n <= AMPC_NN_ROW.  kind is a constant at every
 * call, so each use is specialised and vectorised. */
static AMPC_ALWAYS_INLINE void
ampc_norm_run(ampc_norm_lanes *L, int kind, const float *x, const float *g,
              float m, int64_t n)
{
    int64_t per = (n + AMPC_RED_LANES - 1) / AMPC_RED_LANES, i = 0;
    int l;
    if (L->terms + per > AMPC_RED_LANES) {
        ampc_norm_lanes_fold(L);
    }
    for (; i + AMPC_RED_LANES <= n; i += AMPC_RED_LANES) {
        for (l = 0; l < AMPC_RED_LANES; l++) {
            float gv = kind == AMPC_NORM_GRAD ? g[i + l] : 0.0f;
            ampc_norm_term(kind, x[i + l], gv, m, &L->a1[l], &L->a2[l]);
        }
    }
    for (l = 0; i < n; i++, l++) {
        float gv = kind == AMPC_NORM_GRAD ? g[i] : 0.0f;
        ampc_norm_term(kind, x[i], gv, m, &L->a1[l], &L->a2[l]);
    }
    L->terms += per;
}

/* The pass's totals (the lanes folded). */
static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_total(ampc_norm_lanes *L, double *s1, double *s2)
{
    ampc_norm_lanes_fold(L);
    *s1 = L->s1;
    *s2 = L->s2;
}

// ----------------------------------------------------------------------------
// batch norm

typedef struct {
    const ampc_batch_norm_shape *s;
    ampc_dtype xdt, pdt;
    const void *x, *grad_y, *weight, *bias;
    void *running_mean, *running_var;
    float *mean, *invstd;       /* written forward, read backward */
    void *out;                  /* forward: y; backward: grad_x or NULL */
    void *grad_weight, *grad_bias;
    int64_t per_item;           /* channels per item */
} ampc_bn_ctx;

/* What a per-element pass of batch norm writes. */
enum { AMPC_BN_APPLY = 0, AMPC_BN_BWD_BATCH, AMPC_BN_BWD_FIXED };

static inline int
ampc_bn_wide(const ampc_batch_norm_shape *s)
{
    return s->hw > AMPC_NN_TILE;
}

static inline int64_t
ampc_bn_per_item(const ampc_batch_norm_shape *s)
{
    return ampc_bn_wide(s) ? 1 : AMPC_NN_TILE / (s->hw > 0 ? s->hw : 1);
}

/* Image n's elements of channels [c0, ...) in x (N, C, HW). */
static inline const char *
ampc_bn_at(const ampc_bn_ctx *c, const void *t, int64_t n, int64_t c0)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t at = (n * s->c + c0) * s->hw;
    return (const char *)t + at * (int64_t)ampc_dtype_size[c->xdt];
}

/* The sums of `kind` over channels [c0, c0 + nc) around m[k]: s1[k] and
 * s2[k] for channel c0 + k (nc == 1 when the planes are wide). */
static AMPC_ALWAYS_INLINE void
ampc_bn_sums(const ampc_converters *cv, int kind, const ampc_bn_ctx *c,
             int64_t c0, int64_t nc, const float *m, double *s1, double *s2)
{
    const ampc_batch_norm_shape *s = c->s;
    float xb[AMPC_NN_ROW], gb[AMPC_NN_ROW];
    const float *gf = NULL;
    int64_t n, i, j, k;

    for (k = 0; k < nc; k++) {
        s1[k] = s2[k] = 0.0;
    }
    if (ampc_bn_wide(s)) {
        ampc_norm_lanes L;
        ampc_norm_lanes_init(&L);
        for (n = 0; n < s->n; n++) {
            const char *x = ampc_bn_at(c, c->x, n, c0);
            const char *g = ampc_bn_at(c, c->grad_y, n, c0);
            size_t es = ampc_dtype_size[c->xdt];
            for (i = 0; i < s->hw; i += AMPC_NN_ROW) {
                int64_t len = ampc_nn_min(AMPC_NN_ROW, s->hw - i);
                const float *xf = ampc_load_block_f32(
                    cv, c->xdt, x + i * (int64_t)es, 1, len, xb, NULL);
                if (kind == AMPC_NORM_GRAD) {
                    gf = ampc_load_block_f32(cv, c->xdt, g + i * (int64_t)es,
                                             1, len, gb, NULL);
                }
                ampc_norm_run(&L, kind, xf, gf, m[0], len);
            }
        }
        ampc_norm_lanes_total(&L, &s1[0], &s2[0]);
        return;
    }
    /* narrow: a float32 accumulator per column for up to AMPC_RED_LANES
     * images at a time, then doubles, then the columns of each channel */
    int64_t w = nc * s->hw;
    float a1[AMPC_NN_TILE], a2[AMPC_NN_TILE], mc[AMPC_NN_TILE];
    double d1[AMPC_NN_TILE], d2[AMPC_NN_TILE];
    for (j = 0; j < w; j++) {
        mc[j] = m[j / s->hw];
        d1[j] = d2[j] = 0.0;
    }
    for (int64_t n0 = 0; n0 < s->n; n0 += AMPC_RED_LANES) {
        int64_t n1 = ampc_nn_min(s->n, n0 + AMPC_RED_LANES);
        for (j = 0; j < w; j++) {
            a1[j] = a2[j] = 0.0f;
        }
        for (n = n0; n < n1; n++) {
            const float *xf = ampc_load_block_f32(
                cv, c->xdt, ampc_bn_at(c, c->x, n, c0), 1, w, xb, NULL);
            if (kind == AMPC_NORM_GRAD) {
                gf = ampc_load_block_f32(cv, c->xdt,
                                         ampc_bn_at(c, c->grad_y, n, c0), 1,
                                         w, gb, NULL);
            }
            for (j = 0; j < w; j++) {
                float gv = kind == AMPC_NORM_GRAD ? gf[j] : 0.0f;
                ampc_norm_term(kind, xf[j], gv, mc[j], &a1[j], &a2[j]);
            }
        }
        for (j = 0; j < w; j++) {
            d1[j] += a1[j];
            d2[j] += a2[j];
        }
    }
    for (j = 0; j < w; j++) {
        s1[j / s->hw] += d1[j];
        s2[j / s->hw] += d2[j];
    }
}

/* out = the pass `mode` over channels [c0, c0 + nc), with per-channel
 * m (the mean), p1 (scale), p2 (APPLY: shift; BWD_BATCH: mg) and p3
 * (BWD_BATCH: proj); the backward reads grad_y too. */
static AMPC_ALWAYS_INLINE void
ampc_bn_map(const ampc_converters *cv, int mode, const ampc_bn_ctx *c,
            int64_t c0, int64_t nc, const float *m, const float *p1,
            const float *p2, const float *p3)
{
    const ampc_batch_norm_shape *s = c->s;
    int wide = ampc_bn_wide(s);
    int64_t w = wide ? ampc_nn_min(s->hw, AMPC_NN_ROW) : nc * s->hw;
    float xb[AMPC_NN_ROW], gb[AMPC_NN_ROW], ob[AMPC_NN_ROW];
    float cm[AMPC_NN_TILE], c1[AMPC_NN_TILE], c2[AMPC_NN_TILE];
    float c3[AMPC_NN_TILE];
    size_t es = ampc_dtype_size[c->xdt];
    const float *xf = NULL, *gf = NULL;
    int64_t n, i, j;

    if (!wide) {
        for (j = 0; j < w; j++) {
            int64_t k = j / s->hw;
            cm[j] = m[k];
            c1[j] = p1[k];
            c2[j] = p2[k];
            c3[j] = p3[k];
        }
    }
    for (n = 0; n < s->n; n++) {
        const char *x = ampc_bn_at(c, c->x, n, c0);
        const char *g = ampc_bn_at(c, c->grad_y, n, c0);
        char *out = (char *)ampc_bn_at(c, c->out, n, c0);
        int64_t run = wide ? s->hw : w;
        for (i = 0; i < run; i += w) {
            int64_t len = ampc_nn_min(w, run - i);
            int64_t off = i * (int64_t)es;
            float *o = c->xdt == AMPC_FLOAT32 ? (float *)(out + off) : ob;
            if (mode != AMPC_BN_BWD_FIXED) {
                xf = ampc_load_block_f32(cv, c->xdt, x + off, 1, len, xb,
                                         NULL);
            }
            if (mode != AMPC_BN_APPLY) {
                gf = ampc_load_block_f32(cv, c->xdt, g + off, 1, len, gb,
                                         NULL);
            }
            if (wide && mode == AMPC_BN_APPLY) {
                for (j = 0; j < len; j++) {
                    o[j] = ampc_norm_apply(xf[j], m[0], p1[0], p2[0]);
                }
            }
            else if (wide && mode == AMPC_BN_BWD_BATCH) {
                for (j = 0; j < len; j++) {
                    o[j] = ampc_norm_bwd_one(gf[j], xf[j], m[0], p2[0],
                                             p3[0], p1[0]);
                }
            }
            else if (wide) {
                for (j = 0; j < len; j++) {
                    o[j] = gf[j] * p1[0];
                }
            }
            else if (mode == AMPC_BN_APPLY) {
                for (j = 0; j < len; j++) {
                    o[j] = ampc_norm_apply(xf[j], cm[j], c1[j], c2[j]);
                }
            }
            else if (mode == AMPC_BN_BWD_BATCH) {
                for (j = 0; j < len; j++) {
                    o[j] = ampc_norm_bwd_one(gf[j], xf[j], cm[j], c2[j],
                                             c3[j], c1[j]);
                }
            }
            else {
                for (j = 0; j < len; j++) {
                    o[j] = gf[j] * c1[j];
                }
            }
            ampc_store_block_f32(cv, c->xdt, o, len, out + off, 1, NULL);
        }
    }
}

/* A per-channel parameter as a double (dflt when the tensor is absent). */
static inline double
ampc_bn_param(const ampc_bn_ctx *c, const void *t, int64_t ch, double dflt)
{
    if (t == NULL) {
        return dflt;
    }
    size_t es = ampc_dtype_size[c->pdt];
    return ampc_load_f32(c->pdt, (const char *)t + ch * (int64_t)es);
}

/* Channel ch's statistics from its NORM_DEV sums around m0 (training) or
 * its running ones; updates the running statistics, records mean and
 * invstd, and gives the forward's per-channel mean, scale and shift. */
static inline void
ampc_bn_stats(const ampc_bn_ctx *c, int64_t ch, float m0, double s1,
              double s2, float *mean, float *scale, float *shift)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t count = s->n * s->hw;
    size_t es = ampc_dtype_size[c->pdt];
    double mu = 0.0, var = 0.0;
    if (!s->training) {
        mu = ampc_bn_param(c, c->running_mean, ch, 0.0);
        var = ampc_bn_param(c, c->running_var, ch, 1.0);
    }
    else if (count > 0) {
        ampc_norm_moments(m0, s1, s2, count, &mu, &var);
        if (c->running_mean != NULL) {
            char *rm = (char *)c->running_mean + ch * (int64_t)es;
            char *rv = (char *)c->running_var + ch * (int64_t)es;
            ampc_store_f64(c->pdt, rm, ampc_norm_running(
                ampc_load_f32(c->pdt, rm), mu, s->momentum));
            ampc_store_f64(c->pdt, rv, ampc_norm_running(
                ampc_load_f32(c->pdt, rv), ampc_norm_unbiased(var, count),
                s->momentum));
        }
    }
    double inv = ampc_norm_invstd(var, s->eps);
    c->mean[ch] = *mean = (float)mu;
    c->invstd[ch] = (float)inv;
    *scale = (float)(ampc_bn_param(c, c->weight, ch, 1.0) * inv);
    *shift = (float)ampc_bn_param(c, c->bias, ch, 0.0);
}

/* items: channel groups of per_item channels */
static AMPC_ALWAYS_INLINE void
ampc_batch_norm_fwd_range(const ampc_converters *cv, const ampc_bn_ctx *c,
                          int64_t b, int64_t e)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t count = s->n * s->hw;
    float m[AMPC_NN_TILE] = {0.0f}, scale[AMPC_NN_TILE];
    float shift[AMPC_NN_TILE], unused[AMPC_NN_TILE];
    double s1[AMPC_NN_TILE] = {0.0}, s2[AMPC_NN_TILE] = {0.0};

    for (int64_t item = b; item < e; item++) {
        int64_t c0 = item * c->per_item;
        int64_t nc = ampc_nn_min(c->per_item, s->c - c0), k;
        if (s->training && count > 0) {
            for (k = 0; k < nc; k++) {
                m[k] = 0.0f;
            }
            ampc_bn_sums(cv, AMPC_NORM_SUM, c, c0, nc, m, s1, s2);
            for (k = 0; k < nc; k++) {
                m[k] = (float)(s1[k] / (double)count);
            }
            ampc_bn_sums(cv, AMPC_NORM_DEV, c, c0, nc, m, s1, s2);
        }
        for (k = 0; k < nc; k++) {
            ampc_bn_stats(c, c0 + k, m[k], s1[k], s2[k], &m[k], &scale[k],
                          &shift[k]);
        }
        ampc_bn_map(cv, AMPC_BN_APPLY, c, c0, nc, m, scale, shift, unused);
    }
}

static inline int
ampc_batch_norm_fwd_launch(ampc_range_fn range,
                           const ampc_batch_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *x, const void *weight,
                           const void *bias, void *running_mean,
                           void *running_var, float *mean, float *invstd,
                           void *y)
{
    ampc_bn_ctx c = {.s = s, .xdt = xdt, .pdt = pdt, .x = x, .grad_y = x,
                     .weight = weight, .bias = bias,
                     .running_mean = running_mean,
                     .running_var = running_var, .mean = mean,
                     .invstd = invstd, .out = y,
                     .per_item = ampc_bn_per_item(s)};
    int64_t items = (s->c + c.per_item - 1) / c.per_item;
    ampc_parallel_for(items, ampc_nn_grain(3 * s->n * s->hw * c.per_item),
                      range, &c);
    return AMPC_NN_OK;
}

/* items: channel groups; sums of grad_y and grad_y * (x - mean) when the
 * batch statistics or a parameter gradient need them, then grad_x. */
static AMPC_ALWAYS_INLINE void
ampc_batch_norm_bwd_range(const ampc_converters *cv, const ampc_bn_ctx *c,
                          int64_t b, int64_t e)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t count = s->n * s->hw;
    int batch = s->training && count > 0;
    int sums = batch || c->grad_weight != NULL || c->grad_bias != NULL;
    size_t es = ampc_dtype_size[c->pdt];
    float scale[AMPC_NN_TILE], mg[AMPC_NN_TILE], proj[AMPC_NN_TILE];
    double s1[AMPC_NN_TILE] = {0.0}, s2[AMPC_NN_TILE] = {0.0};

    for (int64_t item = b; item < e; item++) {
        int64_t c0 = item * c->per_item;
        int64_t nc = ampc_nn_min(c->per_item, s->c - c0);
        const float *mean = c->mean + c0;
        if (sums) {
            ampc_bn_sums(cv, AMPC_NORM_GRAD, c, c0, nc, mean, s1, s2);
        }
        for (int64_t k = 0; k < nc; k++) {
            int64_t ch = c0 + k;
            double inv = c->invstd[ch];
            if (c->grad_bias != NULL) {
                ampc_store_f64(c->pdt, (char *)c->grad_bias + ch * es, s1[k]);
            }
            if (c->grad_weight != NULL) {
                ampc_store_f64(c->pdt, (char *)c->grad_weight + ch * es,
                               s2[k] * inv);
            }
            scale[k] = (float)(ampc_bn_param(c, c->weight, ch, 1.0) * inv);
            mg[k] = proj[k] = 0.0f;
            if (batch) {
                ampc_norm_bwd_consts(s1[k], s2[k], count, inv, &mg[k],
                                     &proj[k]);
            }
        }
        if (c->out != NULL) {
            ampc_bn_map(cv, batch ? AMPC_BN_BWD_BATCH : AMPC_BN_BWD_FIXED, c,
                        c0, nc, mean, scale, mg, proj);
        }
    }
}

static inline int
ampc_batch_norm_bwd_launch(ampc_range_fn range,
                           const ampc_batch_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *grad_y, const void *x,
                           const void *weight, const float *mean,
                           const float *invstd, void *grad_x,
                           void *grad_weight, void *grad_bias)
{
    ampc_bn_ctx c = {.s = s, .xdt = xdt, .pdt = pdt, .x = x,
                     .grad_y = grad_y, .weight = weight,
                     .mean = (float *)mean, .invstd = (float *)invstd,
                     .out = grad_x, .grad_weight = grad_weight,
                     .grad_bias = grad_bias,
                     .per_item = ampc_bn_per_item(s)};
    int64_t items = (s->c + c.per_item - 1) / c.per_item;
    ampc_parallel_for(items, ampc_nn_grain(3 * s->n * s->hw * c.per_item),
                      range, &c);
    return AMPC_NN_OK;
}

// ----------------------------------------------------------------------------
// layer norm

typedef struct {
    const ampc_layer_norm_shape *s;
    ampc_dtype xdt;
    const void *x, *grad_y;
    const float *w, *b;         /* (D): widened, ones / zeros when absent */
    float *mean, *rstd;         /* (rows): written forward, read backward */
    void *out;                  /* forward: y; backward: grad_x or NULL */
    float *part_w, *part_b;     /* backward: (chunks, D) or NULL */
} ampc_ln_ctx;

/* items: rows.  Sum, centred sums, then the output: three passes over a
 * row that is widened once when it fits AMPC_NN_ROW floats. */
static AMPC_ALWAYS_INLINE void
ampc_layer_norm_fwd_range(const ampc_converters *cv, const ampc_ln_ctx *c,
                          int64_t b, int64_t e)
{
    int64_t d = c->s->d, i, n, j;
    size_t es = ampc_dtype_size[c->xdt];
    float xb[AMPC_NN_ROW], ob[AMPC_NN_ROW];
    int one = d <= AMPC_NN_ROW;
    const float *xf = NULL;

    for (int64_t row = b; row < e; row++) {
        const char *x = (const char *)c->x + row * d * (int64_t)es;
        char *y = (char *)c->out + row * d * (int64_t)es;
        double s1, s2, mu, var;
        ampc_norm_lanes L;
        ampc_norm_lanes_init(&L);
        for (i = 0; i < d; i += AMPC_NN_ROW) {
            n = ampc_nn_min(AMPC_NN_ROW, d - i);
            xf = ampc_load_block_f32(cv, c->xdt, x + i * (int64_t)es, 1, n,
                                     xb, NULL);
            ampc_norm_run(&L, AMPC_NORM_SUM, xf, NULL, 0.0f, n);
        }
        ampc_norm_lanes_total(&L, &s1, &s2);
        float m0 = (float)(s1 / (double)d);
        ampc_norm_lanes_init(&L);
        for (i = 0; i < d; i += AMPC_NN_ROW) {
            n = ampc_nn_min(AMPC_NN_ROW, d - i);
            if (!one) {
                xf = ampc_load_block_f32(cv, c->xdt, x + i * (int64_t)es, 1,
                                         n, xb, NULL);
            }
            ampc_norm_run(&L, AMPC_NORM_DEV, xf, NULL, m0, n);
        }
        ampc_norm_lanes_total(&L, &s1, &s2);
        ampc_norm_moments(m0, s1, s2, d, &mu, &var);
        float mf = (float)mu, rf = (float)ampc_norm_invstd(var, c->s->eps);
        c->mean[row] = mf;
        c->rstd[row] = rf;
        for (i = 0; i < d; i += AMPC_NN_ROW) {
            n = ampc_nn_min(AMPC_NN_ROW, d - i);
            float *o = c->xdt == AMPC_FLOAT32 ? (float *)y + i : ob;
            const float *w = c->w + i, *bb = c->b + i;
            if (!one) {
                xf = ampc_load_block_f32(cv, c->xdt, x + i * (int64_t)es, 1,
                                         n, xb, NULL);
            }
            for (j = 0; j < n; j++) {
                o[j] = ampc_layer_norm_one(xf[j], mf, rf, w[j], bb[j]);
            }
            ampc_store_block_f32(cv, c->xdt, o, n, y + i * (int64_t)es, 1,
                                 NULL);
        }
    }
}

/* items: chunks of AMPC_RED_LANES rows.  Per row: g = grad_y * w, the sums
 * of g and g * (x - mean) with the chunk's weight and bias partials in the
 * same pass, then grad_x. */
static AMPC_ALWAYS_INLINE void
ampc_layer_norm_bwd_range(const ampc_converters *cv, const ampc_ln_ctx *c,
                          int64_t b, int64_t e)
{
    int64_t d = c->s->d, rows = c->s->rows, i, n, j;
    size_t es = ampc_dtype_size[c->xdt];
    float xb[AMPC_NN_ROW], gb[AMPC_NN_ROW], wg[AMPC_NN_ROW];
    float ob[AMPC_NN_ROW];
    int one = d <= AMPC_NN_ROW;
    const float *xf = NULL, *gf = NULL;

    for (int64_t chunk = b; chunk < e; chunk++) {
        float *pw = c->part_w != NULL ? c->part_w + chunk * d : NULL;
        float *pb = c->part_b != NULL ? c->part_b + chunk * d : NULL;
        int64_t r1 = ampc_nn_min(rows, (chunk + 1) * AMPC_RED_LANES);
        for (int64_t row = chunk * AMPC_RED_LANES; row < r1; row++) {
            int64_t at = row * d * (int64_t)es;
            const char *x = (const char *)c->x + at;
            const char *g = (const char *)c->grad_y + at;
            float mf = c->mean[row], rf = c->rstd[row];
            double s1, s2;
            ampc_norm_lanes L;
            ampc_norm_lanes_init(&L);
            for (i = 0; i < d; i += AMPC_NN_ROW) {
                n = ampc_nn_min(AMPC_NN_ROW, d - i);
                xf = ampc_load_block_f32(cv, c->xdt, x + i * (int64_t)es, 1,
                                         n, xb, NULL);
                gf = ampc_load_block_f32(cv, c->xdt, g + i * (int64_t)es, 1,
                                         n, gb, NULL);
                if (pw != NULL) {
                    for (j = 0; j < n; j++) {
                        pw[i + j] = ampc_norm_wgrad_acc(pw[i + j], gf[j],
                                                        xf[j], mf, rf);
                    }
                }
                if (pb != NULL) {
                    for (j = 0; j < n; j++) {
                        pb[i + j] += gf[j];
                    }
                }
                if (c->out == NULL) {
                    continue;
                }
                for (j = 0; j < n; j++) {
                    wg[j] = gf[j] * c->w[i + j];
                }
                ampc_norm_run(&L, AMPC_NORM_GRAD, xf, wg, mf, n);
            }
            if (c->out == NULL) {
                continue;
            }
            ampc_norm_lanes_total(&L, &s1, &s2);
            float mg, proj;
            ampc_norm_bwd_consts(s1, s2, d, rf, &mg, &proj);
            char *gx = (char *)c->out + at;
            for (i = 0; i < d; i += AMPC_NN_ROW) {
                n = ampc_nn_min(AMPC_NN_ROW, d - i);
                float *o = c->xdt == AMPC_FLOAT32 ? (float *)gx + i : ob;
                if (!one) {
                    xf = ampc_load_block_f32(cv, c->xdt, x + i * (int64_t)es,
                                             1, n, xb, NULL);
                    gf = ampc_load_block_f32(cv, c->xdt, g + i * (int64_t)es,
                                             1, n, gb, NULL);
                    for (j = 0; j < n; j++) {
                        wg[j] = gf[j] * c->w[i + j];
                    }
                }
                for (j = 0; j < n; j++) {
                    o[j] = ampc_norm_bwd_one(wg[j], xf[j], mf, mg, proj, rf);
                }
                ampc_store_block_f32(cv, c->xdt, o, n, gx + i * (int64_t)es,
                                     1, NULL);
            }
        }
    }
}

/* (D) floats: t's values (dtype pdt), or dflt everywhere when t is NULL. */
static inline void
ampc_ln_widen(ampc_dtype pdt, const void *t, int64_t d, float dflt,
              float *out)
{
    size_t es = ampc_dtype_size[pdt];
    for (int64_t j = 0; j < d; j++) {
        out[j] = t == NULL ? dflt
                           : ampc_load_f32(pdt, (const char *)t + j * es);
    }
}

static inline int
ampc_layer_norm_fwd_launch(ampc_range_fn range,
                           const ampc_layer_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *x, const void *weight,
                           const void *bias, float *mean, float *rstd,
                           void *y)
{
    float *wb = malloc(2 * (size_t)s->d * sizeof(float) + 1);
    if (wb == NULL) {
        return AMPC_NN_NO_MEMORY;
    }
    ampc_ln_widen(pdt, weight, s->d, 1.0f, wb);
    ampc_ln_widen(pdt, bias, s->d, 0.0f, wb + s->d);
    ampc_ln_ctx c = {.s = s, .xdt = xdt, .x = x, .w = wb, .b = wb + s->d,
                     .mean = mean, .rstd = rstd, .out = y};
    ampc_parallel_for(s->rows, ampc_nn_grain(3 * s->d), range, &c);
    free(wb);
    return AMPC_NN_OK;
}

static inline int
ampc_layer_norm_bwd_launch(ampc_range_fn range,
                           const ampc_layer_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *grad_y, const void *x,
                           const void *weight, const float *mean,
                           const float *rstd, void *grad_x, void *grad_weight,
                           void *grad_bias)
{
    int64_t chunks = (s->rows + AMPC_RED_LANES - 1) / AMPC_RED_LANES;
    size_t part = (size_t)chunks * (size_t)s->d;
    int parts = (grad_weight != NULL) + (grad_bias != NULL);
    float *w = malloc((size_t)s->d * sizeof(float) + 1);
    float *acc = calloc(parts * part + 1, sizeof(float));
    if (w == NULL || acc == NULL) {
        free(w);
        free(acc);
        return AMPC_NN_NO_MEMORY;
    }
    ampc_ln_widen(pdt, weight, s->d, 1.0f, w);
    ampc_ln_ctx c = {.s = s, .xdt = xdt, .x = x, .grad_y = grad_y, .w = w,
                     .mean = (float *)mean, .rstd = (float *)rstd,
                     .out = grad_x,
                     .part_w = grad_weight != NULL ? acc : NULL,
                     .part_b = grad_bias != NULL ? acc + (parts - 1) * part
                                                 : NULL};
    ampc_parallel_for(chunks, ampc_nn_grain(2 * AMPC_RED_LANES * s->d),
                      range, &c);
    /* the column sums, chunk by chunk in double */
    size_t es = ampc_dtype_size[pdt];
    for (int64_t j = 0; j < s->d; j++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t k = 0; k < chunks; k++) {
            if (c.part_w != NULL) {
                sw += c.part_w[k * s->d + j];
            }
            if (c.part_b != NULL) {
                sb += c.part_b[k * s->d + j];
            }
        }
        if (grad_weight != NULL) {
            ampc_store_f64(pdt, (char *)grad_weight + j * es, sw);
        }
        if (grad_bias != NULL) {
            ampc_store_f64(pdt, (char *)grad_bias + j * es, sb);
        }
    }
    free(w);
    free(acc);
    return AMPC_NN_OK;
}

#endif /* AMPC_CPU_NORM_LOOPS_H */
