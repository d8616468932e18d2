/* elementwise_math.h - the one-value rules of the element-wise ops and
 * reductions, shared by the CPU loops (csrc/cpu/loops.h, lerp_loops.h) and
 * the CUDA kernels (cuda/elementwise.cu, cuda/reduce.cu, cuda/random.cu,
 * cuda/lerp.cu): NaN rules of maximum/minimum/relu/sign, torch's lerp, the
 * float32 math (tanh, log, log2, log10, log1p, expm1, erf, erfc here, sin
 * and cos in trig_math.h: our own polynomials, no libm), pow's shortcuts,
 * wrapping int64 arithmetic, and the exact conversions between dtypes and
 * double.  Static inline in C, __host__ __device__ in nvcc, so the CPU
 * tests cover the code the GPU runs.
 */
#ifndef AMPC_ELEMENTWISE_MATH_H
#define AMPC_ELEMENTWISE_MATH_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "kernels.h"
#include "nn_math.h"
#include "trig_math.h"

// ----------------------------------------------------------------------------
// float32

/* torch.maximum / torch.minimum: NaN if either is NaN, b on ties.  The NaN
 * is selected, not computed (a + b), so its bits do not depend on how the
 * compiler orders a commutative add. */
AMPC_HOST_DEVICE float
ampc_maximum_f32(float a, float b)
{
    return a != a ? a : (b != b ? b : (a > b ? a : b));
}

AMPC_HOST_DEVICE float
ampc_minimum_f32(float a, float b)
{
    return a != a ? a : (b != b ? b : (a < b ? a : b));
}

/* torch's lerp (aten/native/Lerp.h) in float32: start + w * (end - start)
 * for |w| < 0.5, else end - (end - start) * (1 - w), so that w = 1 gives
 * end exactly; the rule of nn_math.h ampc_adam_lerp, whose choice is made
 * once per loop.  Both sides are computed and one is taken, so loops over
 * it vectorise. */
AMPC_HOST_DEVICE float
ampc_lerp_f32(float s, float e, float w)
{
    float lo = ampc_adam_lerp(s, e, w, 1.0f - w, 1);
    float hi = ampc_adam_lerp(s, e, w, 1.0f - w, 0);
    return ampc_select_f32(fabsf(w) < 0.5f, lo, hi);
}

/* relu keeps NaN (as torch does); relu(-0) = +0. */
AMPC_HOST_DEVICE float
ampc_relu_f32(float x)
{
    return (x > 0.0f || x != x) ? x : 0.0f;
}

/* sigmoid(x) and sigmoid(-x) from one exp that cannot overflow: e =
 * e^-|x|, 1 / (1 + e) and e / (1 + e), neither cancelling; the full exp,
 * not the non-positive one, whose flush below FLT_MIN would zero silu(x) =
 * x sigmoid(x) on (-88.7, -87.3), where it is a normal float.  With
 * nn_math.h's branch-free exp, so the CPU loop vectorises and the GPU
 * computes the same bits. */
AMPC_HOST_DEVICE float
ampc_sigmoid_pair_f32(float x, float *neg)
{
    float e = ampc_exp_f32(-fabsf(x));
    float s = 1.0f / AMPC_ADD(1.0f, e);
    float es = AMPC_MUL(e, s);
    int nonneg = x >= 0.0f;
    *neg = ampc_select_f32(nonneg, es, s);
    return ampc_select_f32(nonneg, s, es);
}

AMPC_HOST_DEVICE float
ampc_sigmoid_f32(float x)
{
    float neg;
    return ampc_sigmoid_pair_f32(x, &neg);
}

/* tanh, branch-free so that loops over it vectorise (and the GPU gets the
 * same bits): for |x| < 0.625 an odd polynomial in |x| (Cephes' tanhf
 * coefficients), else (1 - e) / (1 + e) with e = e^(-2|x|) <= 0.29 (no
 * cancellation, no overflow); the sign of x put back last, so tanh(-0) =
 * -0.  inf gives 1, NaN stays NaN. */
AMPC_HOST_DEVICE float
ampc_tanh_f32(float x)
{
    float a = fabsf(x), s = AMPC_MUL(a, a);
    float poly = AMPC_FMA(-5.70498872745e-3f, s, 2.06390887954e-2f);
    poly = AMPC_FMA(poly, s, -5.37397155531e-2f);
    poly = AMPC_FMA(poly, s, 1.33314422036e-1f);
    poly = AMPC_FMA(poly, s, -3.33332819422e-1f);
    poly = AMPC_FMA(AMPC_MUL(poly, s), a, a);
    float e = ampc_exp_nonpos_f32(-2.0f * a);
    float big = AMPC_SUB(1.0f, e) / AMPC_ADD(1.0f, e);
    return copysignf(ampc_select_f32(a < 0.625f, poly, big), x);
}

/* log x's reduction, branch-free so that loops over it vectorise (and the
 * GPU gets the same bits): x = 2^k m with m in [sqrt(1/2), sqrt(2)) (a
 * subnormal x scaled by 2^25 first) and f = m - 1 exact; returns f, with
 * *kf = k and *t = f^3 P(f), so that log m = f - f^2 / 2 + t (Cephes' logf
 * polynomial, under 1 ulp).  Meaningful for a positive finite x only. */
AMPC_HOST_DEVICE float
ampc_log_reduce_f32(float x, float *kf, float *t)
{
    const uint32_t sqrt_half = 0x3f3504f3u;    /* the bits of sqrt(1/2) */
    int tiny = x < 1.17549435e-38f;             /* below FLT_MIN */
    float xs = ampc_select_f32(tiny, AMPC_MUL(x, 33554432.0f), x);
    uint32_t ix = ampc_f32_bits(xs) - sqrt_half;
    int32_t k = ((int32_t)ix >> 23) - (int32_t)(25u & (0u - (uint32_t)tiny));
    float f = ampc_f32_from_bits((ix & 0x007fffffu) + sqrt_half) - 1.0f;
    float z = AMPC_MUL(f, f);
    float p = AMPC_FMA(7.0376836292e-2f, f, -1.1514610310e-1f);
    p = AMPC_FMA(p, f, 1.1676998740e-1f);
    p = AMPC_FMA(p, f, -1.2420140846e-1f);
    p = AMPC_FMA(p, f, 1.4249322787e-1f);
    p = AMPC_FMA(p, f, -1.6668057665e-1f);
    p = AMPC_FMA(p, f, 2.0000714765e-1f);
    p = AMPC_FMA(p, f, -2.4999993993e-1f);
    p = AMPC_FMA(p, f, 3.3333331174e-1f);
    *kf = (float)k;
    *t = AMPC_MUL(AMPC_MUL(p, f), z);
    return f;
}

/* The logarithms' special values: log(+-0) = -inf, a negative x gives
 * NaN, inf inf, NaN NaN; r (the formula's) elsewhere. */
AMPC_HOST_DEVICE float
ampc_log_special_f32(float x, float r)
{
    r = ampc_select_f32(x == INFINITY, x, r);
    r = ampc_select_f32(x < 0.0f, NAN, r);
    r = ampc_select_f32(x == 0.0f, -INFINITY, r);
    return ampc_select_f32(x != x, x, r);
}

/* log x = k ln 2 + log m, ln 2 added in two parts, its exact high part
 * last. */
AMPC_HOST_DEVICE float
ampc_log_f32(float x)
{
    float kf, y;
    float f = ampc_log_reduce_f32(x, &kf, &y);
    float z = AMPC_MUL(f, f);
    y = AMPC_FMA(kf, -2.12194440e-4f, y);
    y = AMPC_FMA(z, -0.5f, y);
    return ampc_log_special_f32(x, AMPC_FMA(kf, 0.693359375f,
                                            AMPC_ADD(f, y)));
}

/* log2 x = k + log m log2(e) and log10 x = k log10(2) + log m log10(e),
 * log m = f + lo and the constants in two float parts, so that nothing
 * large rounds before the last add: exact at powers of 2 (f = 0), under
 * 2 ulp elsewhere. */
AMPC_HOST_DEVICE float
ampc_log2_f32(float x)
{
    float kf, t;
    float f = ampc_log_reduce_f32(x, &kf, &t);
    float lo = AMPC_FMA(AMPC_MUL(f, f), -0.5f, t);
    float v = AMPC_FMA(lo, 1.44269502f, AMPC_MUL(f, 1.92596303e-08f));
    v = AMPC_FMA(f, 1.44269502f, v);
    return ampc_log_special_f32(x, AMPC_ADD(kf, v));
}

AMPC_HOST_DEVICE float
ampc_log10_f32(float x)
{
    float kf, t;
    float f = ampc_log_reduce_f32(x, &kf, &t);
    float lo = AMPC_FMA(AMPC_MUL(f, f), -0.5f, t);
    float v = AMPC_FMA(lo, 0.434294492f, AMPC_MUL(f, -1.010305e-08f));
    v = AMPC_FMA(f, 0.434294492f, v);
    v = AMPC_FMA(kf, -1.43209888e-08f, v);
    return ampc_log_special_f32(x, AMPC_FMA(kf, 0.30103001f, v));
}

/* log(1 + x) = log u + c: u = 1 + x rounded and c = (x - (u - 1)) / u, the
 * part of x that rounding lost (exact for |x| < 1), so nothing cancels near
 * 0.  log1p(-1) = -inf, x < -1 NaN, inf inf, log1p(-0) = -0. */
AMPC_HOST_DEVICE float
ampc_log1p_f32(float x)
{
    float u = AMPC_ADD(1.0f, x);
    float c = AMPC_SUB(x, AMPC_SUB(u, 1.0f)) / u;
    float r = AMPC_ADD(ampc_log_f32(u), c);
    r = ampc_select_f32(x == INFINITY, x, r);
    r = ampc_select_f32(x == -1.0f, -INFINITY, r);
    r = ampc_select_f32(x == 0.0f, x, r);
    return ampc_select_f32(x != x, x, r);
}

/* e^x - 1, branch-free: x = k ln 2 + r (|r| <= ln 2 / 2; ln 2 in Cephes'
 * two parts, the first product exact), e^r - 1 = r + r^2 (1/2 + r E(r))
 * (tools/fit_unary_math.py) without cancellation, then 2^k (e^r - 1) +
 * (2^k - 1) in one fma.  Past k = 64 the - 1 is below the result's ulp,
 * so 2^(k-1) and a last doubling keep 2^128 from overflowing early.  x is
 * clamped to [-30, 89] (-1 and inf beyond); expm1(-0) = -0. */
AMPC_HOST_DEVICE float
ampc_expm1_f32(float x)
{
    float xc = ampc_select_f32(x < -30.0f, -30.0f, x);
    xc = ampc_select_f32(x > 89.0f, 89.0f, xc);
    float t = AMPC_FMA(xc, 1.44269502f, 12582912.0f);
    int32_t k = (int32_t)(ampc_f32_bits(t) - 0x4b400000u);
    float kf = AMPC_SUB(t, 12582912.0f);
    float r = AMPC_FMA(kf, -0.693359375f, xc);
    r = AMPC_FMA(kf, 2.12194440e-4f, r);
    float p = AMPC_FMA(1.98635797e-4f, r, 1.39291002e-3f);
    p = AMPC_FMA(p, r, 8.33334774e-3f);
    p = AMPC_FMA(p, r, 4.16665375e-2f);
    p = AMPC_FMA(p, r, 0.166666672f);
    p = AMPC_FMA(p, r, 0.5f);
    float em = AMPC_FMA(AMPC_MUL(r, r), p, r);
    int32_t big = k > 64;
    float s = ampc_f32_from_bits((uint32_t)(k - big + 127) << 23);
    float y = AMPC_FMA(s, em, AMPC_SUB(s, 1.0f));
    y = AMPC_MUL(y, ampc_select_f32(big, 2.0f, 1.0f));
    y = ampc_select_f32(x == 0.0f, x, y);
    return ampc_select_f32(x != x, x, y);
}

/* erf x = x P(x^2) for |x| <= 1 (tools/fit_unary_math.py), as x c0 + x
 * (s P'(s) + c0's low part) so that only the small term rounds before the
 * last fma; erf(-0) = -0. */
AMPC_HOST_DEVICE float
ampc_erf_small_f32(float x)
{
    float s = AMPC_MUL(x, x);
    float p = AMPC_FMA(7.85385928e-05f, s, -8.01019312e-4f);
    p = AMPC_FMA(p, s, 5.18832775e-3f);
    p = AMPC_FMA(p, s, -2.6853811e-2f);
    p = AMPC_FMA(p, s, 0.112835854f);
    p = AMPC_FMA(p, s, -0.37612626f);
    p = AMPC_FMA(p, s, 5.92050924e-08f);
    return AMPC_FMA(x, 1.12837911f, AMPC_MUL(x, p));
}

/* erfc a = e^(-a^2) R(a) for a >= 0.46875, R = erfcx by polynomial: in
 * a - 5/4 below 2; past it (1/a) B(1/a^2) = g (c0 + v) with g = e^(-a^2)
 * t, t = 1/a rounded, and v holding B's small terms, c0's low part and
 * t's rounding error (R is nearly proportional to 1/a there), so that only
 * g and the last fma round at full size.  a^2 is split exactly in two for
 * the exp, so nothing large rounds there; subnormal results keep their
 * bits; a is clamped to 10.5, where erfc is 0 already. */
AMPC_HOST_DEVICE float
ampc_erfc_big_f32(float a)
{
    a = ampc_select_f32(a < 10.5f, a, 10.5f);
    float z = AMPC_MUL(a, a);
    float e = ampc_exp_minus_f32(-z, AMPC_FMA(a, a, -z));
    float u = AMPC_SUB(a, 1.25f);
    float pa = AMPC_FMA(6.55351032e-05f, u, -1.93903499e-4f);
    pa = AMPC_FMA(pa, u, 4.65909776e-4f);
    pa = AMPC_FMA(pa, u, -1.30702893e-3f);
    pa = AMPC_FMA(pa, u, 3.55551322e-3f);
    pa = AMPC_FMA(pa, u, -9.08651482e-3f);
    pa = AMPC_FMA(pa, u, 2.20110733e-2f);
    pa = AMPC_FMA(pa, u, -5.02177589e-2f);
    pa = AMPC_FMA(pa, u, 0.106795579f);
    pa = AMPC_FMA(pa, u, -0.208821893f);
    pa = AMPC_FMA(pa, u, 0.367822915f);
    float t = 1.0f / a;
    float s = AMPC_MUL(t, t);
    float pb = AMPC_FMA(29.2141571f, s, -39.825119f);
    pb = AMPC_FMA(pb, s, 24.9836578f);
    pb = AMPC_FMA(pb, s, -10.0637703f);
    pb = AMPC_FMA(pb, s, 3.22756672f);
    pb = AMPC_FMA(pb, s, -1.03541362f);
    pb = AMPC_FMA(pb, s, 0.422516853f);
    pb = AMPC_FMA(pb, s, -0.282085985f);
    float v = AMPC_FMA(pb, s, -1.51844919e-08f);
    v = AMPC_FMA(0.564189553f, AMPC_FMA(-a, t, 1.0f), v);
    float g = AMPC_MUL(e, t);
    float rb = AMPC_FMA(g, 0.564189553f, AMPC_MUL(g, v));
    return ampc_select_f32(a < 2.0f, AMPC_MUL(pa, e), rb);
}

/* erf: x P(x^2) up to |x| = 1, 1 - erfc |x| (at most 0.16, so nothing
 * cancels) past it, with x's sign; erf(+-inf) = +-1. */
AMPC_HOST_DEVICE float
ampc_erf_f32(float x)
{
    float a = fabsf(x);
    float big = copysignf(AMPC_SUB(1.0f, ampc_erfc_big_f32(a)), x);
    float r = ampc_select_f32(a < 1.0f, ampc_erf_small_f32(x), big);
    return ampc_select_f32(x != x, x, r);
}

/* erfc: 1 - erf x while erf |x| < 1/2 (|x| < 0.46875), so at most one bit
 * cancels; e^(-x^2) R(|x|) past it, 2 - that for a negative x.  erfc(inf) =
 * 0, erfc(-inf) = 2. */
AMPC_HOST_DEVICE float
ampc_erfc_f32(float x)
{
    float a = fabsf(x);
    float e = ampc_erfc_big_f32(a);
    float big = ampc_select_f32(x < 0.0f, AMPC_SUB(2.0f, e), e);
    float small = AMPC_SUB(1.0f, ampc_erf_small_f32(x));
    float r = ampc_select_f32(a < 0.46875f, small, big);
    return ampc_select_f32(x != x, x, r);
}

/* The roundings to an integer value (exact: every level and the GPU give
 * the same bits; round is half to even, as torch.round) and frac, x -
 * trunc(x), as torch.frac (frac(-0) = +0, frac(+-inf) = NaN). */
AMPC_HOST_DEVICE float
ampc_round_f32(float x)
{
    return rintf(x);
}

AMPC_HOST_DEVICE float
ampc_frac_f32(float x)
{
    return AMPC_SUB(x, truncf(x));
}

/* The backwards of sigmoid and tanh from their output y, g y (1 - y) and
 * g (1 - y^2), in this order (every rounding the three separate ops made,
 * in one pass). */
AMPC_HOST_DEVICE float
ampc_sigmoid_backward_f32(float g, float y)
{
    return AMPC_MUL(g, AMPC_MUL(y, AMPC_SUB(1.0f, y)));
}

AMPC_HOST_DEVICE float
ampc_tanh_backward_f32(float g, float y)
{
    return AMPC_MUL(g, AMPC_SUB(1.0f, AMPC_MUL(y, y)));
}

/* As torch.sign: sign(+-0) = +0 and sign(NaN) = 0 (pytorch#41245; NumPy
 * gives NaN). */
AMPC_HOST_DEVICE float
ampc_sign_f32(float x)
{
    return (float)((x > 0.0f) - (x < 0.0f));
}

/* pow's shortcuts for a Python-number exponent, as PyTorch's: x ** 2,
 * x ** 3 and x ** -2 are products (one rounding each, so x ** 3 of a
 * float16 or bfloat16 overflows only if the float32 product does), x ** -1
 * and x ** -0.5 divide.  The special values are the formulas': rsqrt(-0) =
 * -inf where powf(-0, -0.5) = +inf. */
AMPC_HOST_DEVICE float
ampc_square_f32(float x)
{
    return AMPC_MUL(x, x);
}

AMPC_HOST_DEVICE float
ampc_cube_f32(float x)
{
    return AMPC_MUL(AMPC_MUL(x, x), x);
}

AMPC_HOST_DEVICE float
ampc_reciprocal_square_f32(float x)
{
    return 1.0f / AMPC_MUL(x, x);
}

AMPC_HOST_DEVICE float
ampc_rsqrt_f32(float x)
{
    return 1.0f / sqrtf(x);
}

AMPC_HOST_DEVICE float
ampc_reciprocal_f32(float x)
{
    return 1.0f / x;
}

// ----------------------------------------------------------------------------
// int64: wrap-around arithmetic, done unsigned to stay clear of overflow UB

AMPC_HOST_DEVICE int64_t
ampc_add_i64(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

AMPC_HOST_DEVICE int64_t
ampc_sub_i64(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

AMPC_HOST_DEVICE int64_t
ampc_mul_i64(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

AMPC_HOST_DEVICE int64_t
ampc_maximum_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

AMPC_HOST_DEVICE int64_t
ampc_minimum_i64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* -INT64_MIN and |INT64_MIN| wrap to INT64_MIN. */
AMPC_HOST_DEVICE int64_t
ampc_neg_i64(int64_t a)
{
    return (int64_t)(0 - (uint64_t)a);
}

AMPC_HOST_DEVICE int64_t
ampc_abs_i64(int64_t a)
{
    return a < 0 ? (int64_t)(0 - (uint64_t)a) : a;
}

AMPC_HOST_DEVICE int64_t
ampc_relu_i64(int64_t a)
{
    return a > 0 ? a : 0;
}

AMPC_HOST_DEVICE int64_t
ampc_sign_i64(int64_t a)
{
    return (a > 0) - (a < 0);
}

/* a ** b for int64, wrapping; b < 0 (rejected by the caller) gives the
 * truncated real result. */
AMPC_HOST_DEVICE int64_t
ampc_pow_i64(int64_t a, int64_t b)
{
    if (b < 0) {
        return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    }
    uint64_t r = 1;
    uint64_t base = (uint64_t)a;
    for (uint64_t e = (uint64_t)b; e != 0; e >>= 1) {
        if (e & 1) {
            r *= base;
        }
        base *= base;
    }
    return (int64_t)r;
}

/* Truncating int64 division, total: x / 0 = 0 and INT64_MIN / -1 wraps.
 * Never requested by the ops (true division is float). */
AMPC_HOST_DEVICE int64_t
ampc_div_i64(int64_t a, int64_t b)
{
    if (b == 0) {
        return 0;
    }
    if (b == -1) {
        return (int64_t)(0 - (uint64_t)a);
    }
    return a / b;
}

// ----------------------------------------------------------------------------
// bool: ADD and MAXIMUM are "or", MUL and MINIMUM "and".  SUB, DIV and POW
// are rejected by the caller; here they give the 0/1 integer result where
// one exists (xor, a ** b = a or not b) and "and" for DIV.

AMPC_HOST_DEVICE uint8_t
ampc_binary_bool_one(ampc_binary_op op, uint8_t a, uint8_t b)
{
    switch (op) {
    case AMPC_BIN_ADD:
    case AMPC_BIN_MAXIMUM:
        return (a | b) != 0;
    case AMPC_BIN_SUB:
        return (a != 0) != (b != 0);
    case AMPC_BIN_POW:
        return (a != 0) | (b == 0);
    default:
        return (a != 0) & (b != 0);
    }
}

// ----------------------------------------------------------------------------
// conversions

/* NOTE: C leaves float -> int64 undefined out of range; this gives what
 * x86's cvttss2si gives (INT64_MIN for NaN and out of range). */
AMPC_HOST_DEVICE int64_t
ampc_f64_to_i64(double d)
{
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
        return (int64_t)d;
    }
    return INT64_MIN;
}

AMPC_HOST_DEVICE int64_t
ampc_f32_to_i64(float f)
{
    return ampc_f64_to_i64(f);
}

/* d rounded to float32 to odd: an inexact result gets its last bit set.
 * Rounding that to float16 or bfloat16 (RNE) then equals rounding d directly,
 * since float32 keeps more than two extra bits. */
AMPC_HOST_DEVICE float
ampc_f64_to_f32_odd(double d)
{
    float f = (float)d;
    if ((double)f == d || d != d) {
        return f;
    }
    uint32_t u = ampc_f32_bits(f);
    if (fabs((double)f) > fabs(d)) {
        u -= 1;                         /* rounded away: step back to trunc */
    }
    return ampc_f32_from_bits(u | 1u);
}

/* One element as float32 (exact for the float dtypes). */
AMPC_HOST_DEVICE float
ampc_load_f32(ampc_dtype dt, const void *p)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return *(const float *)p;
    case AMPC_FLOAT16:
        return ampc_f16_to_f32(*(const uint16_t *)p);
    case AMPC_BFLOAT16:
        return ampc_bf16_to_f32(*(const uint16_t *)p);
    case AMPC_INT64:
        return (float)*(const int64_t *)p;
    default:
        return *(const uint8_t *)p != 0;
    }
}

/* One int64 or bool element as int64 (bool as 0/1). */
AMPC_HOST_DEVICE int64_t
ampc_load_i64(ampc_dtype dt, const void *p)
{
    if (dt == AMPC_INT64) {
        return *(const int64_t *)p;
    }
    return *(const uint8_t *)p != 0;
}

/* Stores d rounded once (RNE) to dt. */
AMPC_HOST_DEVICE void
ampc_store_f64(ampc_dtype dt, void *p, double d)
{
    switch (dt) {
    case AMPC_FLOAT32:
        *(float *)p = (float)d;
        break;
    case AMPC_FLOAT16:
        *(uint16_t *)p = ampc_f32_to_f16(ampc_f64_to_f32_odd(d));
        break;
    case AMPC_BFLOAT16:
        *(uint16_t *)p = ampc_f32_to_bf16(ampc_f64_to_f32_odd(d));
        break;
    case AMPC_INT64:
        *(int64_t *)p = ampc_f64_to_i64(d);
        break;
    default:
        *(uint8_t *)p = d != 0.0;
        break;
    }
}

#endif /* AMPC_ELEMENTWISE_MATH_H */
