/* mod_math.h - fmod and remainder of one pair of values, float32 and int64,
 * shared by the CPU loops (csrc/cpu/math_loops.h) and the CUDA kernels
 * (cuda/elementwise.cu).  fmod is C's (the result has the dividend's sign
 * and is exact); remainder is PyTorch's: fmod plus the divisor when the two
 * signs differ (so it has the divisor's sign, and that add rounds).  No
 * libm: the float32 fmod takes the quotient's integer part from one
 * division while that is exact (|x / y| < 2^23, nearly always), and runs an
 * exact integer reduction past it.
 */
#ifndef AMPC_MOD_MATH_H
#define AMPC_MOD_MATH_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "nn_math.h"

/* Whether fmod(x, y) needs the exact reduction: both finite, y nonzero and
 * the quotient at least 2^23 (its rounding could then lose integer
 * bits). */
AMPC_HOST_DEVICE int
ampc_fmod_is_slow(float x, float y)
{
    float ax = fabsf(x), ay = fabsf(y);
    return (ax / ay >= 8388608.0f) & (ax < INFINITY) & (ay > 0.0f);
}

/* fmod for |x / y| < 2^23 and the special values, branch-free: n =
 * trunc(|x| / |y|) is the quotient's integer part or one more (the
 * division rounds up to the next integer at most), so |x| - n |y| is
 * exact in the fma, and one |y| added back when it came out negative is
 * exact too.  n goes through int32 (a conversion that vectorises, where
 * truncf does not for gcc); a quotient out of range is read as 0, for the
 * lanes that ampc_fmod_exact_f32 or the special values replace.  y = 0, x
 * = +-inf or NaN gives NaN, y = +-inf gives x. */
AMPC_HOST_DEVICE float
ampc_fmod_fast_f32(float x, float y)
{
    float ax = fabsf(x), ay = fabsf(y);
    float q = ax / ay;
    float n = (float)(int32_t)ampc_select_f32(q < 8388608.0f, q, 0.0f);
    float r = AMPC_FMA(-n, ay, ax);
    r = ampc_select_f32(r < 0.0f, AMPC_ADD(r, ay), r);
    r = ampc_select_f32(ay == INFINITY, ax, r);
    r = ampc_select_f32(!(ay > 0.0f) | !(ax < INFINITY), NAN, r);
    return copysignf(r, x);
}

/* fmod for finite x and finite nonzero y, exactly: the significands as
 * integers, the dividend's shifted up by the exponents' difference
 * (reduced mod my 40 bits at a time, within 64 bits), the remainder scaled
 * by y's exponent (in two powers of two where the result is subnormal). */
AMPC_HOST_DEVICE float
ampc_fmod_exact_f32(float x, float y)
{
    uint32_t ux = ampc_f32_bits(x) & 0x7fffffffu;
    uint32_t uy = ampc_f32_bits(y) & 0x7fffffffu;
    if (ux < uy) {
        return x;
    }
    int32_t ex = (int32_t)(ux >> 23), ey = (int32_t)(uy >> 23);
    uint64_t mx = (ux & 0x007fffffu) | (ex != 0 ? 0x00800000u : 0u);
    uint64_t my = (uy & 0x007fffffu) | (ey != 0 ? 0x00800000u : 0u);
    ex += ex == 0;                  /* a subnormal's exponent is 1's */
    ey += ey == 0;
    uint64_t r = mx % my;
    for (int32_t d = ex - ey; d > 0; d -= 40) {
        r = (r << (d < 40 ? d : 40)) % my;
    }
    float f = (float)r;             /* < 2^24: exact */
    float v;
    if (ey >= 24) {
        v = f * ampc_f32_from_bits((uint32_t)(ey - 23) << 23);
    }
    else {
        v = f * ampc_f32_from_bits((uint32_t)(ey + 1) << 23) *
            5.96046448e-08f;        /* 2^-24 */
    }
    return copysignf(v, x);
}

AMPC_HOST_DEVICE float
ampc_fmod_f32(float x, float y)
{
    return ampc_fmod_is_slow(x, y) ? ampc_fmod_exact_f32(x, y)
                                   : ampc_fmod_fast_f32(x, y);
}

/* PyTorch's remainder from an fmod m: m + y when m is nonzero and its
 * sign differs from y's (torch.remainder(-0., 1.) = -0.). */
AMPC_HOST_DEVICE float
ampc_remainder_from_fmod_f32(float m, float y)
{
    int flip = (m != 0.0f) & ((m < 0.0f) != (y < 0.0f));
    return ampc_select_f32(flip, AMPC_ADD(m, y), m);
}

AMPC_HOST_DEVICE float
ampc_remainder_f32(float x, float y)
{
    return ampc_remainder_from_fmod_f32(ampc_fmod_f32(x, y), y);
}

/* C's a % b, total: b = -1 gives 0 (INT64_MIN % -1 would trap), b = 0
 * gives a (the CPU ops raise PyTorch's ZeroDivisionError before; the
 * CUDA kernels do not check, as PyTorch's do not). */
AMPC_HOST_DEVICE int64_t
ampc_fmod_i64(int64_t a, int64_t b)
{
    if (b == 0) {
        return a;
    }
    return b == -1 ? 0 : a % b;
}

/* Python's a % b: the divisor's sign (r + b cannot overflow: the signs
 * differ). */
AMPC_HOST_DEVICE int64_t
ampc_remainder_i64(int64_t a, int64_t b)
{
    int64_t r = ampc_fmod_i64(a, b);
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

#endif /* AMPC_MOD_MATH_H */
