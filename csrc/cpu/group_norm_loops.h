/* group_norm_loops.h - the bodies of the group norm kernels, written once in
 * portable C as cpu/norm_loops.h writes layer norm's; cpu/norm_level.h
 * compiles them for each level.  The per-element math is norm_math.h's,
 * shared with cuda/group_norm.cu.
 *
 * x (N, C, HW) holds each (sample, group) as one contiguous run of
 * D = C / groups * HW values, so a group is a task: forward takes
 * ampc_norm_stats' two passes over it (mean, then centred sums) and a third
 * that normalises with each channel's scale and shift; backward takes one
 * pass for the per-(sample, channel) sums of grad_y and grad_y * (x -
 * mean), from which come the group's sums that grad_x needs and, folded over
 * the samples in order in double by the launcher, grad_weight and
 * grad_bias; then one pass for grad_x.  A group that fits AMPC_NN_ROW
 * floats is widened once.  Every sum has a fixed order: the results never
 * depend on the thread count.
 */
#ifndef AMPC_CPU_GROUP_NORM_LOOPS_H
#define AMPC_CPU_GROUP_NORM_LOOPS_H

#include "cpu/norm_loops.h"

typedef struct {
    const ampc_group_norm_shape *s;
    ampc_dtype xdt;
    const void *x, *grad_y;
    const float *w, *b;         /* (C): widened, ones / zeros when absent */
    float *mean, *rstd;         /* (N, groups): written forward, read back */
    void *out;                  /* forward: y; backward: grad_x or NULL */
    double *sums;               /* backward: (N, C, 2) sums of each (sample,
                                 * channel) of grad_y and grad_y * (x -
                                 * mean), or NULL */
} ampc_gn_ctx;

/* n <= AMPC_NN_ROW floats at offset `at` of a group: inside `whole` (the
 * group widened once), or widened from base into buf. */
static AMPC_ALWAYS_INLINE const float *
ampc_gn_block(const ampc_converters *cv, ampc_dtype dt, const char *base,
              const float *whole, int64_t at, int64_t n, float *buf)
{
    size_t es = ampc_dtype_size[dt];
    if (whole != NULL) {
        return whole + at;
    }
    return ampc_load_block_f32(cv, dt, base + at * (int64_t)es, 1, n, buf,
                               NULL);
}

/* items: (sample, group) pairs.  The statistics, then per channel y = (x -
 * mean) * (w * rstd) + b. */
static AMPC_ALWAYS_INLINE void
ampc_group_norm_fwd_range(const ampc_converters *cv, const ampc_gn_ctx *c,
                          int64_t b, int64_t e)
{
    const ampc_group_norm_shape *s = c->s;
    int64_t cg = s->c / s->groups, hw = s->hw, d = cg * hw, i, n, j;
    size_t es = ampc_dtype_size[c->xdt];
    float xb[AMPC_NN_ROW], ob[AMPC_NN_ROW];

    for (int64_t item = b; item < e; item++) {
        const char *x = (const char *)c->x + item * d * (int64_t)es;
        char *y = (char *)c->out + item * d * (int64_t)es;
        int64_t c0 = item % s->groups * cg;
        const float *xf = NULL;
        float mf = 0.0f, rf = (float)ampc_norm_invstd(0.0, s->eps);
        if (d > 0) {
            ampc_norm_stats(cv, c->xdt, x, d, s->eps, xb, &xf, &mf, &rf);
        }
        c->mean[item] = mf;
        c->rstd[item] = rf;
        const float *whole = d <= AMPC_NN_ROW ? xf : NULL;
        for (int64_t ch = 0; ch < cg; ch++) {
            float scale = ampc_group_norm_scale(c->w[c0 + ch], rf);
            float shift = c->b[c0 + ch];
            for (i = 0; i < hw; i += AMPC_NN_ROW) {
                int64_t at = ch * hw + i;
                n = ampc_nn_min(AMPC_NN_ROW, hw - i);
                const float *v = ampc_gn_block(cv, c->xdt, x, whole, at, n,
                                               xb);
                float *o = c->xdt == AMPC_FLOAT32 ? (float *)y + at : ob;
                for (j = 0; j < n; j++) {
                    o[j] = ampc_norm_apply(v[j], mf, scale, shift);
                }
                ampc_store_block_f32(cv, c->xdt, o, n, y + at * (int64_t)es,
                                     1, NULL);
            }
        }
    }
}

/* items: (sample, group) pairs.  Per channel the NORM_GRAD sums of grad_y
 * (kept for the parameter gradients), gathered into the group's sums of
 * grad_y * w; then grad_x. */
static AMPC_ALWAYS_INLINE void
ampc_group_norm_bwd_range(const ampc_converters *cv, const ampc_gn_ctx *c,
                          int64_t b, int64_t e)
{
    const ampc_group_norm_shape *s = c->s;
    int64_t cg = s->c / s->groups, hw = s->hw, d = cg * hw, i, n, j;
    size_t es = ampc_dtype_size[c->xdt];
    int one = d <= AMPC_NN_ROW;
    float xb[AMPC_NN_ROW], gb[AMPC_NN_ROW], ob[AMPC_NN_ROW];

    for (int64_t item = b; item < e; item++) {
        int64_t off = item * d * (int64_t)es;
        const char *x = (const char *)c->x + off;
        const char *g = (const char *)c->grad_y + off;
        int64_t c0 = item % s->groups * cg;
        int64_t at0 = (item / s->groups * s->c + c0) * 2;
        float mf = c->mean[item], rf = c->rstd[item];
        const float *xw = NULL, *gw = NULL;
        if (one && d > 0) {
            xw = ampc_load_block_f32(cv, c->xdt, x, 1, d, xb, NULL);
            gw = ampc_load_block_f32(cv, c->xdt, g, 1, d, gb, NULL);
        }
        double s1 = 0.0, s2 = 0.0;
        for (int64_t ch = 0; ch < cg; ch++) {
            double c1, c2;
            ampc_norm_lanes L;
            ampc_norm_lanes_init(&L, AMPC_NORM_GRAD);
            for (i = 0; i < hw; i += AMPC_NN_ROW) {
                int64_t at = ch * hw + i;
                n = ampc_nn_min(AMPC_NN_ROW, hw - i);
                const float *xv = ampc_gn_block(cv, c->xdt, x, xw, at, n, xb);
                const float *gv = ampc_gn_block(cv, c->xdt, g, gw, at, n, gb);
                ampc_norm_run(&L, AMPC_NORM_GRAD, xv, gv, mf, n);
            }
            ampc_norm_lanes_total(&L, AMPC_NORM_GRAD, &c1, &c2);
            if (c->sums != NULL) {
                c->sums[at0 + 2 * ch] = c1;
                c->sums[at0 + 2 * ch + 1] = c2;
            }
            ampc_group_norm_gather(c1, c2, c->w[c0 + ch], &s1, &s2);
        }
        if (c->out == NULL || d == 0) {
            continue;
        }
        float mg, proj;
        ampc_norm_bwd_consts(s1, s2, d, rf, &mg, &proj);
        char *gx = (char *)c->out + off;
        for (int64_t ch = 0; ch < cg; ch++) {
            float wc = c->w[c0 + ch];
            for (i = 0; i < hw; i += AMPC_NN_ROW) {
                int64_t at = ch * hw + i;
                n = ampc_nn_min(AMPC_NN_ROW, hw - i);
                const float *xv = ampc_gn_block(cv, c->xdt, x, xw, at, n, xb);
                const float *gv = ampc_gn_block(cv, c->xdt, g, gw, at, n, gb);
                float *o = c->xdt == AMPC_FLOAT32 ? (float *)gx + at : ob;
                for (j = 0; j < n; j++) {
                    o[j] = ampc_norm_bwd_one(AMPC_MUL(gv[j], wc), xv[j], mf,
                                             mg, proj, rf);
                }
                ampc_store_block_f32(cv, c->xdt, o, n, gx + at * (int64_t)es,
                                     1, NULL);
            }
        }
    }
}

static inline int
ampc_group_norm_fwd_launch(ampc_range_fn range,
                           const ampc_group_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *x, const void *weight,
                           const void *bias, float *mean, float *rstd,
                           void *y)
{
    float *wb = malloc(2 * (size_t)s->c * sizeof(float) + 1);
    if (wb == NULL) {
        return AMPC_NN_NO_MEMORY;
    }
    ampc_ln_widen(pdt, weight, s->c, 1.0f, wb);
    ampc_ln_widen(pdt, bias, s->c, 0.0f, wb + s->c);
    ampc_gn_ctx c = {.s = s, .xdt = xdt, .x = x, .w = wb, .b = wb + s->c,
                     .mean = mean, .rstd = rstd, .out = y};
    int64_t d = s->c / s->groups * s->hw;
    ampc_parallel_for(s->n * s->groups, ampc_nn_grain(3 * d), range, &c);
    free(wb);
    return AMPC_NN_OK;
}

static inline int
ampc_group_norm_bwd_launch(ampc_range_fn range,
                           const ampc_group_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *grad_y, const void *x,
                           const void *weight, const float *mean,
                           const float *rstd, void *grad_x, void *grad_weight,
                           void *grad_bias)
{
    int params = grad_weight != NULL || grad_bias != NULL;
    size_t nsums = params ? 2 * (size_t)s->n * (size_t)s->c : 0;
    float *w = malloc((size_t)s->c * sizeof(float) + 1);
    double *sums = malloc(nsums * sizeof(double) + 1);
    if (w == NULL || sums == NULL) {
        free(w);
        free(sums);
        return AMPC_NN_NO_MEMORY;
    }
    ampc_ln_widen(pdt, weight, s->c, 1.0f, w);
    ampc_gn_ctx c = {.s = s, .xdt = xdt, .x = x, .grad_y = grad_y, .w = w,
                     .mean = (float *)mean, .rstd = (float *)rstd,
                     .out = grad_x, .sums = params ? sums : NULL};
    int64_t cg = s->c / s->groups;
    ampc_parallel_for(s->n * s->groups, ampc_nn_grain(4 * cg * s->hw),
                      range, &c);
    /* the parameter gradients: over the samples in order, in double */
    size_t es = ampc_dtype_size[pdt];
    for (int64_t ch = 0; params && ch < s->c; ch++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t k = 0; k < s->n; k++) {
            const double *p = sums + 2 * (k * s->c + ch);
            sb += p[0];
            sw += ampc_group_norm_wgrad_term(p[1],
                                             rstd[k * s->groups + ch / cg]);
        }
        if (grad_weight != NULL) {
            ampc_store_f64(pdt, (char *)grad_weight + ch * es, sw);
        }
        if (grad_bias != NULL) {
            ampc_store_f64(pdt, (char *)grad_bias + ch * es, sb);
        }
    }
    free(w);
    free(sums);
    return AMPC_NN_OK;
}

#endif /* AMPC_CPU_GROUP_NORM_LOOPS_H */
