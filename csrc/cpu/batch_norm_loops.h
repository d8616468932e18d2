/* batch_norm_loops.h - the bodies of the batch norm kernels, written once
 * in portable C (cpu/norm_loops.h has the float32 lanes they sum with);
 * cpu/{ref,avx2,avx512}/norm.c compile them for their ISA.  The
 * per-element math is norm_math.h's, shared with cuda/norm.cu.
 *
 * x (N, C, HW) is read in one of two ways.  Narrow planes (HW <=
 * AMPC_NN_TILE, e.g. (N, C) inputs): items are tiles of AMPC_NN_TILE / HW
 * channels whose N rows are summed column by column (vectorised across
 * channels), and all passes of a tile run back to back.  Wide planes: the
 * passes stream through memory in order, images as items: the statistics
 * pass takes each plane's mean and centred sum of squares (two passes over
 * a plane that is in cache) and the launcher combines the planes of a
 * channel in image order (the mean of their means, then their squared
 * deviations), the backward pass each plane's gradient sums; then a
 * per-element pass runs over the planes.  Every sum has a
 * fixed order: the results never depend on the thread count.
 */
#ifndef AMPC_CPU_BATCH_NORM_LOOPS_H
#define AMPC_CPU_BATCH_NORM_LOOPS_H

#include <stdint.h>
#include <stdlib.h>

#include "cpu/norm_loops.h"

typedef struct {
    const ampc_batch_norm_shape *s;
    ampc_dtype xdt, pdt;
    const void *x, *grad_y, *weight, *bias;
    void *running_mean, *running_var;
    float *mean, *invstd;       /* written forward, read backward */
    void *out;                  /* forward: y; backward: grad_x or NULL */
    void *grad_weight, *grad_bias;
    int mode;                   /* the per-element pass (AMPC_BN_*) */
    int64_t per_item;           /* narrow: channels per item */
    double *part;               /* wide: (N, C, 2) per-plane statistics */
    float *chan;                /* wide: (C, 4) the per-element pass's
                                 * per-channel m, p1, p2, p3 */
} ampc_bn_ctx;

/* What a per-element pass of batch norm writes. */
enum { AMPC_BN_APPLY = 0, AMPC_BN_BWD_BATCH, AMPC_BN_BWD_FIXED };

static inline int
ampc_bn_wide(const ampc_batch_norm_shape *s)
{
    return s->hw > AMPC_NN_TILE;
}

/* Image n's elements of channels [c0, ...) in x (N, C, HW). */
static inline const char *
ampc_bn_at(const ampc_bn_ctx *c, const void *t, int64_t n, int64_t c0)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t at = (n * s->c + c0) * s->hw;
    return (const char *)t + at * (int64_t)ampc_dtype_size[c->xdt];
}

// ----------------------------------------------------------------------------
// sums

/* Narrow planes: the sums of `kind` over channels [c0, c0 + nc) around
 * m[k], s1[k] and s2[k] for channel c0 + k: a float32 accumulator per
 * column for up to AMPC_RED_LANES images at a time, then doubles, then the
 * columns of each channel. */
static AMPC_ALWAYS_INLINE void
ampc_bn_tile_sums(const ampc_converters *cv, int kind, const ampc_bn_ctx *c,
                  int64_t c0, int64_t nc, const float *m, double *s1,
                  double *s2)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t w = nc * s->hw, n, j;
    float xb[AMPC_NN_TILE], gb[AMPC_NN_TILE];
    float a1[AMPC_NN_TILE], a2[AMPC_NN_TILE], mc[AMPC_NN_TILE];
    double d1[AMPC_NN_TILE], d2[AMPC_NN_TILE];
    const float *gf = NULL;

    for (j = 0; j < nc; j++) {
        s1[j] = s2[j] = 0.0;
    }
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

/* Wide planes, items: images.  Forward: part[n, ch] = the mean and the
 * centred sum of squares of plane (n, ch), two-pass (the sum, then the
 * sums around its float32 estimate; a plane of up to AMPC_NN_ROW elements
 * is widened once, a longer one is read again from cache); backward: the
 * NORM_GRAD sums of the plane around the channel's mean. */
static AMPC_ALWAYS_INLINE void
ampc_batch_norm_plane_range(const ampc_converters *cv, const ampc_bn_ctx *c,
                            int64_t b, int64_t e)
{
    const ampc_batch_norm_shape *s = c->s;
    size_t es = ampc_dtype_size[c->xdt];
    int fwd = c->mode == AMPC_BN_APPLY, one = s->hw <= AMPC_NN_ROW;
    int kind = fwd ? AMPC_NORM_SUM : AMPC_NORM_GRAD;
    float xb[AMPC_NN_ROW], gb[AMPC_NN_ROW];
    const float *xf = NULL;
    ampc_norm_lanes L;

    for (int64_t n = b; n < e; n++) {
        for (int64_t ch = 0; ch < s->c; ch++) {
            const char *x = ampc_bn_at(c, c->x, n, ch);
            const char *g = ampc_bn_at(c, c->grad_y, n, ch);
            double *p = c->part + 2 * (n * s->c + ch);
            double s1, s2, mean, var;
            int64_t i, len;
            ampc_norm_lanes_init(&L, kind);
            for (i = 0; i < s->hw; i += AMPC_NN_ROW) {
                len = ampc_nn_min(AMPC_NN_ROW, s->hw - i);
                xf = ampc_load_block_f32(cv, c->xdt, x + i * (int64_t)es, 1,
                                         len, xb, NULL);
                if (fwd) {
                    ampc_norm_run(&L, AMPC_NORM_SUM, xf, NULL, 0.0f, len);
                    continue;
                }
                const float *gf = ampc_load_block_f32(
                    cv, c->xdt, g + i * (int64_t)es, 1, len, gb, NULL);
                ampc_norm_run(&L, AMPC_NORM_GRAD, xf, gf, c->mean[ch], len);
            }
            ampc_norm_lanes_total(&L, kind, &s1, &s2);
            if (!fwd) {
                p[0] = s1;
                p[1] = s2;
                continue;
            }
            float m0 = (float)(s1 / (double)s->hw);
            ampc_norm_lanes_init(&L, AMPC_NORM_DEV);
            for (i = 0; i < s->hw; i += AMPC_NN_ROW) {
                len = ampc_nn_min(AMPC_NN_ROW, s->hw - i);
                if (!one) {
                    xf = ampc_load_block_f32(cv, c->xdt, x + i * (int64_t)es,
                                             1, len, xb, NULL);
                }
                ampc_norm_run(&L, AMPC_NORM_DEV, xf, NULL, m0, len);
            }
            ampc_norm_lanes_total(&L, AMPC_NORM_DEV, &s1, &s2);
            ampc_norm_moments(m0, s1, s2, s->hw, &mean, &var);
            p[0] = mean;
            p[1] = var * (double)s->hw;
        }
    }
}

// ----------------------------------------------------------------------------
// the per-element pass

/* out = the pass `mode` over channels [c0, c0 + nc) of images [n0, n1),
 * with per-channel m (the mean), p1 (scale), p2 (APPLY: shift; BWD_BATCH:
 * mg) and p3 (BWD_BATCH: proj); the backward reads grad_y too.  Wide
 * planes (one channel) go in blocks of AMPC_NN_ROW with scalar constants,
 * narrow ones a row of the tile at a time with a constant per column. */
static AMPC_ALWAYS_INLINE void
ampc_bn_map(const ampc_converters *cv, int mode, const ampc_bn_ctx *c,
            int64_t c0, int64_t nc, int64_t n0, int64_t n1, const float *m,
            const float *p1, const float *p2, const float *p3)
{
    const ampc_batch_norm_shape *s = c->s;
    int wide = ampc_bn_wide(s);
    int64_t w = wide ? ampc_nn_min(s->hw, AMPC_NN_ROW) : nc * s->hw;
    int64_t run = wide ? s->hw : w;
    float xb[AMPC_NN_ROW], gb[AMPC_NN_ROW], ob[AMPC_NN_ROW];
    float cm[AMPC_NN_TILE], c1[AMPC_NN_TILE], c2[AMPC_NN_TILE];
    float c3[AMPC_NN_TILE];
    size_t es = ampc_dtype_size[c->xdt];
    const float *xf = NULL, *gf = NULL;
    int64_t n, i, j;

    for (j = 0; !wide && j < w; j++) {
        int64_t k = j / s->hw;
        cm[j] = m[k];
        c1[j] = p1[k];
        c2[j] = p2[k];
        c3[j] = p3[k];
    }
    for (n = n0; n < n1; n++) {
        const char *x = ampc_bn_at(c, c->x, n, c0);
        const char *g = ampc_bn_at(c, c->grad_y, n, c0);
        char *out = (char *)ampc_bn_at(c, c->out, n, c0);
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

/* items: the N * C planes in memory order (wide planes) */
static AMPC_ALWAYS_INLINE void
ampc_batch_norm_map_range(const ampc_converters *cv, const ampc_bn_ctx *c,
                          int64_t b, int64_t e)
{
    for (int64_t item = b; item < e; item++) {
        int64_t n = item / c->s->c, ch = item % c->s->c;
        const float *p = c->chan + 4 * ch;
        ampc_bn_map(cv, c->mode, c, ch, 1, n, n + 1, &p[0], &p[1], &p[2],
                    &p[3]);
    }
}

// ----------------------------------------------------------------------------
// per-channel constants

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

/* Forward, channel ch with batch mean mu and biased variance var (training
 * with a non-empty batch): updates the running statistics; records the
 * statistics used (else the running ones) and p[0..2] = the per-element
 * pass's mean, scale and shift. */
static inline void
ampc_bn_fwd_channel(const ampc_bn_ctx *c, int64_t ch, double mu, double var,
                    float *p)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t count = s->n * s->hw;
    size_t es = ampc_dtype_size[c->pdt];
    if (!s->training) {
        mu = ampc_bn_param(c, c->running_mean, ch, 0.0);
        var = ampc_bn_param(c, c->running_var, ch, 1.0);
    }
    else if (count > 0 && c->running_mean != NULL) {
        char *rm = (char *)c->running_mean + ch * (int64_t)es;
        char *rv = (char *)c->running_var + ch * (int64_t)es;
        ampc_store_f64(c->pdt, rm, ampc_norm_running(
            ampc_load_f32(c->pdt, rm), mu, s->momentum));
        ampc_store_f64(c->pdt, rv, ampc_norm_running(
            ampc_load_f32(c->pdt, rv), ampc_norm_unbiased(var, count),
            s->momentum));
    }
    double inv = ampc_norm_invstd(var, s->eps);
    c->mean[ch] = p[0] = (float)mu;
    c->invstd[ch] = (float)inv;
    p[1] = (float)(ampc_bn_param(c, c->weight, ch, 1.0) * inv);
    p[2] = (float)ampc_bn_param(c, c->bias, ch, 0.0);
}

/* Backward, channel ch with its NORM_GRAD sums: writes the parameter
 * gradients; p[0..3] = the per-element pass's mean, scale, mg and proj. */
static inline void
ampc_bn_bwd_channel(const ampc_bn_ctx *c, int64_t ch, double s1, double s2,
                    float *p)
{
    int64_t count = c->s->n * c->s->hw;
    size_t es = ampc_dtype_size[c->pdt];
    double inv = c->invstd[ch];
    if (c->grad_bias != NULL) {
        ampc_store_f64(c->pdt, (char *)c->grad_bias + ch * es, s1);
    }
    if (c->grad_weight != NULL) {
        ampc_store_f64(c->pdt, (char *)c->grad_weight + ch * es, s2 * inv);
    }
    p[0] = c->mean[ch];
    p[1] = (float)(ampc_bn_param(c, c->weight, ch, 1.0) * inv);
    p[2] = p[3] = 0.0f;
    if (c->mode == AMPC_BN_BWD_BATCH) {
        ampc_norm_bwd_consts(s1, s2, count, inv, &p[2], &p[3]);
    }
}

// ----------------------------------------------------------------------------
// narrow planes: channel tiles

/* items: tiles of per_item channels, every pass of a tile in turn */
static AMPC_ALWAYS_INLINE void
ampc_batch_norm_tile_range(const ampc_converters *cv, const ampc_bn_ctx *c,
                           int64_t b, int64_t e)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t count = s->n * s->hw;
    int fwd = c->mode == AMPC_BN_APPLY;
    int sums = fwd ? s->training && count > 0
                   : c->mode == AMPC_BN_BWD_BATCH ||
                         c->grad_weight != NULL || c->grad_bias != NULL;
    float m[AMPC_NN_TILE] = {0.0f}, p[AMPC_NN_TILE][4];
    float pm[AMPC_NN_TILE], p1[AMPC_NN_TILE], p2[AMPC_NN_TILE];
    float p3[AMPC_NN_TILE];
    double s1[AMPC_NN_TILE] = {0.0}, s2[AMPC_NN_TILE] = {0.0};

    for (int64_t item = b; item < e; item++) {
        int64_t c0 = item * c->per_item, k;
        int64_t nc = ampc_nn_min(c->per_item, s->c - c0);
        if (fwd && sums) {
            for (k = 0; k < nc; k++) {
                m[k] = 0.0f;
            }
            ampc_bn_tile_sums(cv, AMPC_NORM_SUM, c, c0, nc, m, s1, s2);
            for (k = 0; k < nc; k++) {
                m[k] = (float)(s1[k] / (double)count);
            }
            ampc_bn_tile_sums(cv, AMPC_NORM_DEV, c, c0, nc, m, s1, s2);
        }
        else if (sums) {
            ampc_bn_tile_sums(cv, AMPC_NORM_GRAD, c, c0, nc, c->mean + c0,
                              s1, s2);
        }
        for (k = 0; k < nc; k++) {
            double mu = 0.0, var = 0.0;
            if (!fwd) {
                ampc_bn_bwd_channel(c, c0 + k, s1[k], s2[k], p[k]);
            }
            else {
                if (sums) {
                    ampc_norm_moments(m[k], s1[k], s2[k], count, &mu, &var);
                }
                ampc_bn_fwd_channel(c, c0 + k, mu, var, p[k]);
            }
            pm[k] = p[k][0];
            p1[k] = p[k][1];
            p2[k] = p[k][2];
            p3[k] = p[k][3];
        }
        if (c->out != NULL) {
            ampc_bn_map(cv, c->mode, c, c0, nc, 0, s->n, pm, p1, p2, p3);
        }
    }
}

// ----------------------------------------------------------------------------
// launchers

/* Narrow planes: the tiles.  Wide planes: the per-plane pass over the
 * images, each channel's planes combined here in image order, then the
 * per-element pass over the planes in memory order. */
static inline int
ampc_bn_launch(ampc_range_fn tiles, ampc_range_fn planes, ampc_range_fn map,
               ampc_bn_ctx *c)
{
    const ampc_batch_norm_shape *s = c->s;
    int64_t count = s->n * s->hw;
    if (!ampc_bn_wide(s)) {
        c->per_item = AMPC_NN_TILE / (s->hw > 0 ? s->hw : 1);
        ampc_parallel_for((s->c + c->per_item - 1) / c->per_item,
                          ampc_nn_grain(3 * count * c->per_item), tiles, c);
        return AMPC_NN_OK;
    }
    int fwd = c->mode == AMPC_BN_APPLY;
    int sums = fwd ? s->training && count > 0
                   : c->mode == AMPC_BN_BWD_BATCH ||
                         c->grad_weight != NULL || c->grad_bias != NULL;
    c->chan = malloc(4 * (size_t)s->c * sizeof(float) + 1);
    c->part = sums ? malloc(2 * (size_t)(s->n * s->c) * sizeof(double) + 1)
                   : NULL;
    if (c->chan == NULL || (sums && c->part == NULL)) {
        free(c->chan);
        free(c->part);
        return AMPC_NN_NO_MEMORY;
    }
    if (sums) {
        ampc_parallel_for(s->n, ampc_nn_grain(2 * s->c * s->hw), planes, c);
    }
    for (int64_t ch = 0; ch < s->c; ch++) {
        double mu = 0.0, m2 = 0.0, s1 = 0.0, s2 = 0.0;
        const double *p = c->part + 2 * ch;
        int64_t stride = 2 * s->c;
        /* forward: the planes have equal counts, so the channel's mean is
         * the mean of theirs, and its m2 theirs plus HW times the squared
         * deviations of their means (a second pass, no cancellation) */
        for (int64_t n = 0; sums && n < s->n; n++) {
            s1 += p[n * stride];
            s2 += p[n * stride + 1];
        }
        if (fwd && sums) {
            mu = s1 / (double)s->n;
            double dev = 0.0;
            for (int64_t n = 0; n < s->n; n++) {
                double d = p[n * stride] - mu;
                dev += d * d;
            }
            m2 = s2 + dev * (double)s->hw;
        }
        if (fwd) {
            ampc_bn_fwd_channel(c, ch, mu, sums ? m2 / (double)count : 0.0,
                                c->chan + 4 * ch);
        }
        else {
            ampc_bn_bwd_channel(c, ch, s1, s2, c->chan + 4 * ch);
        }
    }
    if (c->out != NULL) {
        ampc_parallel_for(s->n * s->c, ampc_nn_grain(s->hw), map, c);
    }
    free(c->chan);
    free(c->part);
    return AMPC_NN_OK;
}

static inline int
ampc_batch_norm_fwd_launch(ampc_range_fn tiles, ampc_range_fn planes,
                           ampc_range_fn map, const ampc_batch_norm_shape *s,
                           ampc_dtype xdt, ampc_dtype pdt, const void *x,
                           const void *weight, const void *bias,
                           void *running_mean, void *running_var, float *mean,
                           float *invstd, void *y)
{
    ampc_bn_ctx c = {.s = s, .xdt = xdt, .pdt = pdt, .x = x, .grad_y = x,
                     .weight = weight, .bias = bias,
                     .running_mean = running_mean,
                     .running_var = running_var, .mean = mean,
                     .invstd = invstd, .out = y, .mode = AMPC_BN_APPLY};
    return ampc_bn_launch(tiles, planes, map, &c);
}

static inline int
ampc_batch_norm_bwd_launch(ampc_range_fn tiles, ampc_range_fn planes,
                           ampc_range_fn map, const ampc_batch_norm_shape *s,
                           ampc_dtype xdt, ampc_dtype pdt, const void *grad_y,
                           const void *x, const void *weight,
                           const float *mean, const float *invstd,
                           void *grad_x, void *grad_weight, void *grad_bias)
{
    int batch = s->training && s->n * s->hw > 0;
    ampc_bn_ctx c = {.s = s, .xdt = xdt, .pdt = pdt, .x = x,
                     .grad_y = grad_y, .weight = weight,
                     .mean = (float *)mean, .invstd = (float *)invstd,
                     .out = grad_x, .grad_weight = grad_weight,
                     .grad_bias = grad_bias,
                     .mode = batch ? AMPC_BN_BWD_BATCH : AMPC_BN_BWD_FIXED};
    return ampc_bn_launch(tiles, planes, map, &c);
}

#endif /* AMPC_CPU_BATCH_NORM_LOOPS_H */
