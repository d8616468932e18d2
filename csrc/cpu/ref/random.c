/* random.c - uniform, normal, integer and Bernoulli draws from Philox4x32-10
 * (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), a
 * counter-based generator: element i is a function of (seed, offset + i)
 * alone, so the result never depends on the thread count.
 */
#include <math.h>

#include "cpu/loops.h"

/* Element g = offset + i (mod 2^64) takes its bits from the Philox block
 * with key (seed low, seed high) and counter (c low, c high, kind, 0), where
 *   UNIFORM, BERNOULLI:  c = g / 4, word g % 4;
 *   NORMAL:              c = g / 4, words 2k, 2k + 1 with k = (g % 4) / 2,
 *                        a Box-Muller pair: even g the cosine, odd g the sine;
 *   INT:                 c = g / 2, words 2j, 2j + 1 with j = g % 2.
 * Each kind has its own counters, so a caller that advances offset by n per
 * call never reads the same word twice. */
#define AMPC_RAND_CHUNK 4096        /* elements per thread task */
#define AMPC_RAND_PARALLEL 16384    /* fewer elements: one thread */

// ----------------------------------------------------------------------------
// Philox4x32-10

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u       /* golden ratio */
#define PHILOX_W1 0xBB67AE85u       /* sqrt(3) - 1 */

/* ctr <- Philox4x32-10(ctr, key): ten rounds, key bumped between rounds. */
static void
philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1)
{
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)PHILOX_M0 * ctr[0];
        uint64_t p1 = (uint64_t)PHILOX_M1 * ctr[2];
        uint32_t c0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0;
        uint32_t c2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1;
        ctr[1] = (uint32_t)p1;
        ctr[3] = (uint32_t)p0;
        ctr[0] = c0;
        ctr[2] = c2;
    }
}

// ----------------------------------------------------------------------------
// one value from the words of a block

/* The largest value of dt below the float16/bfloat16 pattern h. */
static uint16_t
half_step_down(uint16_t h)
{
    if ((h & 0x7fffu) == 0) {
        return 0x8001u;                 /* +-0 -> the negative subnormal */
    }
    return (h & 0x8000u) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* Stores v (< hi) as dt, stepping down where rounding reached hi: uniform
 * draws lie in [lo, hi) in the stored dtype too. */
static void
store_below(ampc_dtype dt, void *p, double v, double hi)
{
    ampc_store_f64(dt, p, v);
    if (dt == AMPC_FLOAT32) {
        float *f = (float *)p;
        while ((double)*f >= hi) {
            *f = nextafterf(*f, -INFINITY);
        }
    }
    else if (dt == AMPC_FLOAT16 || dt == AMPC_BFLOAT16) {
        uint16_t *h = (uint16_t *)p;
        while ((double)ampc_load_f32(dt, h) >= hi) {
            *h = half_step_down(*h);
        }
    }
}

static void
draw(ampc_random_kind kind, ampc_dtype dt, void *p, uint64_t g,
     const uint32_t w[4], double lo, double hi)
{
    switch (kind) {
    case AMPC_RAND_UNIFORM: {
        double u = (double)(w[g & 3] >> 8) * 0x1p-24;
        double v = lo + (hi - lo) * u;
        if (hi > lo) {
            store_below(dt, p, v, hi);
        }
        else {
            ampc_store_f64(dt, p, lo);
        }
        break;
    }
    case AMPC_RAND_NORMAL: {
        unsigned k = (unsigned)(g & 2);
        /* u1 in (0, 1] keeps log() finite */
        float u1 = (float)((w[k] >> 8) + 1) * 0x1p-24f;
        float u2 = (float)(w[k + 1] >> 8) * 0x1p-24f;
        float rad = sqrtf(-2.0f * logf(u1));
        float theta = 6.28318530717958647692f * u2;
        float z = (g & 1) ? rad * sinf(theta) : rad * cosf(theta);
        ampc_store_f64(dt, p, lo + hi * (double)z);
        break;
    }
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

// ----------------------------------------------------------------------------
// CPU reference

/* out (n) contiguous */
void
ampc_random_ref(ampc_random_kind kind, ampc_dtype dt, int64_t n, void *out,
                uint64_t seed, uint64_t offset, double lo, double hi)
{
    size_t es = ampc_dtype_size[dt];
    int64_t nchunks = (n + AMPC_RAND_CHUNK - 1) / AMPC_RAND_CHUNK;
    int64_t c;

#pragma omp parallel for schedule(static) if (n >= AMPC_RAND_PARALLEL)
    for (c = 0; c < nchunks; c++) {
        int64_t i1 = (c + 1) * AMPC_RAND_CHUNK < n ? (c + 1) * AMPC_RAND_CHUNK
                                                   : n;
        uint32_t w[4] = {0, 0, 0, 0};
        uint64_t have = 0;
        int valid = 0;
        for (int64_t i = c * AMPC_RAND_CHUNK; i < i1; i++) {
            uint64_t g = offset + (uint64_t)i;
            uint64_t ctr = kind == AMPC_RAND_INT ? g >> 1 : g >> 2;
            if (!valid || ctr != have) {
                w[0] = (uint32_t)ctr;
                w[1] = (uint32_t)(ctr >> 32);
                w[2] = (uint32_t)kind;
                w[3] = 0;
                philox4x32_10(w, (uint32_t)seed, (uint32_t)(seed >> 32));
                have = ctr;
                valid = 1;
            }
            draw(kind, dt, (char *)out + i * (int64_t)es, g, w, lo, hi);
        }
    }
}
