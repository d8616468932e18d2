/* elementwise_math.h - the one-value rules of the element-wise ops and
 * reductions, shared by the CPU loops (csrc/cpu/loops.h) and the CUDA
 * kernels (cuda/elementwise.cu, cuda/reduce.cu, cuda/random.cu): NaN rules
 * of maximum/minimum/relu/sign, pow's shortcuts, wrapping int64
 * arithmetic, and the exact conversions between dtypes and double.  Static
 * inline in C, __host__ __device__ in nvcc, so the CPU tests cover the code
 * the GPU runs.
 */
#ifndef AMPC_ELEMENTWISE_MATH_H
#define AMPC_ELEMENTWISE_MATH_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "kernels.h"
#include "nn_math.h"

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

/* log x, branch-free so that loops over it vectorise (and the GPU gets the
 * same bits): x = 2^k m with m in [sqrt(1/2), sqrt(2)) (a subnormal x
 * scaled by 2^25 first), log m = f - f^2 / 2 + f^3 P(f) with f = m - 1
 * exact (Cephes' logf polynomial, under 1 ulp), and k ln 2 added in two
 * parts, its exact high part last.  log(+-0) = -inf, a negative x gives
 * NaN, inf inf, NaN NaN. */
AMPC_HOST_DEVICE float
ampc_log_f32(float x)
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
    float kf = (float)k;
    float y = AMPC_MUL(AMPC_MUL(p, f), z);
    y = AMPC_FMA(kf, -2.12194440e-4f, y);
    y = AMPC_FMA(z, -0.5f, y);
    float r = AMPC_FMA(kf, 0.693359375f, AMPC_ADD(f, y));
    r = ampc_select_f32(x == INFINITY, x, r);
    r = ampc_select_f32(x < 0.0f, NAN, r);
    r = ampc_select_f32(x == 0.0f, -INFINITY, r);
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
