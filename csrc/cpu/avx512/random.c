/* random.c - normal draws (randn, normal_) with AVX-512: Philox4x32-10 for
 * 16 blocks at once (a block per 32-bit lane), then csrc/philox.h's
 * Box-Muller on 8 doubles at a time: its log, sin and cos polynomials, the
 * same IEEE operations in the same order and no FMA (gcc contracts none
 * under -std=c11 -ffp-contract=off), so every value is ref's bit for bit.
 * Elements before the first whole block and after the last group of 16
 * blocks, and the other kinds, go to the portable kernel.
 */
#if defined(__x86_64__)

#include <immintrin.h>

#include "cpu/cpu.h"
#include "philox.h"

#define BLOCKS 16                   /* Philox blocks per vector step */
#define GROUP (BLOCKS * 4)          /* elements per vector step */
#define CHUNK 4096                  /* elements per thread task */
#define PARALLEL 16384              /* fewer elements: one thread */

typedef struct {
    uint64_t seed;
    double lo, hi;                  /* mean and standard deviation */
} normal_args;

// ----------------------------------------------------------------------------
// Philox4x32-10, 16 counters at once

/* hi:lo = a * m per 32-bit lane (m's lanes all equal) */
static AMPC_TARGET_AVX512 void
mulhilo(__m512i a, __m512i m, __m512i *hi, __m512i *lo)
{
    __m512i even = _mm512_mul_epu32(a, m);
    __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

/* The words w[0..3] of the blocks with counters ctr .. ctr + 15. */
static AMPC_TARGET_AVX512 void
philox16(uint64_t seed, uint64_t ctr, __m512i w[4])
{
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                           11, 12, 13, 14, 15);
    __m512i lo32 = _mm512_set1_epi32((int)(uint32_t)ctr);
    __m512i c0 = _mm512_add_epi32(lo32, lane);
    /* a lane whose low word wrapped carries into the high word */
    __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lo32);
    __m512i c1 = _mm512_mask_add_epi32(
        _mm512_set1_epi32((int)(uint32_t)(ctr >> 32)), carry,
        _mm512_set1_epi32((int)(uint32_t)(ctr >> 32)), _mm512_set1_epi32(1));
    __m512i c2 = _mm512_set1_epi32((int)AMPC_RAND_NORMAL);
    __m512i c3 = _mm512_setzero_si512();
    const __m512i m0 = _mm512_set1_epi32((int)AMPC_PHILOX_M0);
    const __m512i m1 = _mm512_set1_epi32((int)AMPC_PHILOX_M1);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += AMPC_PHILOX_W0;
            k1 += AMPC_PHILOX_W1;
        }
        __m512i hi0, lo0, hi1, lo1;
        mulhilo(c0, m0, &hi0, &lo0);
        mulhilo(c2, m1, &hi1, &lo1);
        __m512i n0 = _mm512_xor_si512(
            _mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
        __m512i n2 = _mm512_xor_si512(
            _mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
    }
    w[0] = c0;
    w[1] = c1;
    w[2] = c2;
    w[3] = c3;
}

// ----------------------------------------------------------------------------
// philox.h's transforms, 8 doubles at a time

/* The top 24 bits of 8 words, as doubles (exact). */
static AMPC_TARGET_AVX512 __m512d
top24(__m256i w)
{
    return _mm512_cvtepu32_pd(_mm256_srli_epi32(w, 8));
}

/* ampc_rand_log */
static AMPC_TARGET_AVX512 __m512d
log8(__m512d x)
{
    __m512i bits = _mm512_castpd_si512(x);
    __m512i e = _mm512_sub_epi64(
        _mm512_and_si512(_mm512_srli_epi64(bits, 52),
                         _mm512_set1_epi64(0x7ff)),
        _mm512_set1_epi64(1023));
    __m512d m = _mm512_castsi512_pd(_mm512_or_si512(
        _mm512_and_si512(bits, _mm512_set1_epi64(0x000fffffffffffffLL)),
        _mm512_set1_epi64(0x3ff0000000000000LL)));
    __mmask8 big = _mm512_cmp_pd_mask(m, _mm512_set1_pd(1.4142135623730951),
                                      _CMP_GT_OQ);
    m = _mm512_mask_mul_pd(m, big, m, _mm512_set1_pd(0.5));
    e = _mm512_mask_add_epi64(e, big, e, _mm512_set1_epi64(1));
    __m512d f = _mm512_sub_pd(m, _mm512_set1_pd(1.0));
    __m512d s = _mm512_div_pd(f, _mm512_add_pd(_mm512_set1_pd(2.0), f));
    __m512d z = _mm512_mul_pd(s, s);
    __m512d p = _mm512_set1_pd(AMPC_RAND_LOG_C0);
#define STEP(c) p = _mm512_add_pd(_mm512_set1_pd(c), _mm512_mul_pd(z, p));
    AMPC_RAND_LOG_HORNER(STEP)
#undef STEP
    __m512d lm = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(2.0), s),
                               _mm512_mul_pd(_mm512_mul_pd(s, z), p));
    __m512d de = _mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(e));
    return _mm512_add_pd(
        _mm512_mul_pd(de, _mm512_set1_pd(AMPC_RAND_LN2_HI)),
        _mm512_add_pd(lm, _mm512_mul_pd(de, _mm512_set1_pd(AMPC_RAND_LN2_LO))));
}

/* ampc_rand_radius of 8 pairs from their first words. */
static AMPC_TARGET_AVX512 __m512d
radius8(__m256i w)
{
    __m512d u1 = _mm512_mul_pd(
        _mm512_add_pd(top24(w), _mm512_set1_pd(1.0)),
        _mm512_set1_pd(0x1p-24));
    return _mm512_sqrt_pd(_mm512_mul_pd(_mm512_set1_pd(-2.0), log8(u1)));
}

/* ampc_rand_sin_cos_turn of 8 angle words: sines (want_sin) or cosines. */
static AMPC_TARGET_AVX512 __m512d
sin_cos8(__m256i w, int want_sin)
{
    __m512i j = _mm512_cvtepu32_epi64(_mm256_srli_epi32(w, 8));
    __m512i q = _mm512_and_si512(_mm512_srli_epi64(j, 22),
                                 _mm512_set1_epi64(3));
    __m512i r = _mm512_and_si512(j, _mm512_set1_epi64(0x3fffff));
    __mmask8 swap = _mm512_cmpgt_epu64_mask(r, _mm512_set1_epi64(0x200000));
    r = _mm512_mask_sub_epi64(r, swap, _mm512_set1_epi64(0x400000), r);
    __m512d x = _mm512_mul_pd(
        _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(r)),
                      _mm512_set1_pd(0x1p-22)),
        _mm512_set1_pd(1.5707963267948966));
    __m512d z = _mm512_mul_pd(x, x);
    __m512d ps = _mm512_set1_pd(AMPC_RAND_SIN_C0);
    __m512d pc = _mm512_set1_pd(AMPC_RAND_COS_C0);
#define STEP_S(c) ps = _mm512_add_pd(_mm512_set1_pd(c), _mm512_mul_pd(z, ps));
#define STEP_C(c) pc = _mm512_add_pd(_mm512_set1_pd(c), _mm512_mul_pd(z, pc));
    AMPC_RAND_SIN_HORNER(STEP_S)
    AMPC_RAND_COS_HORNER(STEP_C)
#undef STEP_S
#undef STEP_C
    __m512d sin_v = _mm512_add_pd(x, _mm512_mul_pd(_mm512_mul_pd(x, z), ps));
    __m512d cos_v = _mm512_sub_pd(_mm512_set1_pd(1.0), _mm512_mul_pd(z, pc));
    /* q odd: the other function; q's sign rule as in the scalar code */
    __mmask8 q_odd = _mm512_test_epi64_mask(q, _mm512_set1_epi64(1));
    __mmask8 q_hi = _mm512_cmpge_epu64_mask(q, _mm512_set1_epi64(2));
    __mmask8 q1 = _mm512_cmpeq_epu64_mask(q, _mm512_set1_epi64(1));
    __mmask8 q2 = _mm512_cmpeq_epu64_mask(q, _mm512_set1_epi64(2));
    __mmask8 of_sin = want_sin ? (__mmask8)~q_odd : q_odd;
    __mmask8 neg = want_sin ? q_hi : (__mmask8)(q1 | q2);
    __m512d v = _mm512_mask_blend_pd((__mmask8)(of_sin ^ swap), cos_v,
                                     sin_v);
    return _mm512_castsi512_pd(_mm512_mask_xor_epi64(
        _mm512_castpd_si512(v), neg, _mm512_castpd_si512(v),
        _mm512_set1_epi64((long long)0x8000000000000000ULL)));
}

// ----------------------------------------------------------------------------
// the kernel

/* Elements g0 .. g0 + 63 (g0 a multiple of 4) as doubles, in order. */
static AMPC_TARGET_AVX512 void
normal_group(const normal_args *a, uint64_t g0, double out[GROUP])
{
    __m512i w[4];
    philox16(a->seed, g0 >> 2, w);
    double v[4][BLOCKS];            /* v[j][b]: element 4b + j */
    for (int h = 0; h < 2; h++) {
        __m256i w0 = h ? _mm512_extracti64x4_epi64(w[0], 1)
                       : _mm512_castsi512_si256(w[0]);
        __m256i w1 = h ? _mm512_extracti64x4_epi64(w[1], 1)
                       : _mm512_castsi512_si256(w[1]);
        __m256i w2 = h ? _mm512_extracti64x4_epi64(w[2], 1)
                       : _mm512_castsi512_si256(w[2]);
        __m256i w3 = h ? _mm512_extracti64x4_epi64(w[3], 1)
                       : _mm512_castsi512_si256(w[3]);
        __m512d ra = radius8(w0), rb = radius8(w2);
        __m512d lo = _mm512_set1_pd(a->lo), hi = _mm512_set1_pd(a->hi);
        /* lo + hi * (rad * turn), as ampc_rand_normal_store */
        __m512d z[4] = {
            _mm512_mul_pd(ra, sin_cos8(w1, 0)),
            _mm512_mul_pd(ra, sin_cos8(w1, 1)),
            _mm512_mul_pd(rb, sin_cos8(w3, 0)),
            _mm512_mul_pd(rb, sin_cos8(w3, 1)),
        };
        for (int j = 0; j < 4; j++) {
            _mm512_storeu_pd(v[j] + 8 * h,
                             _mm512_add_pd(lo, _mm512_mul_pd(hi, z[j])));
        }
    }
    for (int b = 0; b < BLOCKS; b++) {
        for (int j = 0; j < 4; j++) {
            out[4 * b + j] = v[j][b];
        }
    }
}

/* Elements [i0, i1) of the output. */
static AMPC_TARGET_AVX512 void
normal_range(const normal_args *a, ampc_dtype dt, char *out, uint64_t offset,
             int64_t i0, int64_t i1)
{
    const size_t es = ampc_dtype_size[dt];
    int64_t i = i0;
    /* up to the first whole block */
    int64_t head = (int64_t)((4 - (offset + (uint64_t)i) % 4) % 4);
    if (head > i1 - i) {
        head = i1 - i;
    }
    if (head > 0) {
        ampc_random_ref(AMPC_RAND_NORMAL, dt, head, out + i * (int64_t)es,
                        a->seed, offset + (uint64_t)i, a->lo, a->hi);
        i += head;
    }
    double vals[GROUP];
    for (; i + GROUP <= i1; i += GROUP) {
        uint64_t g0 = offset + (uint64_t)i;
        char *p = out + i * (int64_t)es;
        if (g0 > UINT64_MAX - (GROUP - 1)) {
            /* the element index wraps past 2^64 inside the group, so its
             * blocks' counters are not consecutive */
            ampc_random_ref(AMPC_RAND_NORMAL, dt, GROUP, p, a->seed, g0,
                            a->lo, a->hi);
            continue;
        }
        normal_group(a, g0, vals);
        if (dt == AMPC_FLOAT32) {
            for (int k = 0; k < GROUP; k += 8) {
                /* RNE, as the scalar (float) conversion */
                _mm256_storeu_ps((float *)p + k,
                                 _mm512_cvtpd_ps(_mm512_loadu_pd(vals + k)));
            }
        }
        else {
            for (int k = 0; k < GROUP; k++) {
                ampc_store_f64(dt, p + k * (int64_t)es, vals[k]);
            }
        }
    }
    if (i < i1) {
        ampc_random_ref(AMPC_RAND_NORMAL, dt, i1 - i, out + i * (int64_t)es,
                        a->seed, offset + (uint64_t)i, a->lo, a->hi);
    }
}

/* out (n) contiguous (kernels.h) */
void
ampc_random_avx512(ampc_random_kind kind, ampc_dtype dt, int64_t n,
                   void *out, uint64_t seed, uint64_t offset, double lo,
                   double hi)
{
    if (kind != AMPC_RAND_NORMAL) {
        ampc_random_ref(kind, dt, n, out, seed, offset, lo, hi);
        return;
    }
    normal_args a = {seed, lo, hi};
    int64_t nchunks = (n + CHUNK - 1) / CHUNK;
    int64_t c;
#pragma omp parallel for schedule(static) if (n >= PARALLEL)
    for (c = 0; c < nchunks; c++) {
        int64_t i1 = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
        normal_range(&a, dt, (char *)out, offset, c * CHUNK, i1);
    }
}

#endif /* __x86_64__ */
