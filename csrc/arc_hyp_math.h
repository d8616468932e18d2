/* arc_hyp_math.h - asin, acos, atan, atan2, sinh, cosh, asinh, acosh and
 * atanh in float32, for the CPU loops (csrc/cpu/math_loops.h) and the CUDA
 * kernels (cuda/elementwise.cu) through elementwise_math.h.  Our own, with
 * no libm and no branches (selects), so the CPU loops vectorise and the
 * GPU computes the same bits: odd polynomials x + x^3 Q(x^2) near 0
 * (tools/fit_unary_math.py), and past them the identities below, with
 * the roundings that would cancel carried in a second float (sqrt's and a
 * division's by fma, a sum's by Fast2Sum), so every result stays within
 * 2 ulp of float64 over the whole float32 range.  NaN stays NaN; +-0, the
 * infinities and the edges of each domain give what C99 (and PyTorch)
 * give.
 */
#ifndef AMPC_ARC_HYP_MATH_H
#define AMPC_ARC_HYP_MATH_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "elementwise_math.h"
#include "nn_math.h"

/* pi/2, pi and ln 2 rounded to float, and what the rounding left out */
#define AMPC_PIO2_HI 1.57079637f
#define AMPC_PIO2_LO -4.37113883e-08f
#define AMPC_PI_HI 3.14159274f
#define AMPC_PI_LO -8.74227766e-08f
#define AMPC_LN2_F 0.693147182f

// ----------------------------------------------------------------------------
// the polynomials: f x = x + x^3 Q(x^2), each returning x^3 Q(x^2)

/* asin x, |x| <= 1/2, given s = x^2 */
AMPC_HOST_DEVICE float
ampc_asin_tail_f32(float x, float s)
{
    float q = AMPC_FMA(0.0375163294f, s, 0.0144386962f);
    q = AMPC_FMA(q, s, 0.0318076909f);
    q = AMPC_FMA(q, s, 0.0445169583f);
    q = AMPC_FMA(q, s, 0.0750050396f);
    q = AMPC_FMA(q, s, 0.166666597f);
    return AMPC_MUL(AMPC_MUL(x, s), q);
}

/* atan u, |u| <= 1 */
AMPC_HOST_DEVICE float
ampc_atan_tail_f32(float u)
{
    float s = AMPC_MUL(u, u);
    float q = AMPC_FMA(-0.00179361599f, s, 0.0109145818f);
    q = AMPC_FMA(q, s, -0.0311778039f);
    q = AMPC_FMA(q, s, 0.0579575561f);
    q = AMPC_FMA(q, s, -0.0840344802f);
    q = AMPC_FMA(q, s, 0.109521851f);
    q = AMPC_FMA(q, s, -0.142642409f);
    q = AMPC_FMA(q, s, 0.199985489f);
    q = AMPC_FMA(q, s, -0.333332986f);
    return AMPC_MUL(AMPC_MUL(u, s), q);
}

/* sinh x, |x| <= 2 */
AMPC_HOST_DEVICE float
ampc_sinh_tail_f32(float x)
{
    float s = AMPC_MUL(x, x);
    float q = AMPC_FMA(2.69665144e-08f, s, 2.74748572e-06f);
    q = AMPC_FMA(q, s, 0.000198428606f);
    q = AMPC_FMA(q, s, 0.0083333198f);
    q = AMPC_FMA(q, s, 0.166666672f);
    return AMPC_MUL(AMPC_MUL(x, s), q);
}

/* asinh x, |x| <= 1/2 */
AMPC_HOST_DEVICE float
ampc_asinh_tail_f32(float x)
{
    float s = AMPC_MUL(x, x);
    float q = AMPC_FMA(-0.0132375341f, s, 0.028169129f);
    q = AMPC_FMA(q, s, -0.0443845168f);
    q = AMPC_FMA(q, s, 0.0749865249f);
    q = AMPC_FMA(q, s, -0.166666433f);
    return AMPC_MUL(AMPC_MUL(x, s), q);
}

/* atanh x, |x| <= 1/2 */
AMPC_HOST_DEVICE float
ampc_atanh_tail_f32(float x)
{
    float s = AMPC_MUL(x, x);
    float q = AMPC_FMA(0.1766904f, s, 0.0513588302f);
    q = AMPC_FMA(q, s, 0.11823713f);
    q = AMPC_FMA(q, s, 0.14222765f);
    q = AMPC_FMA(q, s, 0.200025186f);
    q = AMPC_FMA(q, s, 0.333333015f);
    return AMPC_MUL(AMPC_MUL(x, s), q);
}

// ----------------------------------------------------------------------------
// asin and acos

/* For 1/2 < |x| <= 1: asin sqrt(z) = w + c, z = (1 - |x|) / 2 (exact),
 * w = sqrt(z) rounded and c = w's rounding error (by fma) plus the
 * polynomial's part, so that 2 (w + c) keeps the bits that pi/2 - 2 asin w
 * (asin) and pi - 2 asin w (acos, x < 0) would otherwise lose.  |x| > 1
 * gives a NaN w. */
AMPC_HOST_DEVICE float
ampc_asin_half_f32(float a, float *c)
{
    float z = AMPC_MUL(AMPC_SUB(1.0f, a), 0.5f);
    float w = sqrtf(z);
    float wl = AMPC_FMA(-w, w, z) / AMPC_ADD(w, w);
    wl = ampc_select_f32(z > 0.0f, wl, 0.0f);   /* w = 0: 0 / 0 */
    *c = AMPC_ADD(wl, ampc_asin_tail_f32(w, z));
    return w;
}

/* asin x = x + x^3 Q(x^2) up to |x| = 1/2, pi/2 - 2 asin sqrt((1 - |x|)
 * / 2) past it, with x's sign; |x| > 1 gives NaN, asin(-0) = -0. */
AMPC_HOST_DEVICE float
ampc_asin_f32(float x)
{
    float a = fabsf(x), c;
    float small = AMPC_ADD(a, ampc_asin_tail_f32(a, AMPC_MUL(a, a)));
    float w = ampc_asin_half_f32(a, &c);
    float big = AMPC_ADD(AMPC_FMA(-2.0f, w, AMPC_PIO2_HI),
                         AMPC_FMA(-2.0f, c, AMPC_PIO2_LO));
    return copysignf(ampc_select_f32(a <= 0.5f, small, big), x);
}

/* acos x = pi/2 - asin x up to |x| = 1/2 (pi/2 in two parts), 2 asin w
 * for x > 1/2 and pi - 2 asin w for x < -1/2 (w as in asin); acos 1 =
 * +0, acos -1 = pi rounded. */
AMPC_HOST_DEVICE float
ampc_acos_f32(float x)
{
    float a = fabsf(x), c;
    float tail = ampc_asin_tail_f32(x, AMPC_MUL(x, x));
    float small = AMPC_ADD(AMPC_SUB(AMPC_PIO2_HI, x),
                           AMPC_SUB(AMPC_PIO2_LO, tail));
    float w = ampc_asin_half_f32(a, &c);
    float pos = AMPC_MUL(2.0f, AMPC_ADD(w, c));
    float neg = AMPC_ADD(AMPC_FMA(-2.0f, w, AMPC_PI_HI),
                         AMPC_FMA(-2.0f, c, AMPC_PI_LO));
    float big = ampc_select_f32(x < 0.0f, neg, pos);
    return ampc_select_f32(a <= 0.5f, small, big);
}

// ----------------------------------------------------------------------------
// atan and atan2

/* base + sign (u + u^3 Q(u^2)) for 0 <= u <= 1 and base 0, pi/2 or pi (in
 * two parts): the large terms in one fma, the small ones in another. */
AMPC_HOST_DEVICE float
ampc_atan_from_f32(float u, float sign, float base_hi, float base_lo)
{
    float hi = AMPC_FMA(sign, u, base_hi);
    float lo = AMPC_FMA(sign, ampc_atan_tail_f32(u), base_lo);
    return AMPC_ADD(hi, lo);
}

/* atan x = the polynomial up to |x| = 1, pi/2 - atan(1/|x|) past it,
 * with x's sign; atan(+-inf) = +-pi/2. */
AMPC_HOST_DEVICE float
ampc_atan_f32(float x)
{
    float a = fabsf(x);
    int big = a > 1.0f;
    float u = ampc_select_f32(big, 1.0f / a, a);
    float r = ampc_atan_from_f32(u, ampc_select_f32(big, -1.0f, 1.0f),
                                 ampc_select_f32(big, AMPC_PIO2_HI, 0.0f),
                                 ampc_select_f32(big, AMPC_PIO2_LO, 0.0f));
    return ampc_select_f32(x != x, x, copysignf(r, x));
}

/* atan2(y, x), the angle of (x, y), as C99's: u = min(|x|, |y|) / max(..)
 * and the angle in the first quadrant, atan u or pi/2 - atan u, mirrored
 * to x's side (pi - that when x < 0 or x = -0) and given y's sign.  Both
 * zero: u = 0 (+-0 or +-pi); both infinite: u = 1 (+-pi/4 or +-3pi/4). */
AMPC_HOST_DEVICE float
ampc_atan2_f32(float y, float x)
{
    float ay = fabsf(y), ax = fabsf(x);
    int steep = ay > ax;
    float num = ampc_select_f32(steep, ax, ay);
    float den = ampc_select_f32(steep, ay, ax);
    float u = num / den;
    u = ampc_select_f32(den == 0.0f, 0.0f, u);
    u = ampc_select_f32(num == INFINITY, 1.0f, u);
    int left = (ampc_f32_bits(x) >> 31) != 0;
    /* first quadrant: atan u, or pi/2 - atan u when steep; on the left
     * pi - atan u, or pi/2 + atan u */
    float sign = ampc_select_f32(steep != left, -1.0f, 1.0f);
    float hi = ampc_select_f32(steep, AMPC_PIO2_HI,
                               ampc_select_f32(left, AMPC_PI_HI, 0.0f));
    float lo = ampc_select_f32(steep, AMPC_PIO2_LO,
                               ampc_select_f32(left, AMPC_PI_LO, 0.0f));
    float r = copysignf(ampc_atan_from_f32(u, sign, hi, lo), y);
    return ampc_select_f32((x != x) | (y != y), AMPC_ADD(x, y), r);
}

// ----------------------------------------------------------------------------
// sinh and cosh

/* e^a / 2 for a <= 90: exp's p 2^n (nn_math.h) as p 2^(n-1), applied as
 * two powers of two, so that it reaches FLT_MAX (a = 89.4) before it
 * overflows to inf. */
AMPC_HOST_DEVICE float
ampc_exp_half_f32(float a)
{
    int32_t n;
    float p = ampc_exp_reduced(a, 0.0f, &n);
    int32_t m = n - 1;
    int32_t m1 = m >> 1;
    float s1 = ampc_f32_from_bits((uint32_t)(m1 + 127) << 23);
    float s2 = ampc_f32_from_bits((uint32_t)(m - m1 + 127) << 23);
    return p * s1 * s2;
}

/* |x| clamped to 90, past which sinh and cosh overflow (NaN gives 90:
 * the callers put it back). */
AMPC_HOST_DEVICE float
ampc_hyp_arg_f32(float x)
{
    float a = fabsf(x);
    return ampc_select_f32(a < 90.0f, a, 90.0f);
}

/* sinh x = x + x^3 Q(x^2) up to |x| = 2, h - 1/(4h) with h = e^|x| / 2
 * past it (at most 4% cancels there), with x's sign. */
AMPC_HOST_DEVICE float
ampc_sinh_f32(float x)
{
    float a = ampc_hyp_arg_f32(x);
    float small = AMPC_ADD(a, ampc_sinh_tail_f32(a));
    float h = ampc_exp_half_f32(a);
    float big = AMPC_SUB(h, 0.25f / h);
    float r = copysignf(ampc_select_f32(a <= 2.0f, small, big), x);
    return ampc_select_f32(x != x, x, r);
}

/* cosh x = h + 1/(4h), h = e^|x| / 2: exp's relative error cancels to
 * first order in the sum. */
AMPC_HOST_DEVICE float
ampc_cosh_f32(float x)
{
    float h = ampc_exp_half_f32(ampc_hyp_arg_f32(x));
    float r = AMPC_ADD(h, 0.25f / h);
    return ampc_select_f32(x != x, x, r);
}

// ----------------------------------------------------------------------------
// asinh, acosh and atanh: log of a value carried in two floats

/* log(vh + vl) for vl small beside vh, or log(vh) + ln 2 when twice
 * (large arguments, whose square would overflow: log 2a there). */
AMPC_HOST_DEVICE float
ampc_log_sum_f32(float vh, float vl, int twice)
{
    float corr = ampc_select_f32(twice, AMPC_LN2_F, vl / vh);
    return AMPC_ADD(ampc_log_f32(vh), corr);
}

/* asinh x = x + x^3 Q(x^2) below |x| = 1/2, else log(a + sqrt(a^2 + 1))
 * with a^2 + 1 and its square root carried in two floats, log 2a past
 * 2^12 (where 1 / (4 a^2) is below half an ulp); x's sign. */
AMPC_HOST_DEVICE float
ampc_asinh_f32(float x)
{
    float a = fabsf(x);
    float small = AMPC_ADD(a, ampc_asinh_tail_f32(a));
    float p = AMPC_MUL(a, a);
    float pl = AMPC_FMA(a, a, -p);
    float q = AMPC_ADD(p, 1.0f);                /* 2Sum: p may be < 1 */
    float qb = AMPC_SUB(q, p);
    float ql = AMPC_ADD(AMPC_SUB(p, AMPC_SUB(q, qb)), AMPC_SUB(1.0f, qb));
    float s = sqrtf(q);
    float sl = AMPC_ADD(AMPC_FMA(-s, s, q), AMPC_ADD(ql, pl)) /
               AMPC_ADD(s, s);
    float vh = AMPC_ADD(s, a);                  /* Fast2Sum: s > a */
    float vl = AMPC_ADD(AMPC_SUB(a, AMPC_SUB(vh, s)), sl);
    int huge = a > 4096.0f;
    float big = ampc_log_sum_f32(ampc_select_f32(huge, a, vh), vl, huge);
    float r = copysignf(ampc_select_f32(a < 0.5f, small, big), x);
    return ampc_select_f32(x != x, x, r);
}

/* acosh x = log(x + sqrt((x - 1)(x + 1))), the product and its square root
 * carried in two floats (x - 1 is exact up to x = 2, where it matters),
 * log 2x past 2^12; acosh 1 = +0, x < 1 gives NaN. */
AMPC_HOST_DEVICE float
ampc_acosh_f32(float x)
{
    float d = AMPC_SUB(x, 1.0f);
    float e = AMPC_ADD(x, 1.0f);                /* Fast2Sum: x >= 1 */
    float el = AMPC_SUB(1.0f, AMPC_SUB(e, x));
    float qh = AMPC_MUL(d, e);
    float ql = AMPC_FMA(d, el, AMPC_FMA(d, e, -qh));
    float s = sqrtf(qh);
    float sl = AMPC_ADD(AMPC_FMA(-s, s, qh), ql) / AMPC_ADD(s, s);
    sl = ampc_select_f32(qh > 0.0f, sl, 0.0f);  /* x = 1: 0 / 0 */
    float vh = AMPC_ADD(x, s);                  /* Fast2Sum: x > s */
    float vl = AMPC_ADD(AMPC_SUB(s, AMPC_SUB(vh, x)), sl);
    int huge = x > 4096.0f;
    float r = ampc_log_sum_f32(ampc_select_f32(huge, x, vh), vl, huge);
    r = ampc_select_f32(x < 1.0f, NAN, r);
    return ampc_select_f32(x != x, x, r);
}

/* atanh x = x + x^3 Q(x^2) below |x| = 1/2, else log((1 + a) / (1 - a)) / 2
 * with 1 - a exact, 1 + a and the quotient carried in two floats; x's
 * sign; atanh(+-1) = +-inf, |x| > 1 gives NaN. */
AMPC_HOST_DEVICE float
ampc_atanh_f32(float x)
{
    float a = fabsf(x);
    float small = AMPC_ADD(a, ampc_atanh_tail_f32(a));
    float den = AMPC_SUB(1.0f, a);
    float nh = AMPC_ADD(1.0f, a);               /* Fast2Sum: 1 >= a */
    float nl = AMPC_SUB(a, AMPC_SUB(nh, 1.0f));
    float rh = nh / den;
    float rl = AMPC_ADD(AMPC_FMA(-rh, den, nh), nl) / den;
    float big = AMPC_MUL(0.5f, ampc_log_sum_f32(rh, rl, 0));
    big = ampc_select_f32(a == 1.0f, INFINITY, big);
    float r = copysignf(ampc_select_f32(a < 0.5f, small, big), x);
    return ampc_select_f32(x != x, x, r);
}

#endif /* AMPC_ARC_HYP_MATH_H */
