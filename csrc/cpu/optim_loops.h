/* optim_loops.h - the bodies of the fused SGD, Adam/AdamW, RMSprop and
 * Adagrad steps, one pass over each parameter, written once and compiled
 * per level as cpu/nn_loops.h explains.
 */
#ifndef AMPC_CPU_OPTIM_LOOPS_H
#define AMPC_CPU_OPTIM_LOOPS_H

#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// fused optimizer steps
//
// One pass: each block of every tensor is widened once, updated in float32
// registers and narrowed once (RNE).  The arithmetic follows torch's
// single-tensor optimizers op by op (torch/optim/sgd.py, adam.py,
// rmsprop.py, adagrad.py; per element in nn_math.h), with
// the scalar constants rounded to float32 as torch's CPU kernels take them.

typedef struct {
    const ampc_sgd_args *sgd;
    const ampc_adam_args *adam;
    const ampc_rmsprop_args *rmsprop;
    const ampc_adagrad_args *adagrad;
    ampc_dtype dt;
    void *param, *grad, *buf, *exp_avg, *exp_avg_sq, *max_exp_avg_sq;
    void *square_avg, *grad_avg, *sum;
    void *kept;                 /* kernels.h ampc_sgd_args.kept */
    ampc_dtype kept_dtype;
} ampc_optim_ctx;

/* The updated float32 parameters pv[0:m] of the block at element i, into
 * the kept cast (when there is one). */
static AMPC_ALWAYS_INLINE void
ampc_optim_store_kept(const ampc_converters *cv, const ampc_optim_ctx *c,
                      const float *pv, int64_t i, int64_t m)
{
    if (c->kept != NULL) {
        char *kp = (char *)c->kept +
                   i * (int64_t)ampc_dtype_size[c->kept_dtype];
        ampc_store_block_f32(cv, c->kept_dtype, pv, m, kp, 1, NULL);
    }
}

/* With a grad_scale (PyTorch's fused-optimizer contract), the block's
 * gradients are unscaled, g * inv_scale, and written back to the grad
 * tensor, as torch's fused kernels do; returns the unscaled values.  gv is
 * the loaded block, gb its buffer, gp the block in the tensor. */
static AMPC_ALWAYS_INLINE const float *
ampc_optim_unscale_block(const ampc_converters *cv, ampc_dtype dt,
                         float inv_scale, const float *gv, float *gb,
                         int64_t m, char *gp)
{
    float *u = dt == AMPC_FLOAT32 ? (float *)gp : gb;
    for (int64_t j = 0; j < m; j++) {
        u[j] = ampc_optim_unscale(gv[j], inv_scale);
    }
    ampc_store_block_f32(cv, dt, u, m, gp, 1, NULL);
    return u;
}

/* param -= lr * d, where d is grad (negated when maximizing), plus
 * weight_decay * param, then through the momentum buffer:
 *   buf = first step ? d : momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf */
static AMPC_ALWAYS_INLINE void
ampc_sgd_range(const ampc_converters *cv, const ampc_optim_ctx *c, int64_t b,
               int64_t e)
{
    const ampc_sgd_args *a = c->sgd;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    float pb[AMPC_BLOCK], gb[AMPC_BLOCK], bb[AMPC_BLOCK];
    float sign = a->maximize ? -1.0f : 1.0f;
    float neg_lr = -a->lr;
    float inv_scale = ampc_optim_inv_scale(a->grad_scale);
    for (int64_t i = b; i < e; i += AMPC_BLOCK) {
        int64_t m = ampc_nn_min(AMPC_BLOCK, e - i);
        char *pp = (char *)c->param + i * (int64_t)es;
        const float *pv = ampc_load_block_f32(cv, dt, pp, 1, m, pb, NULL);
        char *gp = (char *)c->grad + i * (int64_t)es;
        const float *gv = ampc_load_block_f32(cv, dt, gp, 1, m, gb, NULL);
        if (a->grad_scale != NULL) {
            gv = ampc_optim_unscale_block(cv, dt, inv_scale, gv, gb, m, gp);
        }
        /* d lives in gb; a float32 grad is read in place (written only by
         * the unscale above) */
        float *d = gb;
        for (int64_t j = 0; j < m; j++) {
            d[j] = ampc_optim_grad(gv[j], sign);
        }
        if (a->weight_decay != 0.0f) {
            for (int64_t j = 0; j < m; j++) {
                d[j] = ampc_optim_l2(d[j], a->weight_decay, pv[j]);
            }
        }
        if (c->buf != NULL) {
            char *bp = (char *)c->buf + i * (int64_t)es;
            float *bv = dt == AMPC_FLOAT32 ? (float *)bp : bb;
            if (a->first_step) {
                memcpy(bv, d, (size_t)m * sizeof(float));
            }
            else {
                if (dt != AMPC_FLOAT32) {
                    ampc_load_block_f32(cv, dt, bp, 1, m, bb, NULL);
                }
                for (int64_t j = 0; j < m; j++) {
                    bv[j] = ampc_sgd_momentum(bv[j], d[j], a->momentum,
                                              a->one_minus_dampening);
                }
            }
            if (a->nesterov) {
                for (int64_t j = 0; j < m; j++) {
                    d[j] = ampc_sgd_nesterov(d[j], a->momentum, bv[j]);
                }
            }
            else {
                memcpy(d, bv, (size_t)m * sizeof(float));
            }
            ampc_store_block_f32(cv, dt, bv, m, bp, 1, NULL);
        }
        float *po = dt == AMPC_FLOAT32 ? (float *)pp : pb;
        for (int64_t j = 0; j < m; j++) {
            po[j] = ampc_sgd_param(pv[j], neg_lr, d[j]);
        }
        ampc_store_block_f32(cv, dt, po, m, pp, 1, NULL);
        ampc_optim_store_kept(cv, c, po, i, m);
    }
}

/* y[0:n] = sqrt(x[0:n]) with the level's vector instruction: a loop of
 * sqrtf is not vectorised, as sqrtf must set errno for a negative input.
 * IEEE square roots are exact, so every level gives the same bits. */
typedef void (*ampc_sqrt_block_fn)(int64_t n, const float *x, float *y);

/* torch's Adam/AdamW step, per element (d = grad, negated when maximizing):
 *   decoupled: param *= 1 - lr * weight_decay;  else d += weight_decay * param
 *   exp_avg = lerp(exp_avg, d, 1 - beta1)
 *   exp_avg_sq = exp_avg_sq * beta2 + ((1 - beta2) * d) * d
 *   amsgrad: max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)
 *   denom = sqrt(v) / sqrt(1 - beta2^step) + eps     (v: the line above)
 *   param += (-lr / (1 - beta1^step) * exp_avg) / denom */
static AMPC_ALWAYS_INLINE void
ampc_adam_range(const ampc_converters *cv, ampc_sqrt_block_fn sqrt_block,
                const ampc_optim_ctx *c, int64_t b, int64_t e)
{
    const ampc_adam_args *a = c->adam;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    float pb[AMPC_BLOCK], gb[AMPC_BLOCK], mb[AMPC_BLOCK], vb[AMPC_BLOCK];
    float xb[AMPC_BLOCK], ab[AMPC_BLOCK];
    float sign = a->maximize ? -1.0f : 1.0f;
    float inv_scale = ampc_optim_inv_scale(a->grad_scale);
    /* torch's lerp (nn_math.h ampc_adam_lerp) */
    int small = fabsf(a->one_minus_beta1) < 0.5f;
    float w = a->one_minus_beta1, wc = 1.0f - a->one_minus_beta1;
    for (int64_t i = b; i < e; i += AMPC_BLOCK) {
        int64_t m = ampc_nn_min(AMPC_BLOCK, e - i);
        int64_t off = i * (int64_t)es;
        char *pp = (char *)c->param + off;
        char *mp = (char *)c->exp_avg + off;
        char *vp = (char *)c->exp_avg_sq + off;
        float *pv = (float *)ampc_load_block_f32(cv, dt, pp, 1, m, pb, NULL);
        char *gp = (char *)c->grad + off;
        const float *gv = ampc_load_block_f32(cv, dt, gp, 1, m, gb, NULL);
        if (a->grad_scale != NULL) {
            gv = ampc_optim_unscale_block(cv, dt, inv_scale, gv, gb, m, gp);
        }
        float *mv = (float *)ampc_load_block_f32(cv, dt, mp, 1, m, mb, NULL);
        float *vv = (float *)ampc_load_block_f32(cv, dt, vp, 1, m, vb, NULL);
        float *d = xb;
        int64_t j;
        /* NOTE: pv, mv and vv point into float32 tensors themselves, so the
         * updates below are the stores; other dtypes are narrowed after. */
        for (j = 0; j < m; j++) {
            d[j] = ampc_optim_grad(gv[j], sign);
        }
        if (a->weight_decay != 0.0f && a->decoupled) {
            for (j = 0; j < m; j++) {
                pv[j] = pv[j] * a->decay;
            }
        }
        else if (a->weight_decay != 0.0f) {
            for (j = 0; j < m; j++) {
                d[j] = ampc_optim_l2(d[j], a->weight_decay, pv[j]);
            }
        }
        /* two loops, so that each has no select inside */
        if (small) {
            for (j = 0; j < m; j++) {
                mv[j] = ampc_adam_lerp(mv[j], d[j], w, wc, 1);
            }
        }
        else {
            for (j = 0; j < m; j++) {
                mv[j] = ampc_adam_lerp(mv[j], d[j], w, wc, 0);
            }
        }
        for (j = 0; j < m; j++) {
            vv[j] = ampc_adam_sq(vv[j], d[j], a->beta2, a->one_minus_beta2);
        }
        const float *den = vv;
        if (c->max_exp_avg_sq != NULL) {
            char *xp = (char *)c->max_exp_avg_sq + off;
            float *xv = (float *)ampc_load_block_f32(cv, dt, xp, 1, m, ab,
                                                     NULL);
            for (j = 0; j < m; j++) {
                xv[j] = ampc_nn_max(xv[j], vv[j]);
            }
            ampc_store_block_f32(cv, dt, xv, m, xp, 1, NULL);
            den = xv;
        }
        /* d is spent: it takes the square roots */
        sqrt_block(m, den, d);
        for (j = 0; j < m; j++) {
            pv[j] = ampc_adam_param(pv[j], mv[j], d[j], a->neg_step_size,
                                    a->bias_correction2_sqrt, a->eps);
        }
        ampc_store_block_f32(cv, dt, mv, m, mp, 1, NULL);
        ampc_store_block_f32(cv, dt, vv, m, vp, 1, NULL);
        ampc_store_block_f32(cv, dt, pv, m, pp, 1, NULL);
        ampc_optim_store_kept(cv, c, pv, i, m);
    }
}

/* torch's RMSprop step (kernels_optim.h ampc_rmsprop_args), in the stages
 * of nn_math.h ampc_rmsprop_one; the momentum buffer is c->buf. */
static AMPC_ALWAYS_INLINE void
ampc_rmsprop_range(const ampc_converters *cv, ampc_sqrt_block_fn sqrt_block,
                   const ampc_optim_ctx *c, int64_t b, int64_t e)
{
    const ampc_rmsprop_args *a = c->rmsprop;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    float pb[AMPC_BLOCK], gb[AMPC_BLOCK], vb[AMPC_BLOCK], mb[AMPC_BLOCK];
    float bb[AMPC_BLOCK], xb[AMPC_BLOCK];
    float sign = a->maximize ? -1.0f : 1.0f;
    float inv_scale = ampc_optim_inv_scale(a->grad_scale);
    /* torch's lerp (nn_math.h ampc_adam_lerp) with weight 1 - alpha */
    int small = fabsf(a->one_minus_alpha) < 0.5f;
    float w = a->one_minus_alpha, wc = 1.0f - a->one_minus_alpha;
    for (int64_t i = b; i < e; i += AMPC_BLOCK) {
        int64_t m = ampc_nn_min(AMPC_BLOCK, e - i);
        int64_t off = i * (int64_t)es;
        char *pp = (char *)c->param + off;
        char *vp = (char *)c->square_avg + off;
        float *pv = (float *)ampc_load_block_f32(cv, dt, pp, 1, m, pb, NULL);
        char *gp = (char *)c->grad + off;
        const float *gv = ampc_load_block_f32(cv, dt, gp, 1, m, gb, NULL);
        if (a->grad_scale != NULL) {
            gv = ampc_optim_unscale_block(cv, dt, inv_scale, gv, gb, m, gp);
        }
        float *vv = (float *)ampc_load_block_f32(cv, dt, vp, 1, m, vb, NULL);
        /* as in the Adam loop, float32 state is updated where it is
         * stored; d lives in gb, the denominator in xb */
        float *d = gb;
        int64_t j;
        for (j = 0; j < m; j++) {
            d[j] = ampc_optim_grad(gv[j], sign);
        }
        if (a->weight_decay != 0.0f) {
            for (j = 0; j < m; j++) {
                d[j] = ampc_optim_l2(d[j], a->weight_decay, pv[j]);
            }
        }
        for (j = 0; j < m; j++) {
            vv[j] = ampc_adam_sq(vv[j], d[j], a->alpha, a->one_minus_alpha);
        }
        const float *radicand = vv;
        if (c->grad_avg != NULL) {
            char *mp = (char *)c->grad_avg + off;
            float *mv = (float *)ampc_load_block_f32(cv, dt, mp, 1, m, mb,
                                                     NULL);
            /* two loops, so that each has no select inside */
            if (small) {
                for (j = 0; j < m; j++) {
                    mv[j] = ampc_adam_lerp(mv[j], d[j], w, wc, 1);
                }
            }
            else {
                for (j = 0; j < m; j++) {
                    mv[j] = ampc_adam_lerp(mv[j], d[j], w, wc, 0);
                }
            }
            for (j = 0; j < m; j++) {
                xb[j] = ampc_rmsprop_centered(vv[j], mv[j]);
            }
            ampc_store_block_f32(cv, dt, mv, m, mp, 1, NULL);
            radicand = xb;
        }
        sqrt_block(m, radicand, xb);
        for (j = 0; j < m; j++) {
            xb[j] = ampc_optim_den(xb[j], a->eps);
        }
        if (c->buf != NULL) {
            char *bp = (char *)c->buf + off;
            float *bv = (float *)ampc_load_block_f32(cv, dt, bp, 1, m, bb,
                                                     NULL);
            for (j = 0; j < m; j++) {
                bv[j] = ampc_rmsprop_buf(bv[j], a->momentum, d[j], xb[j]);
                pv[j] = ampc_sgd_param(pv[j], a->neg_lr, bv[j]);
            }
            ampc_store_block_f32(cv, dt, bv, m, bp, 1, NULL);
        }
        else {
            for (j = 0; j < m; j++) {
                pv[j] = ampc_optim_addcdiv(pv[j], a->neg_lr, d[j], xb[j]);
            }
        }
        ampc_store_block_f32(cv, dt, vv, m, vp, 1, NULL);
        ampc_store_block_f32(cv, dt, pv, m, pp, 1, NULL);
        ampc_optim_store_kept(cv, c, pv, i, m);
    }
}

/* torch's Adagrad step (kernels_optim.h ampc_adagrad_args), in the stages
 * of nn_math.h ampc_adagrad_one. */
static AMPC_ALWAYS_INLINE void
ampc_adagrad_range(const ampc_converters *cv, ampc_sqrt_block_fn sqrt_block,
                   const ampc_optim_ctx *c, int64_t b, int64_t e)
{
    const ampc_adagrad_args *a = c->adagrad;
    ampc_dtype dt = c->dt;
    size_t es = ampc_dtype_size[dt];
    float pb[AMPC_BLOCK], gb[AMPC_BLOCK], sb[AMPC_BLOCK], xb[AMPC_BLOCK];
    float sign = a->maximize ? -1.0f : 1.0f;
    float inv_scale = ampc_optim_inv_scale(a->grad_scale);
    for (int64_t i = b; i < e; i += AMPC_BLOCK) {
        int64_t m = ampc_nn_min(AMPC_BLOCK, e - i);
        int64_t off = i * (int64_t)es;
        char *pp = (char *)c->param + off;
        char *sp = (char *)c->sum + off;
        float *pv = (float *)ampc_load_block_f32(cv, dt, pp, 1, m, pb, NULL);
        char *gp = (char *)c->grad + off;
        const float *gv = ampc_load_block_f32(cv, dt, gp, 1, m, gb, NULL);
        if (a->grad_scale != NULL) {
            gv = ampc_optim_unscale_block(cv, dt, inv_scale, gv, gb, m, gp);
        }
        float *sv = (float *)ampc_load_block_f32(cv, dt, sp, 1, m, sb, NULL);
        float *d = gb;
        int64_t j;
        for (j = 0; j < m; j++) {
            d[j] = ampc_optim_grad(gv[j], sign);
        }
        if (a->weight_decay != 0.0f) {
            for (j = 0; j < m; j++) {
                d[j] = ampc_optim_l2(d[j], a->weight_decay, pv[j]);
            }
        }
        for (j = 0; j < m; j++) {
            sv[j] = ampc_adagrad_sum(sv[j], d[j]);
        }
        sqrt_block(m, sv, xb);
        for (j = 0; j < m; j++) {
            pv[j] = ampc_optim_addcdiv(pv[j], a->neg_clr, d[j],
                                       ampc_optim_den(xb[j], a->eps));
        }
        ampc_store_block_f32(cv, dt, sv, m, sp, 1, NULL);
        ampc_store_block_f32(cv, dt, pv, m, pp, 1, NULL);
        ampc_optim_store_kept(cv, c, pv, i, m);
    }
}

/* With a->found_inf (a host pointer here) nonzero, nothing is written. */
static inline void
ampc_sgd_launch(ampc_range_fn range, const ampc_sgd_args *a, ampc_dtype dt,
                int64_t n, void *param, void *grad, void *buf)
{
    if (ampc_optim_skip(a->found_inf)) {
        return;
    }
    ampc_optim_ctx c = {.sgd = a, .dt = dt, .param = param, .grad = grad,
                        .buf = buf, .kept = a->kept,
                        .kept_dtype = a->kept_dtype};
    ampc_parallel_for(n, AMPC_NN_GRAIN, range, &c);
}

/* With a->found_inf nonzero, nothing is written (a->step included); with
 * a->step, the step counter is advanced and the bias corrections are taken
 * from it (host pointers here). */
static inline void
ampc_adam_launch(ampc_range_fn range, const ampc_adam_args *a, ampc_dtype dt,
                 int64_t n, void *param, void *grad, void *exp_avg,
                 void *exp_avg_sq, void *max_exp_avg_sq)
{
    if (ampc_optim_skip(a->found_inf)) {
        return;
    }
    ampc_adam_args stepped = *a;
    if (a->step != NULL) {
        *a->step += 1.0f;
        ampc_adam_bias_corrections(a->lr, a->beta1, a->beta2_f64, *a->step,
                                   &stepped.neg_step_size,
                                   &stepped.bias_correction2_sqrt);
    }
    ampc_optim_ctx c = {.adam = &stepped, .dt = dt, .param = param,
                        .grad = grad, .exp_avg = exp_avg,
                        .exp_avg_sq = exp_avg_sq,
                        .max_exp_avg_sq = max_exp_avg_sq,
                        .kept = a->kept, .kept_dtype = a->kept_dtype};
    ampc_parallel_for(n, AMPC_NN_GRAIN, range, &c);
}

/* With a->found_inf nonzero, nothing is written (a->step included); with
 * a->step, the step counter is advanced (host pointers here). */
static inline void
ampc_rmsprop_launch(ampc_range_fn range, const ampc_rmsprop_args *a,
                    ampc_dtype dt, int64_t n, void *param, void *grad,
                    void *square_avg, void *momentum_buffer, void *grad_avg)
{
    if (ampc_optim_skip(a->found_inf)) {
        return;
    }
    if (a->step != NULL) {
        *a->step += 1.0f;
    }
    ampc_optim_ctx c = {.rmsprop = a, .dt = dt, .param = param,
                        .grad = grad, .square_avg = square_avg,
                        .buf = momentum_buffer, .grad_avg = grad_avg,
                        .kept = a->kept, .kept_dtype = a->kept_dtype};
    ampc_parallel_for(n, AMPC_NN_GRAIN, range, &c);
}

/* As ampc_rmsprop_launch; with a->step, -clr is formed from the advanced
 * counter. */
static inline void
ampc_adagrad_launch(ampc_range_fn range, const ampc_adagrad_args *a,
                    ampc_dtype dt, int64_t n, void *param, void *grad,
                    void *sum)
{
    if (ampc_optim_skip(a->found_inf)) {
        return;
    }
    ampc_adagrad_args stepped = *a;
    if (a->step != NULL) {
        *a->step += 1.0f;
        stepped.neg_clr = ampc_adagrad_neg_clr(a->lr, a->lr_decay,
                                               (double)*a->step);
    }
    ampc_optim_ctx c = {.adagrad = &stepped, .dt = dt, .param = param,
                        .grad = grad, .sum = sum, .kept = a->kept,
                        .kept_dtype = a->kept_dtype};
    ampc_parallel_for(n, AMPC_NN_GRAIN, range, &c);
}

#endif /* AMPC_CPU_OPTIM_LOOPS_H */
