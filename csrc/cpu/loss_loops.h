/* loss_loops.h - the bodies of the loss kernels: nll_loss and the fused
 * cross_entropy (one row per item, on nn_loops.h's softmax row), and
 * mse_loss, forward and backward.  Written once, compiled per level as
 * cpu/nn_loops.h explains.
 */
#ifndef AMPC_CPU_LOSS_LOOPS_H
#define AMPC_CPU_LOSS_LOOPS_H

#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// class-index losses: nll_loss and the fused cross_entropy

typedef struct {
    const ampc_class_loss_shape *s;
    ampc_dtype dt;
    const void *in;             /* logits, log-probabilities */
    const int64_t *target;
    const float *weight;        /* (c) or NULL */
    const float *row_scale;     /* backward */
    double wsum;                /* backward: the sum of the weights */
    void *out;                  /* log-probabilities, gradient */
    double *row_loss, *row_weight;
} ampc_loss_ctx;

static inline float
ampc_class_weight(const float *weight, int64_t k)
{
    return weight != NULL ? weight[k] : 1.0f;
}

/* One row of logits x (c) -> logp (c) and the row's loss and weight:
 * log_softmax as ampc_softmax_row, with the smoothing term's weighted sum of
 * log-probabilities taken in the output pass. */
static AMPC_ALWAYS_INLINE void
ampc_xent_fwd_row(const ampc_converters *cv, const ampc_loss_ctx *c,
                  int64_t row)
{
    const ampc_class_loss_shape *s = c->s;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    int64_t nc = s->c;
    const char *x = (const char *)c->in + row * nc * (int64_t)es;
    char *lp = (char *)c->out + row * nc * (int64_t)es;
    float xb[AMPC_NN_ROW], eb[AMPC_NN_ROW], wb[AMPC_NN_ROW];
    int one = nc <= AMPC_NN_ROW;
    int smooth = s->label_smoothing > 0.0;
    const float *xf = NULL;
    float m = -INFINITY;
    double sum = 0.0, wlp = 0.0;
    int64_t i, n, j;

    for (i = 0; i < nc; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, nc - i);
        xf = ampc_load_block_f32(cv, dt, x + i * (int64_t)es, 1, n, xb, NULL);
        m = ampc_maximum_f32(m, ampc_nn_max_run(xf, n));
    }
    for (i = 0; i < nc; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, nc - i);
        if (!one) {
            xf = ampc_load_block_f32(cv, dt, x + i * (int64_t)es, 1, n, xb,
                                     NULL);
        }
        sum += ampc_exp_sum_f32(xf, n, m, eb);
    }
    float ls = ampc_softmax_log_sum(sum);
    for (i = 0; i < nc; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, nc - i);
        float *o = dt == AMPC_FLOAT32 ? (float *)lp + i : eb;
        if (!one) {
            xf = ampc_load_block_f32(cv, dt, x + i * (int64_t)es, 1, n, xb,
                                     NULL);
        }
        for (j = 0; j < n; j++) {
            o[j] = ampc_log_softmax_one(xf[j], m, ls);
        }
        if (smooth && c->weight != NULL) {
            for (j = 0; j < n; j++) {
                wb[j] = o[j] * c->weight[i + j];
            }
            wlp += ampc_nn_sum_run(wb, n);
        }
        else if (smooth) {
            wlp += ampc_nn_sum_run(o, n);
        }
        ampc_store_block_f32(cv, dt, o, n, lp + i * (int64_t)es, 1, NULL);
    }

    int64_t t = c->target[row];
    if (t == s->ignore_index) {
        c->row_loss[row] = 0.0;
        c->row_weight[row] = 0.0;
        return;
    }
    double w = ampc_class_weight(c->weight, t);
    double lpt = ampc_log_softmax_one(ampc_load_f32(dt, x + t * (int64_t)es),
                                      m, ls);
    c->row_loss[row] = ampc_xent_row_loss(w, lpt, s->label_smoothing, nc,
                                          wlp);
    c->row_weight[row] = w;
}

static AMPC_ALWAYS_INLINE void
ampc_xent_fwd_range(const ampc_converters *cv, const ampc_loss_ctx *c,
                    int64_t b, int64_t e)
{
    for (int64_t row = b; row < e; row++) {
        ampc_xent_fwd_row(cv, c, row);
    }
}

/* One row of the gradient: row_scale * (exp(logp) * A - a_k) with
 * a_k = (1 - ls) w_t [k == t] + ls / C * w_k and A = the sum of a_k (the
 * gradient of -sum_k a_k logp_k through log_softmax); 0 for ignored rows. */
static AMPC_ALWAYS_INLINE void
ampc_xent_bwd_row(const ampc_converters *cv, const ampc_loss_ctx *c,
                  int64_t row)
{
    const ampc_class_loss_shape *s = c->s;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    int64_t nc = s->c;
    const char *lp = (const char *)c->in + row * nc * (int64_t)es;
    char *g = (char *)c->out + row * nc * (int64_t)es;
    float lb[AMPC_NN_ROW], ob[AMPC_NN_ROW];
    int64_t t = c->target[row];
    int64_t i, n, j;

    if (t == s->ignore_index) {
        memset(g, 0, (size_t)nc * es);
        return;
    }
    float wt = ampc_class_weight(c->weight, t);
    float sc = c->row_scale[row];
    ampc_xent_coefs k = ampc_xent_coefs_of(s->label_smoothing, wt, nc,
                                           c->wsum);
    float spread = k.spread, total = k.total;
    for (i = 0; i < nc; i += AMPC_NN_ROW) {
        n = ampc_nn_min(AMPC_NN_ROW, nc - i);
        const float *l = ampc_load_block_f32(cv, dt, lp + i * (int64_t)es, 1,
                                             n, lb, NULL);
        float *o = dt == AMPC_FLOAT32 ? (float *)g + i : ob;
        if (c->weight != NULL) {
            const float *w = c->weight + i;
            for (j = 0; j < n; j++) {
                o[j] = ampc_xent_grad_one(sc, l[j], total, spread * w[j]);
            }
        }
        else {
            for (j = 0; j < n; j++) {
                o[j] = ampc_xent_grad_one(sc, l[j], total, spread);
            }
        }
        if (t >= i && t < i + n) {
            o[t - i] = ampc_xent_grad_one(sc, l[t - i], total,
                                          ampc_xent_target_coef(k, wt));
        }
        ampc_store_block_f32(cv, dt, o, n, g + i * (int64_t)es, 1, NULL);
    }
}

static AMPC_ALWAYS_INLINE void
ampc_xent_bwd_range(const ampc_converters *cv, const ampc_loss_ctx *c,
                    int64_t b, int64_t e)
{
    for (int64_t row = b; row < e; row++) {
        ampc_xent_bwd_row(cv, c, row);
    }
}

static inline void
ampc_xent_fwd_launch(ampc_range_fn range, const ampc_class_loss_shape *s,
                     ampc_dtype dt, const void *logits, const int64_t *target,
                     const float *weight, void *logp, double *row_loss,
                     double *row_weight)
{
    ampc_loss_ctx c = {.s = s, .dt = dt, .in = logits, .target = target,
                       .weight = weight, .out = logp, .row_loss = row_loss,
                       .row_weight = row_weight};
    ampc_parallel_for(s->n, ampc_nn_grain(4 * s->c), range, &c);
}

static inline void
ampc_xent_bwd_launch(ampc_range_fn range, const ampc_class_loss_shape *s,
                     ampc_dtype dt, const void *logp, const int64_t *target,
                     const float *weight, const float *row_scale, void *grad)
{
    ampc_loss_ctx c = {.s = s, .dt = dt, .in = logp, .target = target,
                       .weight = weight, .row_scale = row_scale, .out = grad};
    double wsum = (double)s->c;
    if (weight != NULL) {
        wsum = 0.0;
        for (int64_t k = 0; k < s->c; k++) {
            wsum += weight[k];
        }
    }
    c.wsum = wsum;
    ampc_parallel_for(s->n, ampc_nn_grain(2 * s->c), range, &c);
}

// ----------------------------------------------------------------------------
// mse_loss

typedef struct {
    ampc_dtype dt;
    int64_t n;
    const void *x, *t, *grad;
    float scale;
    void *out;
    double *partial;
} ampc_mse_ctx;

/* items: chunks of AMPC_LOSS_CHUNK elements; each writes (x - t)^2 to out,
 * or its sum to partial[chunk] (float32 lanes per block, blocks in double). */
static AMPC_ALWAYS_INLINE void
ampc_mse_fwd_range(const ampc_converters *cv, const ampc_mse_ctx *c,
                   int64_t b, int64_t e)
{
    size_t es = ampc_dtype_size[c->dt];
    float xb[AMPC_BLOCK], tb[AMPC_BLOCK], db[AMPC_BLOCK];
    for (int64_t chunk = b; chunk < e; chunk++) {
        int64_t i0 = chunk * AMPC_LOSS_CHUNK;
        int64_t i1 = ampc_nn_min(c->n, i0 + AMPC_LOSS_CHUNK);
        double sum = 0.0;
        for (int64_t i = i0; i < i1; i += AMPC_BLOCK) {
            int64_t m = ampc_nn_min(AMPC_BLOCK, i1 - i);
            const float *x = ampc_load_block_f32(
                cv, c->dt, ampc_at(c->x, i, 1, es), 1, m, xb, NULL);
            const float *t = ampc_load_block_f32(
                cv, c->dt, ampc_at(c->t, i, 1, es), 1, m, tb, NULL);
            float *d = (c->out != NULL && c->dt == AMPC_FLOAT32)
                           ? (float *)c->out + i
                           : db;
            for (int64_t j = 0; j < m; j++) {
                d[j] = ampc_mse_one(x[j], t[j]);
            }
            if (c->out != NULL) {
                ampc_store_block_f32(cv, c->dt, d, m,
                                     (char *)c->out + i * (int64_t)es, 1,
                                     NULL);
            }
            else {
                sum += ampc_nn_sum_run(d, m);
            }
        }
        if (c->out == NULL) {
            c->partial[chunk] = sum;
        }
    }
}

/* items: elements; grad_x = (scale * (x - t)) * grad */
static AMPC_ALWAYS_INLINE void
ampc_mse_bwd_range(const ampc_converters *cv, const ampc_mse_ctx *c,
                   int64_t b, int64_t e)
{
    size_t es = ampc_dtype_size[c->dt];
    float xb[AMPC_BLOCK], tb[AMPC_BLOCK], gb[AMPC_BLOCK], ob[AMPC_BLOCK];
    for (int64_t i = b; i < e; i += AMPC_BLOCK) {
        int64_t m = ampc_nn_min(AMPC_BLOCK, e - i);
        const float *x = ampc_load_block_f32(
            cv, c->dt, ampc_at(c->x, i, 1, es), 1, m, xb, NULL);
        const float *t = ampc_load_block_f32(
            cv, c->dt, ampc_at(c->t, i, 1, es), 1, m, tb, NULL);
        float *o = c->dt == AMPC_FLOAT32 ? (float *)c->out + i : ob;
        if (c->grad != NULL) {
            const float *g = ampc_load_block_f32(
                cv, c->dt, ampc_at(c->grad, i, 1, es), 1, m, gb, NULL);
            for (int64_t j = 0; j < m; j++) {
                o[j] = ampc_mse_bwd_one(c->scale, x[j], t[j], g[j]);
            }
        }
        else {
            for (int64_t j = 0; j < m; j++) {
                o[j] = ampc_mse_bwd_one(c->scale, x[j], t[j], 1.0f);
            }
        }
        ampc_store_block_f32(cv, c->dt, o, m, (char *)c->out + i * (int64_t)es,
                             1, NULL);
    }
}

static inline void
ampc_mse_fwd_launch(ampc_range_fn range, ampc_dtype dt, int64_t n,
                    const void *x, const void *t, void *out, double *partial)
{
    ampc_mse_ctx c = {.dt = dt, .n = n, .x = x, .t = t, .out = out,
                      .partial = partial};
    int64_t chunks = (n + AMPC_LOSS_CHUNK - 1) / AMPC_LOSS_CHUNK;
    ampc_parallel_for(chunks, 2, range, &c);
}

static inline void
ampc_mse_bwd_launch(ampc_range_fn range, ampc_dtype dt, int64_t n,
                    const void *x, const void *t, const void *grad,
                    float scale, void *grad_x)
{
    ampc_mse_ctx c = {.dt = dt, .n = n, .x = x, .t = t, .grad = grad,
                      .scale = scale, .out = grad_x};
    ampc_parallel_for(n, AMPC_NN_GRAIN, range, &c);
}

#endif /* AMPC_CPU_LOSS_LOOPS_H */
