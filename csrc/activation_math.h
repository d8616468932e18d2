/* activation_math.h - GELU (exact and tanh-approximated) and SiLU, and
 * their derivatives, per element in float32: the one definition that the
 * CPU loops (cpu/loops.h) and the CUDA kernels (cuda/elementwise.cu) run,
 * branch-free so that the loops vectorise.
 * Every product that feeds a sum goes through AMPC_MUL / AMPC_ADD
 * (nn_math.h), so the GPU rounds as the CPU does (no FMA contraction).
 */
#ifndef AMPC_ACTIVATION_MATH_H
#define AMPC_ACTIVATION_MATH_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "elementwise_math.h"
#include "nn_math.h"

#define AMPC_SQRT1_2 0.70710678118654752f      /* 1 / sqrt(2) */
#define AMPC_INV_SQRT_2PI 0.39894228040143268f  /* 1 / sqrt(2 pi) */
#define AMPC_SQRT_2_PI 0.79788456080286536f     /* sqrt(2 / pi) */
#define AMPC_GELU_TANH_C 0.044715f

/* x^2 / 2 = *head + *tail without rounding: with |x| = zh + zl, zh holding
 * 12 significant bits, zh^2 / 2 is exact (*head) and *tail = zl (|x| + zh)
 * / 2 is small.  Rounding x^2 / 2 itself would cost exp(-x^2 / 2) a
 * relative error of up to x^2 2^-25 (2e-6 at x = 8.5), where the tails need
 * results to a few ulps.  |x| beyond 64 is taken as 64 (exp gives 0 either
 * way, and inf must not make inf - inf); NaN stays NaN. */
AMPC_HOST_DEVICE void
ampc_half_square_split(float x, float *head, float *tail)
{
    float z = fabsf(x);
    z = ampc_select_f32(z > 64.0f, 64.0f, z);
    float zh = ampc_f32_from_bits(ampc_f32_bits(z) & 0xfffff000u);
    float zl = AMPC_SUB(z, zh);
    *head = 0.5f * AMPC_MUL(zh, zh);
    *tail = 0.5f * AMPC_MUL(zl, AMPC_ADD(z, zh));
}

/* Phi(x), the standard normal CDF, as erfc(-x / sqrt 2) / 2, with erfc(w)
 * = 2 - erfc(-w) for w < 0 and, for a = |x| / sqrt 2, erfc(a) = t Q(t)
 * e^(-a^2), t = 1 / (1 + a / 2): Q(t) = erfcx(a) / t, smooth on t in
 * [0.17, 1] (a up to 9.5, past which Phi(-x) is 0 in float32), is a
 * degree-8 polynomial (our fit, tools/fit_erfcx.py: relative error 4.2e-8
 * before float32 rounding, 1.4e-7 after).  Relative, so GELU's negative
 * tail, x Phi(x) with Phi(x) tiny, stays accurate.  e^(-a^2) =
 * e^(-x^2 / 2) is *e, which phi(x) shares;
 * x^2 / 2 is split by ampc_half_square_split so that nothing large rounds,
 * and the full exp keeps subnormal results: x Phi(x) is a normal float
 * down to x = -13.13, where Phi(x) is already subnormal. */
AMPC_HOST_DEVICE float
ampc_normal_cdf_exp_f32(float x, float *e)
{
    float head, tail;
    ampc_half_square_split(x, &head, &tail);
    float a = AMPC_MUL(fabsf(x), AMPC_SQRT1_2);
    float t = 1.0f / AMPC_FMA(0.5f, a, 1.0f);
    float q = AMPC_FMA(-0.0588909127f, t, 0.283702582f);
    q = AMPC_FMA(q, t, -0.485384911f);
    q = AMPC_FMA(q, t, 0.2759794f);
    q = AMPC_FMA(q, t, -0.0251784399f);
    q = AMPC_FMA(q, t, 0.202070117f);
    q = AMPC_FMA(q, t, 0.24326095f);
    q = AMPC_FMA(q, t, 0.282353491f);
    q = AMPC_FMA(q, t, 0.282087684f);
    *e = ampc_exp_minus_f32(-head, tail);
    float erfc = AMPC_MUL(AMPC_MUL(t, q), *e);
    return 0.5f * ampc_select_f32(x > 0.0f, 2.0f - erfc, erfc);
}

AMPC_HOST_DEVICE float
ampc_normal_cdf_f32(float x)
{
    float e;
    return ampc_normal_cdf_exp_f32(x, &e);
}

/* GELU: x Phi(x). */
AMPC_HOST_DEVICE float
ampc_gelu_f32(float x)
{
    return AMPC_MUL(x, ampc_normal_cdf_f32(x));
}

/* d GELU / dx = Phi(x) + x phi(x), phi(x) = e^(-x^2 / 2) / sqrt(2 pi):
 * one exp for both. */
AMPC_HOST_DEVICE float
ampc_gelu_grad_f32(float x)
{
    float e;
    float cdf = ampc_normal_cdf_exp_f32(x, &e);
    return AMPC_FMA(x, AMPC_MUL(AMPC_INV_SQRT_2PI, e), cdf);
}

/* The tanh approximation's inner u = sqrt(2/pi) (x + 0.044715 x^3). */
AMPC_HOST_DEVICE float
ampc_gelu_tanh_inner_f32(float x)
{
    float x3 = AMPC_MUL(AMPC_MUL(x, x), x);
    return AMPC_MUL(AMPC_SQRT_2_PI,
                    AMPC_ADD(x, AMPC_MUL(AMPC_GELU_TANH_C, x3)));
}

/* GELU(approximate="tanh"): x (1 + tanh(u)) / 2, computed as x
 * sigmoid(2u), which is equal and does not cancel where tanh(u) is near
 * -1 (x below about -3). */
AMPC_HOST_DEVICE float
ampc_gelu_tanh_f32(float x)
{
    return AMPC_MUL(x, ampc_sigmoid_f32(2.0f * ampc_gelu_tanh_inner_f32(x)));
}

/* Its derivative, (1 + t) / 2 + x (1 - t^2) u' / 2 with t = tanh(u) and
 * u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2), as s (1 + 2 x (1 - s) u') with
 * s = sigmoid(2u) and 1 - s = sigmoid(-2u) (no cancellation).  |x| is
 * clamped to 1e4, where s is already 0 or 1: beyond, 2 x u' would
 * overflow and make 0 * inf. */
AMPC_HOST_DEVICE float
ampc_gelu_tanh_grad_f32(float x)
{
    x = ampc_select_f32(fabsf(x) > 1.0e4f, copysignf(1.0e4f, x), x);
    float sn;
    float s = ampc_sigmoid_pair_f32(2.0f * ampc_gelu_tanh_inner_f32(x), &sn);
    float du = AMPC_MUL(AMPC_SQRT_2_PI,
                        AMPC_ADD(1.0f, AMPC_MUL(3.0f * AMPC_GELU_TANH_C,
                                                AMPC_MUL(x, x))));
    return AMPC_MUL(s, AMPC_ADD(1.0f, AMPC_MUL(AMPC_MUL(2.0f * x, sn), du)));
}

/* SiLU: x sigmoid(x). */
AMPC_HOST_DEVICE float
ampc_silu_f32(float x)
{
    return AMPC_MUL(x, ampc_sigmoid_f32(x));
}

/* d SiLU / dx = s (1 + x (1 - s)), s = sigmoid(x), with 1 - s =
 * sigmoid(-x) (no cancellation where s is near 1). */
AMPC_HOST_DEVICE float
ampc_silu_grad_f32(float x)
{
    float sn;
    float s = ampc_sigmoid_pair_f32(x, &sn);
    return AMPC_MUL(s, AMPC_ADD(1.0f, AMPC_MUL(x, sn)));
}

#endif /* AMPC_ACTIVATION_MATH_H */
