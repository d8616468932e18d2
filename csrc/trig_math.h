/* trig_math.h - sin, cos and tan in float32, for the CPU loops
 * (csrc/cpu/math_loops.h) and the CUDA kernels (cuda/elementwise.cu) through
 * elementwise_math.h.  Our own, with no libm: x = q pi/2 + r with |r| <=
 * pi/4 (plus a little slack), then sin r or cos r by polynomial
 * (tools/fit_unary_math.py) with the quadrant q mod 4 choosing which and
 * the sign, and tan r or -1 / tan r by q's parity.  The reduction is
 * branch-free Cody-Waite up to AMPC_TRIG_FAST_MAX, so the CPU loop
 * vectorises; past it (and up to FLT_MAX) an exact Payne-Hanek reduction in
 * integers, which the CPU runs for the (rare) blocks holding a huge element
 * and the GPU branches to: the same bits either way.
 */
#ifndef AMPC_TRIG_MATH_H
#define AMPC_TRIG_MATH_H

#include <math.h>
#include <stdint.h>

#include "amp_math.h"
#include "nn_math.h"

/* Up to here q < 2^16 and pi/2 in three float parts (72 bits) leaves
 * q (pi/2 - C1 - C2 - C3) far below the smallest |r| a float reaches. */
#define AMPC_TRIG_FAST_MAX 65536.0f

/* sin(r + n pi/2) for |r| <= 0.8: sin r = r + r^3 S(r^2) or cos r = 1 -
 * r^2/2 + r^4 C(r^2) by n's low bit, negated by its second; sin(+-0) =
 * +-0. */
AMPC_HOST_DEVICE float
ampc_trig_poly_f32(float r, uint32_t n)
{
    float s = AMPC_MUL(r, r);
    float ps = AMPC_FMA(2.72378998e-06f, s, -1.9839991e-4f);
    ps = AMPC_FMA(ps, s, 8.33333191e-3f);
    ps = AMPC_FMA(ps, s, -0.166666672f);
    float sn = AMPC_FMA(AMPC_MUL(ps, s), r, r);
    sn = ampc_select_f32(r == 0.0f, r, sn);     /* -0 + +0 would be +0 */
    float pc = AMPC_FMA(2.45381161e-05f, s, -1.38882559e-3f);
    pc = AMPC_FMA(pc, s, 4.16666642e-2f);
    pc = AMPC_FMA(pc, s, -0.5f);
    float cs = AMPC_FMA(pc, s, 1.0f);
    float v = ampc_select_f32(n & 1u, cs, sn);
    return ampc_f32_from_bits(ampc_f32_bits(v) ^ ((n & 2u) << 30));
}

/* tan(r + n pi/2) for |r| <= 0.8: t = tan r = r + r^3 T(r^2) for an even
 * n; for an odd one -1 / tan r = y (1 + e + y tl) with y = -1 / t rounded,
 * e = 1 + y t exact by fma and tl what t's rounding lost (Fast2Sum), so
 * only the last fma rounds at full size.  tan(+-0) = +-0. */
AMPC_HOST_DEVICE float
ampc_tan_poly_f32(float r, uint32_t n)
{
    float s = AMPC_MUL(r, r);
    float p = AMPC_FMA(0.00458400231f, s, -0.000327807007f);
    p = AMPC_FMA(p, s, 0.0111615537f);
    p = AMPC_FMA(p, s, 0.0211580731f);
    p = AMPC_FMA(p, s, 0.0540836044f);
    p = AMPC_FMA(p, s, 0.133324578f);
    p = AMPC_FMA(p, s, 0.333333552f);
    float c = AMPC_MUL(AMPC_MUL(p, s), r);
    float t = AMPC_ADD(r, c);
    float tl = AMPC_SUB(c, AMPC_SUB(t, r));
    float y = -1.0f / t;
    float e = AMPC_FMA(y, t, 1.0f);
    float cot = AMPC_FMA(y, AMPC_FMA(y, tl, e), y);
    return ampc_select_f32(n & 1u, cot, t);
}

/* sin (kind 0), cos (1) or tan (2) of r + n pi/2. */
AMPC_HOST_DEVICE float
ampc_trig_kind_f32(float r, uint32_t n, uint32_t kind)
{
    return kind == 2u ? ampc_tan_poly_f32(r, n)
                      : ampc_trig_poly_f32(r, n + kind);
}

/* r = x - q pi/2 and *n = q (mod 4) for |x| <= AMPC_TRIG_FAST_MAX: q by
 * the 1.5 * 2^23 rounding trick (its low bits are q's), then pi/2 taken
 * off in three float parts, the first product exact in the fma (q = 0
 * leaves x as it is, -0 included).  inf and NaN give NaN. */
AMPC_HOST_DEVICE float
ampc_trig_reduce_f32(float x, uint32_t *n)
{
    float t = AMPC_FMA(x, 0.636619747f, 12582912.0f);
    float q = AMPC_SUB(t, 12582912.0f);
    *n = ampc_f32_bits(t);
    float r = AMPC_FMA(-q, 1.57079637f, x);
    r = AMPC_FMA(-q, -4.37113883e-08f, r);
    r = AMPC_FMA(-q, -1.71512451e-15f, r);
    return ampc_select_f32(q == 0.0f, x, r);    /* sin(-0) = -0 */
}

/* The top 32 bits of 2/pi's bits from bit sh of word k of w on. */
AMPC_HOST_DEVICE uint32_t
ampc_trig_bits(const uint32_t *w, uint32_t k, uint32_t sh)
{
    return (uint32_t)(((((uint64_t)w[k]) << 32) | w[k + 1]) << sh >> 32);
}

/* Payne-Hanek, for a finite |x| >= 2^-7: x = m 2^e (m the 24-bit
 * significand), and x 2/pi mod 4 needs only the bits of 2/pi from weight
 * 2^(1 - e) on (the earlier ones give multiples of 4): m times 96 of them,
 * mod 2^96, is x 2/pi mod 4 in fixed point with 94 fraction bits, exact
 * to 2^-70.  Its top 64 bits give q (rounded) and the fraction, which
 * becomes r as a float times pi/2 split in two. */
AMPC_HOST_DEVICE float
ampc_trig_reduce_huge_f32(float x, uint32_t *n)
{
    /* 2/pi = 0.a2f9836e 4e441529 ... in hex, after one zero word */
    const uint32_t w[8] = {0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                           0xf534ddc0u, 0xdb629599u, 0x3c439041u,
                           0xfe5163abu};
    uint32_t u = ampc_f32_bits(x);
    uint64_t m = (u & 0x007fffffu) | 0x00800000u;
    uint32_t pos = ((u >> 23) & 0xffu) - 120u;     /* e + 30, e = exp - 150 */
    uint32_t k = pos >> 5, sh = pos & 31u;
    uint64_t p1 = m * ampc_trig_bits(w, k + 1, sh);
    uint64_t p2 = m * ampc_trig_bits(w, k + 2, sh);
    uint64_t lo = p2 + (p1 << 32);
    uint32_t hi = (uint32_t)(m * ampc_trig_bits(w, k, sh)) +
                  (uint32_t)(p1 >> 32) + (uint32_t)(lo < p2);
    uint64_t top = ((uint64_t)hi << 32) | (lo >> 32);
    uint64_t q = (top + (1ull << 61)) >> 62;
    int64_t f = (int64_t)(top - (q << 62));
    float fh = (float)f;
    float fl = (float)(f - (int64_t)fh);
    /* (fh + fl) 2^-62 pi/2 */
    float r = AMPC_FMA(fh, -9.47839643e-27f, AMPC_MUL(fl, 3.40612167e-19f));
    r = AMPC_FMA(fh, 3.40612167e-19f, r);
    int neg = (int)(u >> 31);
    *n = neg ? 0u - (uint32_t)q : (uint32_t)q;
    return neg ? -r : r;
}

AMPC_HOST_DEVICE int
ampc_trig_is_huge(float x)
{
    float a = fabsf(x);
    return (a > AMPC_TRIG_FAST_MAX) & (a <= 3.40282347e+38f);
}

/* sin x (kind 0), cos x (1) or tan x (2) for |x| <= AMPC_TRIG_FAST_MAX
 * and the non-finite x: branch-free. */
AMPC_HOST_DEVICE float
ampc_trig_fast_f32(float x, uint32_t kind)
{
    uint32_t n;
    float r = ampc_trig_reduce_f32(x, &n);
    return ampc_trig_kind_f32(r, n, kind);
}

/* sin x, cos x or tan x for every x. */
AMPC_HOST_DEVICE float
ampc_trig_f32(float x, uint32_t kind)
{
    uint32_t n;
    float r = ampc_trig_is_huge(x) ? ampc_trig_reduce_huge_f32(x, &n)
                                   : ampc_trig_reduce_f32(x, &n);
    return ampc_trig_kind_f32(r, n, kind);
}

#if !defined(__CUDACC__)
/* The CPU loop over a block (csrc/cpu/loops.h's, AMPC_BLOCK long): one
 * without a huge element, nearly always, runs the vectorised fast path,
 * one with any the complete function (a second pass over the huge ones
 * alone could not: o may be a). */
AMPC_HOST_DEVICE void
ampc_trig_loop(uint32_t kind, int64_t n, const float *a, float *o)
{
    int64_t i;
    int huge = 0;
    for (i = 0; i < n; i++) {
        huge |= ampc_trig_is_huge(a[i]);
    }
    if (huge) {
        for (i = 0; i < n; i++) {
            o[i] = ampc_trig_f32(a[i], kind);
        }
        return;
    }
    for (i = 0; i < n; i++) {
        o[i] = ampc_trig_fast_f32(a[i], kind);
    }
}
#endif

#endif /* AMPC_TRIG_MATH_H */
