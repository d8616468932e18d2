/* norm_loops.h - the float32 lanes that the normalisation layers' sums
 * share, and the bodies of the layer norm kernels, written once in
 * portable C as cpu/nn_loops.h writes the other NN loops (batch norm's are
 * in cpu/batch_norm_loops.h); cpu/{ref,avx2,avx512}/norm.c compile them
 * for their ISA.  The per-element math (moments, normalize + affine, the
 * backward combination) is norm_math.h's, shared with cuda/norm.cu.
 *
 * Layer norm works on rows, widened once when a row fits AMPC_NN_ROW
 * floats; its weight and bias gradients are column sums that each chunk of
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

/* A pass of kind AMPC_NORM_SUM leaves a2 alone: it is neither cleared nor
 * folded (kind is a constant at every call). */
static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_clear(ampc_norm_lanes *L, int kind)
{
    for (int l = 0; l < AMPC_RED_LANES; l++) {
        L->a1[l] = 0.0f;
    }
    for (int l = 0; kind != AMPC_NORM_SUM && l < AMPC_RED_LANES; l++) {
        L->a2[l] = 0.0f;
    }
    L->terms = 0;
}

_Static_assert(AMPC_RED_LANES == 64, "ampc_norm_lanes_tree folds 64 lanes");

/* The sum of the 64 lanes as a fixed tree: four vectors of 16 added as
 * vectors, then halved (spelled out: a loop over the halving widths
 * leaves gcc a scalar chain). */
static AMPC_ALWAYS_INLINE float
ampc_norm_lanes_tree(const float *a)
{
    float v[16];
    int l;
    for (l = 0; l < 16; l++) {
        v[l] = (a[l] + a[l + 16]) + (a[l + 32] + a[l + 48]);
    }
    for (l = 0; l < 8; l++) {
        v[l] += v[l + 8];
    }
    for (l = 0; l < 4; l++) {
        v[l] += v[l + 4];
    }
    return (v[0] + v[2]) + (v[1] + v[3]);
}

/* Adds the lanes to the doubles; the lanes are then spent (clear them to
 * go on). */
static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_fold(ampc_norm_lanes *L, int kind)
{
    L->s1 += ampc_norm_lanes_tree(L->a1);
    if (kind != AMPC_NORM_SUM) {
        L->s2 += ampc_norm_lanes_tree(L->a2);
    }
}

static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_init(ampc_norm_lanes *L, int kind)
{
    ampc_norm_lanes_clear(L, kind);
    L->s1 = L->s2 = 0.0;
}

/* Adds the terms of `kind` (norm_math.h) over x[0:n] (g[0:n] too for
 * AMPC_NORM_GRAD) around m, n <= AMPC_NN_ROW, to lanes initialised for
 * that kind.  kind is a constant at every call, so each use is
 * specialised and vectorised. */
static AMPC_ALWAYS_INLINE void
ampc_norm_run(ampc_norm_lanes *L, int kind, const float *x, const float *g,
              float m, int64_t n)
{
    int64_t per = (n + AMPC_RED_LANES - 1) / AMPC_RED_LANES, i = 0;
    int l;
    if (L->terms + per > AMPC_RED_LANES) {
        ampc_norm_lanes_fold(L, kind);
        ampc_norm_lanes_clear(L, kind);
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

/* The pass's totals (s2 is 0 for AMPC_NORM_SUM); the lanes are spent. */
static AMPC_ALWAYS_INLINE void
ampc_norm_lanes_total(ampc_norm_lanes *L, int kind, double *s1, double *s2)
{
    ampc_norm_lanes_fold(L, kind);
    *s1 = L->s1;
    *s2 = L->s2;
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

/* The mean and rstd (1 / sqrt(biased variance + eps)) of the d > 0 values
 * at x (xdt): a NORM_SUM pass for a first mean, then a NORM_DEV pass
 * around it, over blocks of AMPC_NN_ROW widened into xb.  When d fits one
 * block, it is widened once and *xf points at its values for the caller's
 * output pass.  Layer norm's rows and group norm's groups. */
static AMPC_ALWAYS_INLINE void
ampc_norm_stats(const ampc_converters *cv, ampc_dtype xdt, const char *x,
                int64_t d, double eps, float *xb, const float **xf,
                float *mean, float *rstd)
{
    size_t es = ampc_dtype_size[xdt];
    int one = d <= AMPC_NN_ROW;
    const float *f = NULL;
    double s1, s2, mu, var;
    int64_t i, n;
    ampc_norm_lanes L;
    ampc_norm_lanes_init(&L, AMPC_NORM_SUM);
    for (i = 0; i < d; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, d - i);
        f = ampc_load_block_f32(cv, xdt, x + i * (int64_t)es, 1, n, xb, NULL);
        ampc_norm_run(&L, AMPC_NORM_SUM, f, NULL, 0.0f, n);
    }
    ampc_norm_lanes_total(&L, AMPC_NORM_SUM, &s1, &s2);
    float m0 = (float)(s1 / (double)d);
    ampc_norm_lanes_init(&L, AMPC_NORM_DEV);
    for (i = 0; i < d; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, d - i);
        if (!one) {
            f = ampc_load_block_f32(cv, xdt, x + i * (int64_t)es, 1, n, xb,
                                    NULL);
        }
        ampc_norm_run(&L, AMPC_NORM_DEV, f, NULL, m0, n);
    }
    ampc_norm_lanes_total(&L, AMPC_NORM_DEV, &s1, &s2);
    ampc_norm_moments(m0, s1, s2, d, &mu, &var);
    *mean = (float)mu;
    *rstd = (float)ampc_norm_invstd(var, eps);
    *xf = f;
}

/* items: rows.  The statistics (two passes), then the output: three passes
 * over a row that is widened once when it fits AMPC_NN_ROW floats. */
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
        float mf, rf;
        ampc_norm_stats(cv, c->xdt, x, d, c->s->eps, xb, &xf, &mf, &rf);
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
            ampc_norm_lanes_init(&L, AMPC_NORM_GRAD);
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
            ampc_norm_lanes_total(&L, AMPC_NORM_GRAD, &s1, &s2);
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
