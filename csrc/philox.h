/* philox.h - the counter-based generator (Philox4x32-10, Salmon et al.,
 * "Parallel random numbers: as easy as 1, 2, 3", SC'11) and its transforms
 * to uniform, normal, integer and Bernoulli values, shared by the CPU
 * (csrc/cpu/ref/random.c) and the GPU (cuda/random.cu): element i is a
 * function of (seed, offset + i) alone, and both sides compute it with the
 * same operations in the same order, so a CUDA tensor holds the same bits
 * as a CPU tensor drawn with the same seed.
 *
 * NOTE: bit equality needs every floating-point operation here to round the
 * same way on both sides.  So: no libm (log, sin and cos are polynomials
 * below, built from + - * / and sqrt, which IEEE rounds exactly), and in
 * device code the AMPC_D* macros use __dadd_rn & co., which nvcc never
 * contracts into an FMA (it would contract a plain a * b + c).  The C side
 * is compiled with -std=c11, where gcc's default is -ffp-contract=off.
 */
#ifndef AMPC_PHILOX_H
#define AMPC_PHILOX_H

#include <stdint.h>

#include "amp_math.h"
#include "elementwise_math.h"
#include "kernels.h"

/* Element g = offset + i (mod 2^64) takes its bits from the Philox block
 * with key (seed low, seed high) and counter (c low, c high, kind, 0), where
 *   UNIFORM, BERNOULLI:  c = g / 4, word g % 4;
 *   NORMAL:              c = g / 4, words 2k, 2k + 1 with k = (g % 4) / 2,
 *                        a Box-Muller pair: even g the cosine, odd g the sine;
 *   INT:                 c = g / 2, words 2j, 2j + 1 with j = g % 2.
 * Each kind has its own counters, so a caller that advances offset by n per
 * call never reads the same word twice. */

/* log2 of the elements per Philox block for `kind`. */
AMPC_HOST_DEVICE int
ampc_philox_shift(ampc_random_kind kind)
{
    return kind == AMPC_RAND_INT ? 1 : 2;
}

#if defined(__CUDA_ARCH__)
#define AMPC_DADD(a, b) __dadd_rn((a), (b))
#define AMPC_DSUB(a, b) __dsub_rn((a), (b))
#define AMPC_DMUL(a, b) __dmul_rn((a), (b))
#define AMPC_DDIV(a, b) __ddiv_rn((a), (b))
#else
#define AMPC_DADD(a, b) ((a) + (b))
#define AMPC_DSUB(a, b) ((a) - (b))
#define AMPC_DMUL(a, b) ((a) * (b))
#define AMPC_DDIV(a, b) ((a) / (b))
#endif /* __CUDA_ARCH__ */

// ----------------------------------------------------------------------------
// Philox4x32-10

#define AMPC_PHILOX_M0 0xD2511F53u
#define AMPC_PHILOX_M1 0xCD9E8D57u
#define AMPC_PHILOX_W0 0x9E3779B9u  /* golden ratio */
#define AMPC_PHILOX_W1 0xBB67AE85u  /* sqrt(3) - 1 */

/* ctr <- Philox4x32-10(ctr, key): ten rounds, key bumped between rounds. */
AMPC_HOST_DEVICE void
ampc_philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1)
{
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += AMPC_PHILOX_W0;
            k1 += AMPC_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)AMPC_PHILOX_M0 * ctr[0];
        uint64_t p1 = (uint64_t)AMPC_PHILOX_M1 * ctr[2];
        uint32_t c0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0;
        uint32_t c2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1;
        ctr[1] = (uint32_t)p1;
        ctr[3] = (uint32_t)p0;
        ctr[0] = c0;
        ctr[2] = c2;
    }
}

/* The block w (4 words) for counter ctr of `kind`. */
AMPC_HOST_DEVICE void
ampc_philox_block(ampc_random_kind kind, uint64_t seed, uint64_t ctr,
                  uint32_t w[4])
{
    w[0] = (uint32_t)ctr;
    w[1] = (uint32_t)(ctr >> 32);
    w[2] = (uint32_t)kind;
    w[3] = 0;
    ampc_philox4x32_10(w, (uint32_t)seed, (uint32_t)(seed >> 32));
}

// ----------------------------------------------------------------------------
// log, sin and cos in double, from IEEE-exact operations only

/* The polynomials' coefficients, as lists of Horner steps p = c + z p,
 * so that the scalar code here and the AVX-512 kernel
 * (csrc/cpu/avx512/random.c) sum the very same terms. */
/* ln(m) = 2s + s z P(z), P's coefficients 2/25 (C0), 2/23, ..., 2/3 */
#define AMPC_RAND_LOG_C0 0.08
#define AMPC_RAND_LOG_HORNER(STEP)                                         \
    STEP(0.08695652173913043) STEP(0.09523809523809523)                  \
    STEP(0.10526315789473684) STEP(0.11764705882352941)                  \
    STEP(0.13333333333333333) STEP(0.15384615384615385)                  \
    STEP(0.18181818181818182) STEP(0.22222222222222222)                  \
    STEP(0.2857142857142857) STEP(0.4) STEP(0.6666666666666666)
/* ln 2 split so that e * ln2_hi is exact for |e| < 2^11 */
#define AMPC_RAND_LN2_HI 0.6931471803691238
#define AMPC_RAND_LN2_LO 1.9082149292705877e-10
/* sin x = x + x z P(z): 1/17! (C0), -1/15!, ..., -1/3! */
#define AMPC_RAND_SIN_C0 2.8114572543455206e-15
#define AMPC_RAND_SIN_HORNER(STEP)                                         \
    STEP(-7.647163731819816e-13) STEP(1.6059043836821613e-10)            \
    STEP(-2.505210838544172e-08) STEP(2.7557319223985893e-06)            \
    STEP(-0.0001984126984126984) STEP(0.008333333333333333)              \
    STEP(-0.16666666666666666)
/* cos x = 1 - z P(z): 1/18! (C0), -1/16!, ..., 1/2! */
#define AMPC_RAND_COS_C0 1.5619206968586225e-16
#define AMPC_RAND_COS_HORNER(STEP)                                         \
    STEP(-4.779477332387385e-14) STEP(1.1470745597729725e-11)            \
    STEP(-2.08767569878681e-09) STEP(2.755731922398589e-07)              \
    STEP(-2.48015873015873e-05) STEP(0.001388888888888889)               \
    STEP(-0.041666666666666664) STEP(0.5)

/* ln(x) for a normal double x > 0: x = m 2^e with m in [sqrt(1/2),
 * sqrt(2)), ln(m) = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172,
 * summed to s^25 (the next term is below 2^-60 of the result). */
AMPC_HOST_DEVICE double
ampc_rand_log(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof(bits));
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m;
    memcpy(&m, &bits, sizeof(m));
    if (m > 1.4142135623730951) {
        m = AMPC_DMUL(m, 0.5);
        e += 1;
    }
    double f = AMPC_DSUB(m, 1.0);
    double s = AMPC_DDIV(f, AMPC_DADD(2.0, f));
    double z = AMPC_DMUL(s, s);
    double p = AMPC_RAND_LOG_C0;
#define AMPC_RAND_STEP(c) p = AMPC_DADD((c), AMPC_DMUL(z, p));
    AMPC_RAND_LOG_HORNER(AMPC_RAND_STEP)
#undef AMPC_RAND_STEP
    double lm = AMPC_DADD(AMPC_DMUL(2.0, s), AMPC_DMUL(AMPC_DMUL(s, z), p));
    double de = (double)e;
    return AMPC_DADD(AMPC_DMUL(de, AMPC_RAND_LN2_HI),
                     AMPC_DADD(lm, AMPC_DMUL(de, AMPC_RAND_LN2_LO)));
}

/* sin and cos of x in [0, pi/4]: Taylor series to x^17 and x^18 (the next
 * terms are below 2^-57). */
AMPC_HOST_DEVICE double
ampc_rand_sin_small(double x)
{
    double z = AMPC_DMUL(x, x);
    double p = AMPC_RAND_SIN_C0;
#define AMPC_RAND_STEP(c) p = AMPC_DADD((c), AMPC_DMUL(z, p));
    AMPC_RAND_SIN_HORNER(AMPC_RAND_STEP)
#undef AMPC_RAND_STEP
    return AMPC_DADD(x, AMPC_DMUL(AMPC_DMUL(x, z), p));
}

AMPC_HOST_DEVICE double
ampc_rand_cos_small(double x)
{
    double z = AMPC_DMUL(x, x);
    double p = AMPC_RAND_COS_C0;
#define AMPC_RAND_STEP(c) p = AMPC_DADD((c), AMPC_DMUL(z, p));
    AMPC_RAND_COS_HORNER(AMPC_RAND_STEP)
#undef AMPC_RAND_STEP
    return AMPC_DSUB(1.0, AMPC_DMUL(z, p));
}

/* sin (want_sin) or cos of theta = 2 pi j / 2^24, j in [0, 2^24): theta =
 * q pi/2 + phi with the quadrant q from j's top bits, and phi > pi/4
 * reflected to pi/2 - phi (sin and cos trade places), so the series only
 * see [0, pi/4] and only the one needed is summed.  Exact bit logic: the
 * result is one series, negated or not. */
AMPC_HOST_DEVICE double
ampc_rand_sin_cos_turn(uint32_t j, int want_sin)
{
    uint32_t q = (j >> 22) & 3u;
    uint32_t r = j & 0x3fffffu;
    int swap = r > 0x200000u;
    if (swap) {
        r = 0x400000u - r;
    }
    double x = AMPC_DMUL((double)r * 0x1p-22, 1.5707963267948966);
    /* sin(theta) = s, c, -s, -c and cos(theta) = c, -s, -c, s for q = 0..3,
     * with s, c = sin(phi), cos(phi) */
    int of_sin = want_sin ? !(q & 1u) : (int)(q & 1u);
    int neg = want_sin ? q >= 2 : (q == 1 || q == 2);
    double v = (of_sin != swap) ? ampc_rand_sin_small(x)
                                : ampc_rand_cos_small(x);
    return neg ? -v : v;
}

// ----------------------------------------------------------------------------
// one value from the words of a block

/* The largest float32 below f (f not NaN): what nextafterf(f, -inf)
 * gives, from the bits. */
AMPC_HOST_DEVICE float
ampc_f32_step_down(float f)
{
    uint32_t u = ampc_f32_bits(f);
    if ((u & 0x7fffffffu) == 0) {
        return ampc_f32_from_bits(0x80000001u);
    }
    return ampc_f32_from_bits((u & 0x80000000u) ? u + 1 : u - 1);
}

/* The largest value of dt below the float16/bfloat16 pattern h. */
AMPC_HOST_DEVICE uint16_t
ampc_half_step_down(uint16_t h)
{
    if ((h & 0x7fffu) == 0) {
        return 0x8001u;                 /* +-0 -> the negative subnormal */
    }
    return (h & 0x8000u) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* Stores v (< hi) as dt, stepping down where rounding reached hi: uniform
 * draws lie in [lo, hi) in the stored dtype too. */
AMPC_HOST_DEVICE void
ampc_rand_store_below(ampc_dtype dt, void *p, double v, double hi)
{
    ampc_store_f64(dt, p, v);
    if (dt == AMPC_FLOAT32) {
        float *f = (float *)p;
        while ((double)*f >= hi) {
            *f = ampc_f32_step_down(*f);
        }
    }
    else if (dt == AMPC_FLOAT16 || dt == AMPC_BFLOAT16) {
        uint16_t *h = (uint16_t *)p;
        while ((double)ampc_load_f32(dt, h) >= hi) {
            *h = ampc_half_step_down(*h);
        }
    }
}

/* Box-Muller: elements 2m and 2m + 1 (g's pair, words k and k + 1 of its
 * block) share the radius sqrt(-2 log u1), u1 in (0, 1] from word k (so
 * the log stays finite); the CPU computes it once per pair. */
AMPC_HOST_DEVICE double
ampc_rand_radius(uint64_t g, const uint32_t w[4])
{
    unsigned k = (unsigned)(g & 2);
    double u1 = (double)((w[k] >> 8) + 1) * 0x1p-24;
    return sqrt(AMPC_DMUL(-2.0, ampc_rand_log(u1)));
}

/* Normal element g (mean lo, std hi) from its pair's radius: the sine
 * (odd g) or cosine (even g) of the pair's angle, word k + 1. */
AMPC_HOST_DEVICE void
ampc_rand_normal_store(ampc_dtype dt, void *p, uint64_t g,
                       const uint32_t w[4], double rad, double lo, double hi)
{
    unsigned k = (unsigned)(g & 2);
    double z = AMPC_DMUL(rad, ampc_rand_sin_cos_turn(w[k + 1] >> 8,
                                                     (int)(g & 1)));
    ampc_store_f64(dt, p, AMPC_DADD(lo, AMPC_DMUL(hi, z)));
}

/* Element g of `kind`, from its block w, stored as dt at p. */
AMPC_HOST_DEVICE void
ampc_rand_draw(ampc_random_kind kind, ampc_dtype dt, void *p, uint64_t g,
               const uint32_t w[4], double lo, double hi)
{
    switch (kind) {
    case AMPC_RAND_UNIFORM: {
        double u = (double)(w[g & 3] >> 8) * 0x1p-24;
        if (hi > lo) {
            double v = AMPC_DADD(lo, AMPC_DMUL(AMPC_DSUB(hi, lo), u));
            ampc_rand_store_below(dt, p, v, hi);
        }
        else {
            ampc_store_f64(dt, p, lo);
        }
        break;
    }
    case AMPC_RAND_NORMAL:
        ampc_rand_normal_store(dt, p, g, w, ampc_rand_radius(g, w), lo, hi);
        break;
    case AMPC_RAND_INT: {
        /* 64 bits modulo the span: the bias is below span / 2^64, under
         * 2^-32 for any span below 2^32 */
        unsigned j = (unsigned)(g & 1) * 2;
        uint64_t bits = (uint64_t)w[j] | (uint64_t)w[j + 1] << 32;
        int64_t a = ampc_f64_to_i64(lo), b = ampc_f64_to_i64(hi);
        uint64_t span = b > a ? (uint64_t)b - (uint64_t)a : 0;
        int64_t v = span ? (int64_t)((uint64_t)a + bits % span) : a;
        if (dt == AMPC_INT64) {
            *(int64_t *)p = v;
        }
        else {
            ampc_store_f64(dt, p, (double)v);
        }
        break;
    }
    default:
        ampc_store_f64(dt, p, (double)w[g & 3] * 0x1p-32 < lo ? 1.0 : 0.0);
        break;
    }
}

#endif /* AMPC_PHILOX_H */
