/* loss.c - nll_loss (portable only: it touches one element per row),
 * the fused cross_entropy (log_softmax and the loss in one pass per row) and
 * mse_loss, forward and backward: the bodies of cpu/loss_loops.h compiled for
 * the baseline ISA.
 */
#include "cpu/loss_loops.h"

// ----------------------------------------------------------------------------
// CPU reference

/* logp (N, C) -> row_loss (N), row_weight (N) */
void
ampc_nll_loss_fwd_ref(const ampc_class_loss_shape *s, ampc_dtype dt,
                      const void *logp, const int64_t *target,
                      const float *weight, double *row_loss,
                      double *row_weight)
{
    size_t es = ampc_dtype_size[dt];
    for (int64_t i = 0; i < s->n; i++) {
        int64_t t = target[i];
        if (t == s->ignore_index) {
            row_loss[i] = 0.0;
            row_weight[i] = 0.0;
            continue;
        }
        double w = ampc_class_weight(weight, t);
        const char *p = (const char *)logp + (i * s->c + t) * (int64_t)es;
        row_loss[i] = -w * ampc_load_f32(dt, p);
        row_weight[i] = w;
    }
}

typedef struct {
    const ampc_class_loss_shape *s;
    ampc_dtype dt;
    const int64_t *target;
    const float *weight;
    const float *row_scale;
    void *grad;
} nll_bwd_ctx;

static void
nll_bwd_range(void *ctx, int64_t b, int64_t e)
{
    const nll_bwd_ctx *c = ctx;
    const ampc_class_loss_shape *s = c->s;
    size_t es = ampc_dtype_size[c->dt];
    char *g = (char *)c->grad + b * s->c * (int64_t)es;
    memset(g, 0, (size_t)((e - b) * s->c) * es);
    for (int64_t i = b; i < e; i++) {
        int64_t t = c->target[i];
        if (t != s->ignore_index) {
            double v = -(double)c->row_scale[i] *
                       ampc_class_weight(c->weight, t);
            ampc_store_f64(c->dt,
                           (char *)c->grad + (i * s->c + t) * (int64_t)es,
                           v);
        }
    }
}

/* -> grad (N, C) */
void
ampc_nll_loss_bwd_ref(const ampc_class_loss_shape *s, ampc_dtype dt,
                      const int64_t *target, const float *weight,
                      const float *row_scale, void *grad)
{
    nll_bwd_ctx c = {s, dt, target, weight, row_scale, grad};
    ampc_parallel_for(s->n, ampc_nn_grain(s->c), nll_bwd_range, &c);
}

static void
xent_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_xent_fwd_range(&ampc_cvt_ref, ctx, b, e);
}

static void
xent_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_xent_bwd_range(&ampc_cvt_ref, ctx, b, e);
}

/* logits (N, C) -> logp (N, C), row_loss (N), row_weight (N) */
void
ampc_cross_entropy_fwd_ref(const ampc_class_loss_shape *s, ampc_dtype dt,
                           const void *logits, const int64_t *target,
                           const float *weight, void *logp, double *row_loss,
                           double *row_weight)
{
    ampc_xent_fwd_launch(xent_fwd_range, s, dt, logits, target, weight, logp,
                         row_loss, row_weight);
}

/* logp (N, C) -> grad (N, C) */
void
ampc_cross_entropy_bwd_ref(const ampc_class_loss_shape *s, ampc_dtype dt,
                           const void *logp, const int64_t *target,
                           const float *weight, const float *row_scale,
                           void *grad)
{
    ampc_xent_bwd_launch(xent_bwd_range, s, dt, logp, target, weight,
                         row_scale, grad);
}

static void
mse_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_mse_fwd_range(&ampc_cvt_ref, ctx, b, e);
}

static void
mse_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_mse_bwd_range(&ampc_cvt_ref, ctx, b, e);
}

/* x, t (n) -> out (n) or partial (ceil(n / AMPC_LOSS_CHUNK)) */
void
ampc_mse_loss_fwd_ref(ampc_dtype dt, int64_t n, const void *x, const void *t,
                      void *out, double *partial)
{
    ampc_mse_fwd_launch(mse_fwd_range, dt, n, x, t, out, partial);
}

/* x, t, grad (n) -> grad_x (n) */
void
ampc_mse_loss_bwd_ref(ampc_dtype dt, int64_t n, const void *x, const void *t,
                      const void *grad, float scale, void *grad_x)
{
    ampc_mse_bwd_launch(mse_bwd_range, dt, n, x, t, grad, scale, grad_x);
}
