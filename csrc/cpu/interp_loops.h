/* interp_loops.h - the bodies of interpolate's separable modes (linear,
 * bilinear, trilinear, bicubic, antialiased bilinear and bicubic), forward
 * and backward, written once and compiled per level as cpu/nn_loops.h
 * explains; the taps are interp_math.h's, shared with cuda/interp.cu,
 * which sums in the same order (interp.h), so float32 gives the same bits.
 *
 * Per plane, one pass per axis that is not a copy, W then H then D: the W
 * pass is a short dot product per output over its row; the H and D passes
 * blend whole rows (slabs) of the previous pass, a vector multiply-add per
 * tap.  The backward runs the adjoint passes in reverse order (D, H, W),
 * each a sequence of row updates in increasing output order: no atomics,
 * and the result does not depend on the thread count.  Passes stay in
 * float32 and round once on the final store.
 */
#ifndef AMPC_CPU_INTERP_LOOPS_H
#define AMPC_CPU_INTERP_LOOPS_H

#include "cpu/nn_loops.h"
#include "interp_math.h"

typedef struct {
    const ampc_interp_shape *s;
    ampc_dtype dt;
    const void *in;             /* x, or grad_out */
    void *out;                  /* y, or grad_in */
    ampc_interp_table t[AMPC_INTERP_AXES];
    int status;                 /* an ampc_nn_status */
} ampc_interp_ctx;

/* One range call's float scratch (n floats), or NULL with c->status set. */
static inline float *
ampc_interp_scratch(ampc_interp_ctx *c, int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (p == NULL) {
#pragma omp atomic update
        c->status |= AMPC_NN_NO_MEMORY;
    }
    return p;
}

// ----------------------------------------------------------------------------
// passes

/* The W pass over one row: out[o] = sum_j w[o][j] in[first[o] + j] */
static AMPC_ALWAYS_INLINE void
ampc_interp_row(const ampc_interp_table *t, int64_t taps, int64_t on,
                const float *in, float *out)
{
    for (int64_t o = 0; o < on; o++) {
        const float *src = in + t->first[o];
        const float *w = t->w + o * taps;
        float acc = 0.0f;
        for (int64_t j = 0; j < t->count[o]; j++) {
            acc += w[j] * src[j];
        }
        out[o] = acc;
    }
}

/* An H or D pass's output row: out[0:len] = sum_j w[j] src[j * stride +
 * 0:len] for j < count, summed in order from 0. */
static AMPC_ALWAYS_INLINE void
ampc_interp_blend(const float *w, int64_t count, const float *src,
                  int64_t stride, int64_t len, float *out)
{
    for (int64_t i = 0; i < len; i++) {
        out[i] = 0.0f;
    }
    for (int64_t j = 0; j < count; j++) {
        float wj = w[j];
        const float *s = src + j * stride;
        for (int64_t i = 0; i < len; i++) {
            out[i] += wj * s[i];
        }
    }
}

/* dst[0:len] += w * src[0:len] */
static AMPC_ALWAYS_INLINE void
ampc_interp_axpy(float w, const float *src, int64_t len, float *dst)
{
    for (int64_t i = 0; i < len; i++) {
        dst[i] += w * src[i];
    }
}

/* Where a pass writes a run of n results: straight into a float32 output
 * (final), into scratch (not final), or into `row` and then stored
 * rounded to dt. */
static AMPC_ALWAYS_INLINE float *
ampc_interp_sink(ampc_dtype dt, int final, char *out, float *scratch,
                 float *row)
{
    if (!final) {
        return scratch;
    }
    return dt == AMPC_FLOAT32 ? (float *)out : row;
}

static AMPC_ALWAYS_INLINE void
ampc_interp_flush(const ampc_converters *cv, ampc_dtype dt, int final,
                  const float *row, int64_t n, char *out)
{
    if (final && dt != AMPC_FLOAT32) {
        ampc_store_block_f32(cv, dt, row, n, out, 1, NULL);
    }
}

// ----------------------------------------------------------------------------
// forward

/* planes [b, e): x (D, H, W) -> y (OD, OH, OW) per plane */
static AMPC_ALWAYS_INLINE void
ampc_interp_fwd_range(const ampc_converters *cv, ampc_interp_ctx *c,
                      int64_t b, int64_t e)
{
    const ampc_interp_axis *ad = &c->s->ax[0], *ah = &c->s->ax[1],
                           *aw = &c->s->ax[2];
    int64_t d = ad->n, h = ah->n, w = aw->n;
    int64_t od = ad->on, oh = ah->on, ow = aw->on;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    /* the last pass that is not a copy writes the output */
    int last = !ad->copy ? 0 : (!ah->copy ? 1 : 2);
    int64_t n1 = d * h * ow, n2 = d * oh * ow;
    /* t1, t2: the W and H passes; in: an input row widened; row: output
     * rows (or slabs) before they are rounded */
    float *t1 = ampc_interp_scratch(c, n1 + n2 + w + oh * ow);
    if (t1 == NULL) {
        return;
    }
    float *t2 = t1 + n1, *in = t2 + n2, *row = in + w;
    for (int64_t p = b; p < e; p++) {
        const char *x = (const char *)c->in + (size_t)(p * d * h * w) * es;
        char *y = (char *)c->out + (size_t)(p * od * oh * ow) * es;
        /* W: every input row; a copy just widens to float32 */
        for (int64_t r = 0; r < d * h; r++) {
            const float *src = ampc_load_block_f32(
                cv, dt, x + (size_t)(r * w) * es, 1, w, in, NULL);
            int final = last == 2;
            char *at = y + (size_t)(r * ow) * es;
            float *dst = ampc_interp_sink(dt, final, at, t1 + r * ow, row);
            if (aw->copy) {
                if (dst != src) {
                    memcpy(dst, src, (size_t)w * sizeof(float));
                }
            }
            else {
                ampc_interp_row(&c->t[2], aw->taps, ow, src, dst);
            }
            ampc_interp_flush(cv, dt, final, dst, ow, at);
        }
        /* H: rows of t1 blended into rows of t2 */
        const float *cur = t1;
        if (!ah->copy) {
            for (int64_t k = 0; k < d; k++) {
                for (int64_t i = 0; i < oh; i++) {
                    int final = last == 1;
                    char *at = y + (size_t)((k * oh + i) * ow) * es;
                    float *dst = ampc_interp_sink(
                        dt, final, at, t2 + (k * oh + i) * ow, row);
                    ampc_interp_blend(
                        c->t[1].w + i * ah->taps, c->t[1].count[i],
                        t1 + (k * h + c->t[1].first[i]) * ow, ow, ow, dst);
                    ampc_interp_flush(cv, dt, final, dst, ow, at);
                }
            }
            cur = t2;
        }
        /* D: slabs (OH, OW) of the previous pass blended into the output */
        if (!ad->copy) {
            int64_t slab = oh * ow;
            for (int64_t k = 0; k < od; k++) {
                char *at = y + (size_t)(k * slab) * es;
                float *dst = ampc_interp_sink(dt, 1, at, NULL, row);
                ampc_interp_blend(c->t[0].w + k * ad->taps,
                                  c->t[0].count[k],
                                  cur + c->t[0].first[k] * slab, slab, slab,
                                  dst);
                ampc_interp_flush(cv, dt, 1, dst, slab, at);
            }
        }
    }
    free(t1);
}

// ----------------------------------------------------------------------------
// backward

/* planes [b, e): grad_out (OD, OH, OW) -> grad_in (D, H, W) per plane:
 * the adjoint passes D, H, W */
static AMPC_ALWAYS_INLINE void
ampc_interp_bwd_range(const ampc_converters *cv, ampc_interp_ctx *c,
                      int64_t b, int64_t e)
{
    const ampc_interp_axis *ad = &c->s->ax[0], *ah = &c->s->ax[1],
                           *aw = &c->s->ax[2];
    int64_t d = ad->n, h = ah->n, w = aw->n;
    int64_t od = ad->on, oh = ah->on, ow = aw->on;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    int64_t slab = oh * ow;
    int64_t n1 = d * slab, n2 = d * h * ow;
    int64_t nrow = w > slab ? w : slab;
    float *u1 = ampc_interp_scratch(c, n1 + n2 + nrow);
    if (u1 == NULL) {
        return;
    }
    float *u2 = u1 + n1, *row = u2 + n2;
    for (int64_t p = b; p < e; p++) {
        const char *g = (const char *)c->in + (size_t)(p * od * slab) * es;
        char *gx = (char *)c->out + (size_t)(p * d * h * w) * es;
        /* D: u1[first + j] += w_j g[k] over the output slabs k, in order;
         * a copy just widens to float32 */
        const float *cur = u1;
        if (ad->copy && dt == AMPC_FLOAT32) {
            cur = (const float *)g;
        }
        else if (ad->copy) {
            ampc_load_block_f32(cv, dt, g, 1, n1, u1, NULL);
        }
        else {
            memset(u1, 0, (size_t)n1 * sizeof(float));
            for (int64_t k = 0; k < od; k++) {
                const float *src = ampc_load_block_f32(
                    cv, dt, g + (size_t)(k * slab) * es, 1, slab, row,
                    NULL);
                const float *wk = c->t[0].w + k * ad->taps;
                float *dst = u1 + c->t[0].first[k] * slab;
                for (int64_t j = 0; j < c->t[0].count[k]; j++) {
                    ampc_interp_axpy(wk[j], src, slab, dst + j * slab);
                }
            }
        }
        /* H: u2 rows += w_j cur rows, over the output rows in order */
        if (!ah->copy) {
            memset(u2, 0, (size_t)n2 * sizeof(float));
            for (int64_t k = 0; k < d; k++) {
                for (int64_t i = 0; i < oh; i++) {
                    const float *wi = c->t[1].w + i * ah->taps;
                    const float *src = cur + (k * oh + i) * ow;
                    float *dst = u2 + (k * h + c->t[1].first[i]) * ow;
                    for (int64_t j = 0; j < c->t[1].count[i]; j++) {
                        ampc_interp_axpy(wi[j], src, ow, dst + j * ow);
                    }
                }
            }
            cur = u2;
        }
        /* W: each input row from its row of cur, over the outputs in
         * order */
        for (int64_t r = 0; r < d * h; r++) {
            char *at = gx + (size_t)(r * w) * es;
            float *dst = ampc_interp_sink(dt, 1, at, NULL, row);
            const float *src = cur + r * ow;
            if (aw->copy) {
                memcpy(dst, src, (size_t)w * sizeof(float));
            }
            else {
                for (int64_t i = 0; i < w; i++) {
                    dst[i] = 0.0f;
                }
                for (int64_t o = 0; o < ow; o++) {
                    const float *wo = c->t[2].w + o * aw->taps;
                    float v = src[o];
                    float *to = dst + c->t[2].first[o];
                    for (int64_t j = 0; j < c->t[2].count[o]; j++) {
                        to[j] += wo[j] * v;
                    }
                }
            }
            ampc_interp_flush(cv, dt, 1, dst, w, at);
        }
    }
    free(u1);
}

// ----------------------------------------------------------------------------
// launch

/* Runs range (a level's wrapper of a body above) over the planes with
 * every axis's table built first; returns an ampc_nn_status. */
static inline int
ampc_interp_launch(ampc_range_fn range, const ampc_interp_shape *s,
                   ampc_dtype dt, const void *in, void *out)
{
    ampc_interp_ctx c = {s, dt, in, out, {{0}}, AMPC_NN_OK};
    int64_t ints = 0, floats = 0, work = 0;
    for (int a = 0; a < AMPC_INTERP_AXES; a++) {
        ints += 2 * s->ax[a].on;
        floats += s->ax[a].on * s->ax[a].taps;
    }
    int64_t *block = malloc((size_t)ints * sizeof(int64_t) +
                            (size_t)floats * sizeof(float));
    if (block == NULL) {
        return AMPC_NN_NO_MEMORY;
    }
    float *wf = (float *)(block + ints);
    int64_t *at = block;
    for (int a = 0; a < AMPC_INTERP_AXES; a++) {
        const ampc_interp_axis *ax = &s->ax[a];
        c.t[a].first = at;
        c.t[a].count = at + ax->on;
        c.t[a].w = wf;
        at += 2 * ax->on;
        wf += ax->on * ax->taps;
        for (int64_t o = 0; o < ax->on; o++) {
            ampc_interp_table_row(ax, s->kind, o, &c.t[a]);
        }
    }
    work = s->ax[0].n * s->ax[1].n * s->ax[2].n +
           s->ax[0].on * s->ax[1].on * s->ax[2].on;
    ampc_parallel_for(s->planes, ampc_nn_grain(4 * work), range, &c);
    free(block);
    return c.status;
}

#endif /* AMPC_CPU_INTERP_LOOPS_H */
