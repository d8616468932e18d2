/* nn_math.h - the per-element math of the NN kernels and of the fused
 * optimizer steps, shared by the CPU loops (csrc/cpu/nn_loops.h) and the
 * CUDA kernels (cuda/relu.cu, pool.cu, softmax.cu, loss.cu, dropout.cu,
 * optim.cu): the relu backward rule, the max-pool window rule, exp, the
 * softmax and loss terms, and the SGD, Adam, RMSprop and Adagrad updates.
 * Static inline in C, __host__ __device__ in nvcc (amp_math.h's
 * AMPC_HOST_DEVICE), so the CPU tests cover the exact code the GPU runs.
 *
 * NOTE: nvcc contracts a * b + c into one FMA by default, gcc in -std=c11
 * does not.  Products that feed a sum go through AMPC_MUL / AMPC_ADD /
 * AMPC_SUB (__fmul_rn, __fadd_rn, __fsub_rn on the device, which nvcc never
 * contracts), so both sides round every operation the same way.
 */
#ifndef AMPC_NN_MATH_H
#define AMPC_NN_MATH_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "kernels.h"

#if defined(__CUDA_ARCH__)
/* __fmaf_rn's instruction written as inline PTX, so that the fmas the
 * source asks for stand apart in the PTX from any nvcc fused or libdevice
 * brought (tests/test_cuda_build.py counts the others). */
__device__ __forceinline__ float
ampc_fma_rn(float a, float b, float c)
{
    float d;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
    return d;
}

#define AMPC_MUL(a, b) __fmul_rn((a), (b))
#define AMPC_ADD(a, b) __fadd_rn((a), (b))
#define AMPC_SUB(a, b) __fsub_rn((a), (b))
#define AMPC_DMUL(a, b) __dmul_rn((a), (b))
#define AMPC_DADD(a, b) __dadd_rn((a), (b))
#define AMPC_FMA(a, b, c) ampc_fma_rn((a), (b), (c))
#else
#define AMPC_MUL(a, b) ((a) * (b))
#define AMPC_ADD(a, b) ((a) + (b))
#define AMPC_SUB(a, b) ((a) - (b))
#define AMPC_DMUL(a, b) ((a) * (b))
#define AMPC_DADD(a, b) ((a) + (b))
#define AMPC_FMA(a, b, c) fmaf((a), (b), (c))
#endif /* __CUDA_ARCH__ */

// ----------------------------------------------------------------------------
// comparisons

/* a if take, else b, without a branch. */
AMPC_HOST_DEVICE float
ampc_select_f32(int take, float a, float b)
{
    uint32_t m = 0u - (uint32_t)(take != 0);
    return ampc_f32_from_bits((ampc_f32_bits(a) & m) |
                              (ampc_f32_bits(b) & ~m));
}


/* maximum(a, b), NaN when either is, with both tests always evaluated so
 * that CPU loops over it vectorise. */
AMPC_HOST_DEVICE float
ampc_nn_max(float a, float b)
{
    int take = (b > a) | (b != b);
    return take ? b : a;
}

/* The max-pool window rule (torch's CPU and CUDA kernels): scanning the
 * window row by row from -inf, element v replaces the best so far when it is
 * greater or NaN, so a NaN wins and a tie keeps the first max. */
AMPC_HOST_DEVICE int
ampc_pool_takes(float v, float best)
{
    return (v > best) | (v != v);
}

/* First position >= `start` of the sequence start + k * step that is >= 0:
 * torch's `while (i0 < 0) i0 += dilation`. */
AMPC_HOST_DEVICE int64_t
ampc_pool_first(int64_t start, int64_t step)
{
    return start >= 0 ? start : start + ((-start + step - 1) / step) * step;
}

/* The index max_pool2d stores with a folded ReLU (kernels.h
 * ampc_pool2d_shape.relu_masked): -1 - idx when the window's max v is <= 0
 * (relu's backward passes nothing there; a NaN is not <= 0), else idx. */
AMPC_HOST_DEVICE int64_t
ampc_pool_masked_index(int64_t idx, float v, int relu_masked)
{
    return (relu_masked & (v <= 0.0f)) ? -1 - idx : idx;
}

/* Whether `at`, outside [0, hw), is such a masked index (the backward adds
 * nothing for it) rather than a bad one. */
AMPC_HOST_DEVICE int
ampc_pool_masked_ok(int64_t at, int64_t hw, int relu_masked)
{
    return relu_masked && at < 0 && -1 - at < hw;
}

// ----------------------------------------------------------------------------
// relu backward, on the bits

/* grad_in for one float32 element: out <= 0 when it is a zero or has its
 * sign set, and is not a NaN (a NaN passes the gradient, as in torch's
 * threshold_backward); the gradient is then masked off (+0).  Bit masks, not
 * a ?: select, which gcc would not vectorise. */
AMPC_HOST_DEVICE uint32_t
ampc_relu_bwd_bits32(uint32_t g, uint32_t o)
{
    uint32_t a = o & 0x7fffffffu;
    uint32_t nonpos = ((o >> 31) | (uint32_t)(a == 0)) &
                      (uint32_t)(a <= 0x7f800000u);
    return g & (nonpos - 1u);
}

/* The same for float16 (inf 0x7c00) and bfloat16 (inf 0x7f80). */
AMPC_HOST_DEVICE uint16_t
ampc_relu_bwd_bits16(uint16_t g, uint16_t o, uint16_t inf)
{
    uint16_t a = o & 0x7fffu;
    uint16_t nonpos = (uint16_t)(((o >> 15) | (a == 0)) & (a <= inf));
    return g & (uint16_t)(nonpos - 1u);
}

// ----------------------------------------------------------------------------
// exp

/* e^(xc - d) = p * 2^n for a clamped xc and a small d (|d| < 2, often a
 * literal 0 that the compiler drops): n = round((xc - d) / ln 2) (adding 1.5
 * * 2^23 leaves it in the low bits), r = xc - n ln 2 - d with ln 2 in two
 * parts (Cody-Waite: xc - n ln2_hi is exact), so d never rounds against a
 * large xc, and p = e^r by a degree-7 polynomial; returns p, writes n. */
AMPC_HOST_DEVICE float
ampc_exp_reduced(float xc, float d, int32_t *n)
{
    float t = AMPC_FMA(AMPC_SUB(xc, d), 1.44269504088896341f, 12582912.0f);
    *n = (int32_t)(ampc_f32_bits(t) - 0x4b400000u);
    float nf = t - 12582912.0f;
    float r = AMPC_FMA(nf, -0.693359375f, xc);
    r = AMPC_SUB(AMPC_FMA(nf, 2.12194440e-4f, r), d);
    float p = 1.9875691500e-4f;
    p = AMPC_FMA(p, r, 1.3981999507e-3f);
    p = AMPC_FMA(p, r, 8.3334519073e-3f);
    p = AMPC_FMA(p, r, 4.1665795894e-2f);
    p = AMPC_FMA(p, r, 1.6666665459e-1f);
    p = AMPC_FMA(p, r, 5.0000001201e-1f);
    return AMPC_ADD(AMPC_FMA(AMPC_MUL(p, r), r, r), 1.0f);
}

/* e^(x - d) in float32 without branches, so that loops over it vectorise:
 * ampc_exp_reduced's p * 2^n, with 2^n applied as two powers of two, so
 * that results down to the subnormals (n >= -150) and up to FLT_MAX (n =
 * 128) are right (Cephes' expf polynomial, under 2 ulp).  x below -104
 * gives 0, above ln(FLT_MAX) inf, whatever d; NaN stays NaN.  A d carries
 * what a rounded x - d would lose: x = -z^2 exactly and d its low part.
 * NOTE: the clamp and the out-of-range results are bit masks, not ?:
 * selects: gcc turns those into branches here, sinks the float ops that feed
 * them into the branches, and then cannot vectorise the loop (a conditional
 * float op may trap). */
AMPC_HOST_DEVICE float
ampc_exp_minus_f32(float x, float d)
{
    const float lo = -104.0f, hi = 88.72283935546875f;
    uint32_t below = 0u - (uint32_t)(x < lo);
    uint32_t above = 0u - (uint32_t)(x > hi);
    float xc = ampc_f32_from_bits((ampc_f32_bits(x) & ~(below | above)) |
                                  (ampc_f32_bits(lo) & below) |
                                  (ampc_f32_bits(hi) & above));
    int32_t n;
    float p = ampc_exp_reduced(xc, d, &n);
    /* p > 0, so a scale of 0 gives 0 and one of inf gives inf */
    int32_t n1 = n >> 1;
    int32_t n2 = n - n1;
    float s1 = ampc_f32_from_bits(((uint32_t)(n1 + 127) << 23) & ~below);
    float s2 = ampc_f32_from_bits((((uint32_t)(n2 + 127) << 23) & ~above) |
                                  (0x7f800000u & above));
    return p * s1 * s2;
}

/* e^x, as above. */
AMPC_HOST_DEVICE float
ampc_exp_f32(float x)
{
    return ampc_exp_minus_f32(x, 0.0f);
}

/* e^(x - d) for x - d <= 0 (a logit minus its row's max, -x^2 / 2), the
 * hot case: ampc_exp_minus_f32 with one power of two and no upper clamp,
 * about 1.4 times faster.  Results below FLT_MIN (x - d < -87.34) flush to
 * 0, which no probability rounded to a float dtype misses; NaN stays NaN.
 * NOTE: not for x - d > 0 (above 88.37 the power of two overflows). */
AMPC_HOST_DEVICE float
ampc_exp_nonpos_minus_f32(float x, float d)
{
    const float lo = -87.3365447505531f;
    uint32_t below = 0u - (uint32_t)(AMPC_SUB(x, d) < lo);
    float xc = ampc_f32_from_bits((ampc_f32_bits(x) & ~below) |
                                  (ampc_f32_bits(lo) & below));
    float dc = ampc_f32_from_bits(ampc_f32_bits(d) & ~below);
    int32_t n;
    float p = ampc_exp_reduced(xc, dc, &n);
    return p * ampc_f32_from_bits(((uint32_t)(n + 127) << 23) & ~below);
}

/* e^x for x <= 0, as above. */
AMPC_HOST_DEVICE float
ampc_exp_nonpos_f32(float x)
{
    return ampc_exp_nonpos_minus_f32(x, 0.0f);
}

// ----------------------------------------------------------------------------
// softmax and log_softmax

/* The per-row constants from the row's sum of exp(x - max): log(sum) for
 * log_softmax and 1 / sum for softmax, in double, rounded once. */
AMPC_HOST_DEVICE float
ampc_softmax_log_sum(double sum)
{
    return (float)log(sum);
}

AMPC_HOST_DEVICE float
ampc_softmax_inv_sum(double sum)
{
    return (float)(1.0 / sum);
}

/* log_softmax: (x - max) - log(sum), as torch (x - max is exact for nearby
 * values, which keeps huge logits accurate). */
AMPC_HOST_DEVICE float
ampc_log_softmax_one(float x, float m, float ls)
{
    return (x - m) - ls;
}

/* softmax: exp(x - max) / sum, as a product with 1 / sum. */
AMPC_HOST_DEVICE float
ampc_softmax_one(float x, float m, float inv)
{
    return ampc_exp_nonpos_f32(x - m) * inv;
}

/* Backward, d the row's sum: softmax y * (gy - sum(gy * y)); log_softmax
 * gy - exp(y) * sum(gy). */
AMPC_HOST_DEVICE float
ampc_softmax_bwd_one(float y, float g, float d)
{
    return y * (g - d);
}

AMPC_HOST_DEVICE float
ampc_log_softmax_bwd_one(float y, float g, float d)
{
    return AMPC_SUB(g, AMPC_MUL(ampc_exp_f32(y), d));
}

// ----------------------------------------------------------------------------
// losses

/* nll_loss of one row: -w[t] * logp[t] (double). */
AMPC_HOST_DEVICE double
ampc_nll_row_loss(double w, float lpt)
{
    return -w * (double)lpt;
}

/* nll_loss's gradient at the target: -row_scale * w[t], in double, rounded
 * once at store. */
AMPC_HOST_DEVICE double
ampc_nll_grad(float row_scale, float w)
{
    return -(double)row_scale * (double)w;
}

/* cross_entropy of one row with label smoothing eps over C classes:
 * (1 - eps) * w[t] * -logp[t] + eps / C * -sum_k w[k] logp[k] (wlp). */
AMPC_HOST_DEVICE double
ampc_xent_row_loss(double w, double lpt, double eps, int64_t nc, double wlp)
{
    return AMPC_DADD(AMPC_DMUL((1.0 - eps) * w, -lpt),
                     AMPC_DMUL(eps / (double)nc, -wlp));
}

/* The gradient coefficients of one cross_entropy row (target weight wt,
 * smoothing ls, C classes, wsum the sum of the class weights): a_k =
 * (1 - ls) wt [k == t] + ls / C * w_k = hot [k == t] + spread * w_k, and
 * their sum total. */
typedef struct {
    float hot, spread, total;
} ampc_xent_coefs;

AMPC_HOST_DEVICE ampc_xent_coefs
ampc_xent_coefs_of(double ls, float wt, int64_t nc, double wsum)
{
    ampc_xent_coefs k;
    k.hot = (float)((1.0 - ls) * wt);
    k.spread = (float)(ls / (double)nc);
    k.total = (float)AMPC_DADD((1.0 - ls) * wt,
                               AMPC_DMUL(ls / (double)nc, wsum));
    return k;
}

/* One element of the cross_entropy gradient: row_scale * (exp(logp) *
 * total - a), a = spread * w_k (+ hot at the target, see
 * ampc_xent_target_coef). */
AMPC_HOST_DEVICE float
ampc_xent_grad_one(float sc, float lp, float total, float a)
{
    return AMPC_MUL(sc, AMPC_SUB(AMPC_MUL(ampc_exp_f32(lp), total), a));
}

AMPC_HOST_DEVICE float
ampc_xent_target_coef(ampc_xent_coefs k, float wt)
{
    return AMPC_ADD(AMPC_MUL(k.spread, wt), k.hot);
}

/* mse_loss: (x - t)^2, and its gradient (scale * (x - t)) * grad. */
AMPC_HOST_DEVICE float
ampc_mse_one(float x, float t)
{
    float v = x - t;
    return v * v;
}

AMPC_HOST_DEVICE float
ampc_mse_bwd_one(float scale, float x, float t, float g)
{
    return (scale * (x - t)) * g;
}

/* dropout: (x * mask) * scale, in that order, so that a dropped NaN or inf
 * stays NaN, as with torch's input.mul(mask).mul_(scale). */
AMPC_HOST_DEVICE float
ampc_masked_scale_one(float x, uint8_t keep, float scale)
{
    return (x * (keep ? 1.0f : 0.0f)) * scale;
}

// ----------------------------------------------------------------------------
// fused optimizer steps: torch's single-tensor SGD and Adam op by op
// (torch/optim/sgd.py, adam.py), with the scalar constants in float32

/* The device-side skip of PyTorch's _step_supports_amp_scaling contract:
 * found_inf (NULL when absent) nonzero, NaN included, means that this step
 * writes nothing. */
AMPC_HOST_DEVICE int
ampc_optim_skip(const float *found_inf)
{
    return found_inf != NULL && *found_inf != 0.0f;
}

/* The factor applied to every gradient element: 1 / *grad_scale, or 1
 * when there is no grad_scale.  NOTE: torch divides by the scale; for the
 * power-of-two scales a GradScaler uses, the two are the same bits. */
AMPC_HOST_DEVICE float
ampc_optim_inv_scale(const float *grad_scale)
{
    return grad_scale != NULL ? 1.0f / *grad_scale : 1.0f;
}

/* The unscaled gradient, grad * inv_scale: what the step uses, and what
 * it writes back to the grad tensor when a grad_scale is given. */
AMPC_HOST_DEVICE float
ampc_optim_unscale(float g, float inv_scale)
{
    return AMPC_MUL(g, inv_scale);
}

/* d = the (unscaled) grad, negated when maximizing (sign = -1). */
AMPC_HOST_DEVICE float
ampc_optim_grad(float g, float sign)
{
    return AMPC_MUL(g, sign);
}

/* L2 weight decay: d + weight_decay * param. */
AMPC_HOST_DEVICE float
ampc_optim_l2(float d, float weight_decay, float p)
{
    return AMPC_ADD(d, AMPC_MUL(weight_decay, p));
}

/* SGD: buf = momentum * buf + (1 - dampening) * d (after the first step);
 * nesterov d + momentum * buf; param + (-lr) * d. */
AMPC_HOST_DEVICE float
ampc_sgd_momentum(float buf, float d, float momentum,
                  float one_minus_dampening)
{
    return AMPC_ADD(AMPC_MUL(buf, momentum),
                    AMPC_MUL(one_minus_dampening, d));
}

AMPC_HOST_DEVICE float
ampc_sgd_nesterov(float d, float momentum, float buf)
{
    return AMPC_ADD(d, AMPC_MUL(momentum, buf));
}

AMPC_HOST_DEVICE float
ampc_sgd_param(float p, float neg_lr, float d)
{
    return AMPC_ADD(p, AMPC_MUL(neg_lr, d));
}

/* One SGD element from its unscaled gradient g (the CPU applies the same
 * stages in this order, a block at a time): returns the new param; *buf is
 * updated when has_buf. */
AMPC_HOST_DEVICE float
ampc_sgd_one(const ampc_sgd_args *a, float p, float g, int has_buf,
             float *buf)
{
    float d = ampc_optim_grad(g, a->maximize ? -1.0f : 1.0f);
    if (a->weight_decay != 0.0f) {
        d = ampc_optim_l2(d, a->weight_decay, p);
    }
    if (has_buf) {
        float b = a->first_step ? d
                                : ampc_sgd_momentum(*buf, d, a->momentum,
                                                    a->one_minus_dampening);
        *buf = b;
        d = a->nesterov ? ampc_sgd_nesterov(d, a->momentum, b) : b;
    }
    return ampc_sgd_param(p, -a->lr, d);
}

/* Adam: exp_avg = lerp(exp_avg, d, w) with w = 1 - beta1, as torch's lerp:
 * m + w * (d - m) for |w| < 0.5, else d - (d - m) * (1 - w). */
AMPC_HOST_DEVICE float
ampc_adam_lerp(float m, float d, float w, float wc, int small)
{
    return small ? AMPC_ADD(m, AMPC_MUL(w, d - m))
                 : AMPC_SUB(d, AMPC_MUL(d - m, wc));
}

/* exp_avg_sq = exp_avg_sq * beta2 + ((1 - beta2) * d) * d */
AMPC_HOST_DEVICE float
ampc_adam_sq(float v, float d, float beta2, float one_minus_beta2)
{
    return AMPC_ADD(AMPC_MUL(v, beta2), AMPC_MUL(one_minus_beta2 * d, d));
}

/* param + (neg_step_size * exp_avg) / (sqrt(v) / bias_correction2_sqrt +
 * eps), with sqrt_v the exact square root of v (or of its running max). */
AMPC_HOST_DEVICE float
ampc_adam_param(float p, float m, float sqrt_v, float neg_step_size,
                float bias_correction2_sqrt, float eps)
{
    float denom = sqrt_v / bias_correction2_sqrt + eps;
    return AMPC_ADD(p, (neg_step_size * m) / denom);
}

/* The step's constants from the 1-based step number, in double as torch
 * computes them: neg_step_size = -lr / (1 - beta1^step),
 * bias_correction2_sqrt = sqrt(1 - beta2^step). */
AMPC_HOST_DEVICE void
ampc_adam_bias_corrections(double lr, double beta1, double beta2,
                           double step, float *neg_step_size,
                           float *bias_correction2_sqrt)
{
    double bias_correction1 = 1.0 - pow(beta1, step);
    double bias_correction2 = 1.0 - pow(beta2, step);
    *neg_step_size = (float)(-(lr / bias_correction1));
    *bias_correction2_sqrt = (float)pow(bias_correction2, 0.5);
}

/* One Adam element from its unscaled gradient g (the stages of the CPU's
 * blocked loop, in its order): returns the new param and updates *m, *v
 * and, with amsgrad, *vmax. */
AMPC_HOST_DEVICE float
ampc_adam_one(const ampc_adam_args *a, float p, float g, float *m, float *v,
              int amsgrad, float *vmax)
{
    float d = ampc_optim_grad(g, a->maximize ? -1.0f : 1.0f);
    if (a->weight_decay != 0.0f && a->decoupled) {
        p = AMPC_MUL(p, a->decay);
    }
    else if (a->weight_decay != 0.0f) {
        d = ampc_optim_l2(d, a->weight_decay, p);
    }
    float w = a->one_minus_beta1;
    *m = ampc_adam_lerp(*m, d, w, 1.0f - w, fabsf(w) < 0.5f);
    *v = ampc_adam_sq(*v, d, a->beta2, a->one_minus_beta2);
    float den = *v;
    if (amsgrad) {
        *vmax = ampc_nn_max(*vmax, *v);
        den = *vmax;
    }
    return ampc_adam_param(p, *m, sqrtf(den), a->neg_step_size,
                           a->bias_correction2_sqrt, a->eps);
}

// ----------------------------------------------------------------------------
// RMSprop and Adagrad (torch/optim/rmsprop.py, adagrad.py, single-tensor)

/* The denominator of both: sqrt(x) + eps, from the exact square root. */
AMPC_HOST_DEVICE float
ampc_optim_den(float sqrt_x, float eps)
{
    return AMPC_ADD(sqrt_x, eps);
}

/* p + (value * d) / den: torch's param.addcdiv_(d, den, value=value). */
AMPC_HOST_DEVICE float
ampc_optim_addcdiv(float p, float value, float d, float den)
{
    return AMPC_ADD(p, AMPC_MUL(value, d) / den);
}

/* RMSprop centered: square_avg.addcmul(grad_avg, grad_avg, value=-1),
 * the radicand of the denominator. */
AMPC_HOST_DEVICE float
ampc_rmsprop_centered(float v, float m)
{
    return AMPC_SUB(v, AMPC_MUL(m, m));
}

/* RMSprop momentum: buf.mul_(momentum).addcdiv_(d, den). */
AMPC_HOST_DEVICE float
ampc_rmsprop_buf(float buf, float momentum, float d, float den)
{
    return AMPC_ADD(AMPC_MUL(buf, momentum), d / den);
}

/* One RMSprop element from its unscaled gradient g (the stages of the
 * CPU's blocked loop, in its order): returns the new param and updates *v
 * and, when centered, *m (grad_avg) and, when has_buf, *buf. */
AMPC_HOST_DEVICE float
ampc_rmsprop_one(const ampc_rmsprop_args *a, float p, float g, float *v,
                 int centered, float *m, int has_buf, float *buf)
{
    float d = ampc_optim_grad(g, a->maximize ? -1.0f : 1.0f);
    if (a->weight_decay != 0.0f) {
        d = ampc_optim_l2(d, a->weight_decay, p);
    }
    /* square_avg.mul_(alpha).addcmul_(d, d, value=1 - alpha) */
    *v = ampc_adam_sq(*v, d, a->alpha, a->one_minus_alpha);
    float x = *v;
    if (centered) {
        float w = a->one_minus_alpha;
        *m = ampc_adam_lerp(*m, d, w, 1.0f - w, fabsf(w) < 0.5f);
        x = ampc_rmsprop_centered(*v, *m);
    }
    float den = ampc_optim_den(sqrtf(x), a->eps);
    if (has_buf) {
        *buf = ampc_rmsprop_buf(*buf, a->momentum, d, den);
        return ampc_sgd_param(p, a->neg_lr, *buf);
    }
    return ampc_optim_addcdiv(p, a->neg_lr, d, den);
}

/* Adagrad: state_sum.addcmul_(d, d, value=1). */
AMPC_HOST_DEVICE float
ampc_adagrad_sum(float s, float d)
{
    return AMPC_ADD(s, AMPC_MUL(d, d));
}

/* -clr for the 1-based step number, in double as torch computes it in
 * Python floats: -(lr / (1 + (step - 1) * lr_decay)). */
AMPC_HOST_DEVICE float
ampc_adagrad_neg_clr(double lr, double lr_decay, double step)
{
    return (float)(-(lr / AMPC_DADD(1.0, AMPC_DMUL(step - 1.0, lr_decay))));
}

/* One Adagrad element from its unscaled gradient g: returns the new param
 * and updates *s. */
AMPC_HOST_DEVICE float
ampc_adagrad_one(const ampc_adagrad_args *a, float p, float g, float *s)
{
    float d = ampc_optim_grad(g, a->maximize ? -1.0f : 1.0f);
    if (a->weight_decay != 0.0f) {
        d = ampc_optim_l2(d, a->weight_decay, p);
    }
    *s = ampc_adagrad_sum(*s, d);
    return ampc_optim_addcdiv(p, a->neg_clr, d,
                              ampc_optim_den(sqrtf(*s), a->eps));
}

#endif /* AMPC_NN_MATH_H */
