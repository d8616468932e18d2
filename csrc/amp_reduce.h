/* amp_reduce.h - the per-value math of the AMP reductions, shared by the C
 * side (csrc/amp_ops.c) and the CUDA kernels (cuda/amp.cu): the unscale
 * pass's telemetry rule (what counts as inf, NaN, zero and subnormal), and
 * clip_grad_norm_'s norm arithmetic (one value's term, folding two
 * accumulators, finishing a norm, rounding a norm to its tensor's dtype,
 * the clip coefficient).  AMPC_HOST_DEVICE as in amp_math.h, so the CPU
 * tests of amp_ops.c cover the code the GPU runs.
 */
#ifndef AMPC_AMP_REDUCE_H
#define AMPC_AMP_REDUCE_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "elementwise_math.h"
#include "kernels.h"

// ----------------------------------------------------------------------------
// the unscale telemetry of one element

/* in_abs / out_abs: the input and output bit patterns with the sign bit
 * cleared, in a format whose infinity is `inf` and smallest normal
 * `min_normal` (float32: 0x7f800000, 0x00800000; float16: 0x7c00, 0x0400;
 * bfloat16: 0x7f80, 0x0080).  inf and NaN are counted on the INPUT, zero
 * and subnormal on the OUTPUT (underflow caused by the unscale). */
AMPC_HOST_DEVICE void
ampc_amp_count_one(ampc_amp_counts *c, uint32_t in_abs, uint32_t out_abs,
                   uint32_t inf, uint32_t min_normal)
{
    c->inf += in_abs == inf;
    c->nan += in_abs > inf;
    c->zero += out_abs == 0;
    c->subnormal += out_abs != 0 && out_abs < min_normal;
}

// ----------------------------------------------------------------------------
// the p-norm (ampc_grad_norm_fn's accumulators)

/* One value's share of the accumulator of norm p. */
AMPC_HOST_DEVICE double
ampc_norm_term(double p, double v)
{
    if (p == 2.0) {
        return v * v;
    }
    if (p == 1.0 || isinf(p)) {
        return fabs(v);
    }
    if (p == 0.0) {
        return v != 0.0 ? 1.0 : 0.0;
    }
    return pow(fabs(v), p);
}

/* The identity of the accumulator: inf for the -inf norm (a min), else 0. */
AMPC_HOST_DEVICE double
ampc_norm_identity(double p)
{
    return (isinf(p) && p < 0) ? (double)INFINITY : 0.0;
}

/* Two accumulators of norm p folded into one: a sum, or for p = +-inf a
 * max / min in which a NaN wins (the first NaN seen). */
AMPC_HOST_DEVICE double
ampc_norm_merge(double p, double a, double b)
{
    if (!isinf(p)) {
        return a + b;
    }
    if (a != a || b != b) {
        return a != a ? a : b;
    }
    return (p > 0) == (b > a) ? b : a;
}

/* The p-norm from its accumulator. */
AMPC_HOST_DEVICE double
ampc_norm_finish(double p, double acc)
{
    if (p == 2.0) {
        return sqrt(acc);
    }
    if (p == 1.0 || p == 0.0 || isinf(p)) {
        return acc;
    }
    return pow(acc, 1.0 / p);
}

// ----------------------------------------------------------------------------
// rounding a double to a tensor dtype

/* d rounded once (RNE) to the float dtype dt, as a float. */
AMPC_HOST_DEVICE float
ampc_amp_round_to(ampc_dtype dt, double d)
{
    if (dt == AMPC_FLOAT16) {
        return ampc_f16_to_f32(ampc_f32_to_f16(ampc_f64_to_f32_odd(d)));
    }
    if (dt == AMPC_BFLOAT16) {
        return ampc_bf16_to_f32(ampc_f32_to_bf16(ampc_f64_to_f32_odd(d)));
    }
    return (float)d;
}

/* The norm of a tensor from its accumulator, times inv (the unscale
 * multiplier of GradScaler.clip_grad_norm_, 1 otherwise; the 0-"norm"
 * counts elements and is not scaled), rounded to the tensor's dtype
 * (PyTorch's per-tensor vector_norm returns that dtype).  For a power-of-
 * two inv this is the norm of the unscaled tensor, bit for bit, unless
 * its elements underflow. */
AMPC_HOST_DEVICE double
ampc_norm_of_tensor(ampc_dtype dt, double p, double acc, float inv)
{
    double norm = ampc_norm_finish(p, acc);
    return ampc_amp_round_to(dt, p == 0.0 ? norm : norm * (double)inv);
}

/* The clip coefficient as PyTorch computes it in total_norm's dtype dt:
 * clamp(max_norm / (total_norm + 1e-6), max=1), where a Python number over
 * a tensor is reciprocal() * number, and each op rounds to dt.  A NaN or
 * inf norm gives a NaN or 0 coefficient, as in PyTorch. */
AMPC_HOST_DEVICE float
ampc_clip_coef(ampc_dtype dt, float total_norm, double max_norm)
{
    float x = ampc_amp_round_to(dt, total_norm + 1e-6f);
    float r = ampc_amp_round_to(dt, 1.0f / x);
    float coef = ampc_amp_round_to(dt, r * (float)max_norm);
    return coef > 1.0f ? 1.0f : coef;
}

/* GradScaler.clip_grad_norm_'s one multiplier for unscaling and clipping:
 * inv * the clip coefficient of the (unscaled) total norm.  For a power-
 * of-two inv, g * this is bit for bit (g * inv) * coef, the unscale and
 * the clip done one after the other, as long as g * inv does not
 * underflow. */
AMPC_HOST_DEVICE float
ampc_clip_multiplier(ampc_dtype dt, float total_norm, double max_norm,
                     float inv)
{
    return inv * ampc_clip_coef(dt, total_norm, max_norm);
}

#endif /* AMPC_AMP_REDUCE_H */
