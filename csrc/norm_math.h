/* norm_math.h - the per-element math of batch norm, layer norm and group
 * norm, shared by the CPU loops (csrc/cpu/norm_loops.h, batch_norm_loops.h,
 * group_norm_loops.h) and the CUDA kernels (cuda/norm.cu, group_norm.cu):
 * the moments from two-pass sums, the inverse standard deviation, the
 * running-statistics update, the normalize + affine step and the backward
 * combination.  Static inline in C, __host__ __device__ in
 * nvcc, so the CPU tests cover the code the GPU runs.
 *
 * Every float32 product that feeds a sum goes through AMPC_MUL / AMPC_ADD /
 * AMPC_SUB (nn_math.h), which nvcc never contracts into an FMA, so the GPU
 * rounds each operation as the CPU does.
 */
#ifndef AMPC_NORM_MATH_H
#define AMPC_NORM_MATH_H

#include <math.h>
#include <stdint.h>

#include "nn_math.h"

/* What a sum pass accumulates per term (cpu/norm_loops.h, cuda/norm.cu):
 * NORM_SUM  s1 += x
 * NORM_DEV  s1 += x - m, s2 += (x - m)^2     (m: a first estimate of the
 *                                             mean, from NORM_SUM)
 * NORM_GRAD s1 += g, s2 += g * (x - m)       (m: the mean used forward) */
enum { AMPC_NORM_SUM = 0, AMPC_NORM_DEV, AMPC_NORM_GRAD };

/* One term of a sum pass into the accumulators a1, a2. */
AMPC_HOST_DEVICE void
ampc_norm_term(int kind, float x, float g, float m, float *a1, float *a2)
{
    if (kind == AMPC_NORM_SUM) {
        *a1 = AMPC_ADD(*a1, x);
    }
    else if (kind == AMPC_NORM_DEV) {
        float d = AMPC_SUB(x, m);
        *a1 = AMPC_ADD(*a1, d);
        *a2 = AMPC_ADD(*a2, AMPC_MUL(d, d));
    }
    else {
        *a1 = AMPC_ADD(*a1, g);
        *a2 = AMPC_ADD(*a2, AMPC_MUL(g, AMPC_SUB(x, m)));
    }
}

/* Mean and biased variance of n > 0 values from the NORM_DEV sums around
 * m0: s1 = sum(x - m0), s2 = sum((x - m0)^2).  The s1 terms correct for m0
 * not being the exact mean (the corrected two-pass algorithm), and stay
 * small, so nothing cancels catastrophically. */
AMPC_HOST_DEVICE void
ampc_norm_moments(double m0, double s1, double s2, int64_t n, double *mean,
                  double *var)
{
    double dn = (double)n;
    double shift = s1 / dn;
    *mean = AMPC_DADD(m0, shift);
    double v = (s2 - AMPC_DMUL(s1, shift)) / dn;
    *var = v > 0.0 ? v : 0.0;
}

/* 1 / sqrt(var + eps), in double. */
AMPC_HOST_DEVICE double
ampc_norm_invstd(double var, double eps)
{
    return 1.0 / sqrt(var + eps);
}

/* A running statistic after one training batch: momentum * stat + (1 -
 * momentum) * old, in double (torch's CPU accumulate type). */
AMPC_HOST_DEVICE double
ampc_norm_running(double old, double stat, double momentum)
{
    return AMPC_DADD(AMPC_DMUL(momentum, stat),
                     AMPC_DMUL(1.0 - momentum, old));
}

/* The unbiased variance (for the running statistic) of n > 1 values whose
 * biased variance is var. */
AMPC_HOST_DEVICE double
ampc_norm_unbiased(double var, int64_t n)
{
    return AMPC_DMUL(var, (double)n / (double)(n - 1));
}

/* y = (x - mean) * scale + shift: batch norm's normalize + affine with
 * scale = weight * invstd and shift = bias per channel. */
AMPC_HOST_DEVICE float
ampc_norm_apply(float x, float mean, float scale, float shift)
{
    return AMPC_ADD(AMPC_MUL(AMPC_SUB(x, mean), scale), shift);
}

/* y = ((x - mean) * rstd) * w + b: layer norm, with an affine per element. */
AMPC_HOST_DEVICE float
ampc_layer_norm_one(float x, float mean, float rstd, float w, float b)
{
    return AMPC_ADD(AMPC_MUL(AMPC_MUL(AMPC_SUB(x, mean), rstd), w), b);
}

/* The gradient of a normalisation with batch statistics, one element:
 * (g - mg - (x - mean) * proj) * scale, where g is the gradient of the
 * normalised value's affine output times the weight's share (batch norm:
 * grad_y, with scale = weight * invstd; layer norm: grad_y * w, with scale =
 * rstd), mg = mean(g) and proj = mean(g * (x - mean)) * invstd^2. */
AMPC_HOST_DEVICE float
ampc_norm_bwd_one(float g, float x, float mean, float mg, float proj,
                  float scale)
{
    float centred = AMPC_SUB(AMPC_SUB(g, mg), AMPC_MUL(AMPC_SUB(x, mean),
                                                       proj));
    return AMPC_MUL(centred, scale);
}

/* The per-group constants of ampc_norm_bwd_one from the NORM_GRAD sums
 * s1 = sum(g), s2 = sum(g * (x - mean)) over n > 0 values. */
AMPC_HOST_DEVICE void
ampc_norm_bwd_consts(double s1, double s2, int64_t n, double invstd,
                     float *mg, float *proj)
{
    *mg = (float)(s1 / (double)n);
    *proj = (float)(AMPC_DMUL(s2 / (double)n, AMPC_DMUL(invstd, invstd)));
}

/* The normalised value (x - mean) * rstd, and a weight-gradient term
 * acc + g * that value (layer norm's grad_weight, summed over rows). */
AMPC_HOST_DEVICE float
ampc_norm_xhat(float x, float mean, float rstd)
{
    return AMPC_MUL(AMPC_SUB(x, mean), rstd);
}

AMPC_HOST_DEVICE float
ampc_norm_wgrad_acc(float acc, float g, float x, float mean, float rstd)
{
    return AMPC_ADD(acc, AMPC_MUL(g, ampc_norm_xhat(x, mean, rstd)));
}

/* Group norm's scale of one channel of a group for ampc_norm_apply (whose
 * shift is the channel's bias): weight * rstd. */
AMPC_HOST_DEVICE float
ampc_group_norm_scale(float w, float rstd)
{
    return AMPC_MUL(w, rstd);
}

/* Group norm's backward gathers, per (sample, channel), c1 = sum(grad_y)
 * and c2 = sum(grad_y * (x - mean)) over the channel's plane (the NORM_GRAD
 * sums of grad_y).  The group's NORM_GRAD sums of g = grad_y * w, which
 * grad_x needs (ampc_norm_bwd_consts), add up w * c1 and w * c2 over the
 * group's channels; grad_bias adds up c1 over the samples and grad_weight
 * c2 * rstd (rstd: the sample's group's). */
AMPC_HOST_DEVICE void
ampc_group_norm_gather(double c1, double c2, float w, double *s1, double *s2)
{
    *s1 = AMPC_DADD(*s1, AMPC_DMUL((double)w, c1));
    *s2 = AMPC_DADD(*s2, AMPC_DMUL((double)w, c2));
}

AMPC_HOST_DEVICE double
ampc_group_norm_wgrad_term(double c2, float rstd)
{
    return AMPC_DMUL(c2, (double)rstd);
}

#endif /* AMPC_NORM_MATH_H */
