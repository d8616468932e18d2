/* amp.c - the AMP kernels' per-run parts for AVX-512 (F, BW, VL): 16 lanes
 * per vector, float16 through vcvtph2ps/vcvtps2ph, bfloat16 through integer
 * lanes, masked tails.  The split over threads is cpu/ref/amp.c's; results
 * are bit-identical to the portable parts.
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "cpu/cpu.h"

/* RNE, without touching the MXCSR flags. */
#define AMPC_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* Full-vector loops prefetch this many bytes ahead: the hardware
 * prefetchers alone left the 16-bit paths (whose longer per-vector work
 * keeps fewer loads in flight) at about 60% of memcpy's bandwidth on
 * data larger than the cache; this brings them to 75-95%. */
#define AMP_PREFETCH 4096

static AMPC_TARGET_AVX512 __mmask16
tail_mask(int64_t m)
{
    return (__mmask16)((1u << m) - 1u);
}

// ----------------------------------------------------------------------------
// telemetry of one vector
//
// ia / oa: the input and output bits with the sign cleared (32-bit lanes for
// float32, 16-bit lanes for float16/bfloat16); k: the live lanes.  Called
// only for a vector that holds something special, which is rare.

static AMPC_TARGET_AVX512 void
count_x32(ampc_amp_counts *c, __m512i ia, __m512i oa, __mmask16 k)
{
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    __mmask16 zero = _mm512_mask_cmpeq_epi32_mask(k, oa,
                                                  _mm512_setzero_si512());
    __mmask16 low = _mm512_mask_cmplt_epu32_mask(
        k, oa, _mm512_set1_epi32(0x00800000));
    c->inf += __builtin_popcount(_mm512_mask_cmpeq_epi32_mask(k, ia, inf));
    c->nan += __builtin_popcount(_mm512_mask_cmpgt_epu32_mask(k, ia, inf));
    c->zero += __builtin_popcount(zero);
    c->subnormal += __builtin_popcount(low & (__mmask16)~zero);
}

static AMPC_TARGET_AVX512 void
count_x16(ampc_amp_counts *c, __m256i ia, __m256i oa, __mmask16 k,
          uint16_t inf_bits, uint16_t min_normal)
{
    const __m256i inf = _mm256_set1_epi16((short)inf_bits);
    __mmask16 zero = _mm256_mask_cmpeq_epi16_mask(k, oa,
                                                  _mm256_setzero_si256());
    __mmask16 low = _mm256_mask_cmplt_epu16_mask(
        k, oa, _mm256_set1_epi16((short)min_normal));
    c->inf += __builtin_popcount(_mm256_mask_cmpeq_epi16_mask(k, ia, inf));
    c->nan += __builtin_popcount(_mm256_mask_cmpgt_epu16_mask(k, ia, inf));
    c->zero += __builtin_popcount(zero);
    c->subnormal += __builtin_popcount(low & (__mmask16)~zero);
}

// ----------------------------------------------------------------------------
// bfloat16 narrowing, as ampc_f32_to_bf16: RNE, NaN kept quiet

static AMPC_TARGET_AVX512 __m256i
f32x16_to_bf16(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(abs,
                                            _mm512_set1_epi32(0x7f800000));
    __m512i bias = _mm512_add_epi32(
        _mm512_and_si512(hi, _mm512_set1_epi32(1)),
        _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

// ----------------------------------------------------------------------------
// unscale-and-check: x (n) of one dtype, in place
//
// One vector per step: load, test the input's bits for inf/NaN, multiply in
// float32 (unless inv_scale is 1: then nothing is written), round once,
// store; the telemetry compares the bits it already holds, so nothing is
// read twice.  Full vectors run unmasked; the mask k covers the tail.
// NOTE: non-temporal stores for calls larger than the cache were measured
// slower than plain ones on the project's machines (which also keep part of
// a large call in their big L3), so the stores are plain.

static AMPC_TARGET_AVX512 AMPC_ALWAYS_INLINE __mmask16
step_f32(float *x, __mmask16 k, __m512 inv, int write, ampc_amp_counts *c)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512 v = _mm512_maskz_loadu_ps(k, x);
    __m512i ia = _mm512_and_si512(_mm512_castps_si512(v), absm);
    __mmask16 nf = _mm512_cmpge_epu32_mask(ia,
                                           _mm512_set1_epi32(0x7f800000));
    __m512 o = v;
    if (write) {
        o = _mm512_mul_ps(v, inv);
        _mm512_mask_storeu_ps(x, k, o);
    }
    if (c != NULL) {
        __m512i oa = _mm512_and_si512(_mm512_castps_si512(o), absm);
        if (nf | _mm512_mask_cmplt_epu32_mask(
                     k, oa, _mm512_set1_epi32(0x00800000))) {
            count_x32(c, ia, oa, k);
        }
    }
    return nf;
}

static AMPC_TARGET_AVX512 int
unscale_f32(float *x, int64_t n, float inv_scale, ampc_amp_counts *c)
{
    const __m512 inv = _mm512_set1_ps(inv_scale);
    int write = inv_scale != 1.0f;
    __mmask16 nonfinite = 0;
    int64_t i = 0;
    if (write) {
        for (; i + 16 <= n; i += 16) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nonfinite |= step_f32(x + i, 0xffff, inv, 1, c);
        }
    }
    else {
        for (; i + 16 <= n; i += 16) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nonfinite |= step_f32(x + i, 0xffff, inv, 0, c);
        }
    }
    if (i < n) {
        nonfinite |= step_f32(x + i, tail_mask(n - i), inv, write, c);
    }
    return nonfinite != 0;
}

static AMPC_TARGET_AVX512 AMPC_ALWAYS_INLINE __mmask16
step_x16(uint16_t *x, __mmask16 k, __m512 inv, int is_f16, int write,
         ampc_amp_counts *c)
{
    const __m256i absm = _mm256_set1_epi16(0x7fff);
    uint16_t inf_bits = is_f16 ? 0x7c00 : 0x7f80;
    uint16_t min_normal = is_f16 ? 0x0400 : 0x0080;
    __m256i h = _mm256_maskz_loadu_epi16(k, x);
    __m256i ia = _mm256_and_si256(h, absm);
    __mmask16 nf = _mm256_cmpge_epu16_mask(
        ia, _mm256_set1_epi16((short)inf_bits));
    __m256i oh = h;
    if (write) {
        if (is_f16) {
            __m512 o = _mm512_mul_ps(_mm512_cvtph_ps(h), inv);
            oh = _mm512_cvtps_ph(o, AMPC_RNE);
        }
        else {
            __m512 f = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            oh = f32x16_to_bf16(_mm512_mul_ps(f, inv));
        }
        _mm256_mask_storeu_epi16(x, k, oh);
    }
    if (c != NULL) {
        __m256i oa = _mm256_and_si256(oh, absm);
        if (nf | _mm256_mask_cmplt_epu16_mask(
                     k, oa, _mm256_set1_epi16((short)min_normal))) {
            count_x16(c, ia, oa, k, inf_bits, min_normal);
        }
    }
    return nf;
}

/* The loops of one 16-bit format (is_f16 is a constant at each call). */
static AMPC_TARGET_AVX512 AMPC_ALWAYS_INLINE int
unscale_x16_loops(uint16_t *x, int64_t n, float inv_scale,
                  ampc_amp_counts *c, int is_f16)
{
    const __m512 inv = _mm512_set1_ps(inv_scale);
    int write = inv_scale != 1.0f;
    __mmask16 nonfinite = 0;
    int64_t i = 0;
    if (write) {
        for (; i + 16 <= n; i += 16) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nonfinite |= step_x16(x + i, 0xffff, inv, is_f16, 1, c);
        }
    }
    else {
        for (; i + 16 <= n; i += 16) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nonfinite |= step_x16(x + i, 0xffff, inv, is_f16, 0, c);
        }
    }
    if (i < n) {
        nonfinite |= step_x16(x + i, tail_mask(n - i), inv, is_f16, write,
                              c);
    }
    return nonfinite != 0;
}

/* bfloat16, 32 elements per step.  Widening is an interleave with zeros
 * (unpacklo/hi put each value in the top half of a float32 lane, in an
 * order permuted within 128-bit lanes) and narrowing a saturating pack
 * (packus undoes that permutation): three instructions instead of eight
 * conversions.  The NaN repair of the rounding is needed only where an
 * input is not finite or inv_scale is 0 or not finite (inf * 0, NaN);
 * `plain` says neither can happen. */
static AMPC_TARGET_AVX512 AMPC_ALWAYS_INLINE __m512i
round_bf16_lanes(__m512 v, int plain)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i bias = _mm512_add_epi32(
        _mm512_and_si512(hi, _mm512_set1_epi32(1)),
        _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    if (plain) {
        return r;
    }
    __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
        _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
}

static AMPC_TARGET_AVX512 AMPC_ALWAYS_INLINE __mmask32
step_bf16x32(uint16_t *x, __m512 inv, int write, int inv_plain,
             ampc_amp_counts *c)
{
    const __m512i absm = _mm512_set1_epi16(0x7fff);
    __m512i h = _mm512_loadu_si512(x);
    __m512i ia = _mm512_and_si512(h, absm);
    __mmask32 nf = _mm512_cmpge_epu16_mask(ia, _mm512_set1_epi16(0x7f80));
    __m512i oh = h;
    if (write) {
        __m512i z = _mm512_setzero_si512();
        __m512 lo = _mm512_mul_ps(
            _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, h)), inv);
        __m512 hi = _mm512_mul_ps(
            _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, h)), inv);
        if (inv_plain && nf == 0) {
            oh = _mm512_packus_epi32(round_bf16_lanes(lo, 1),
                                     round_bf16_lanes(hi, 1));
        }
        else {
            oh = _mm512_packus_epi32(round_bf16_lanes(lo, 0),
                                     round_bf16_lanes(hi, 0));
        }
        _mm512_storeu_si512(x, oh);
    }
    if (c != NULL) {
        const __m512i inf = _mm512_set1_epi16(0x7f80);
        __m512i oa = _mm512_and_si512(oh, absm);
        __mmask32 low = _mm512_cmplt_epu16_mask(oa, _mm512_set1_epi16(0x80));
        if (nf | low) {
            __mmask32 zero = _mm512_cmpeq_epi16_mask(oa,
                                                     _mm512_setzero_si512());
            c->inf += __builtin_popcount(_mm512_cmpeq_epi16_mask(ia, inf));
            c->nan += __builtin_popcount(_mm512_cmpgt_epu16_mask(ia, inf));
            c->zero += __builtin_popcount(zero);
            c->subnormal += __builtin_popcount(low & ~zero);
        }
    }
    return nf;
}

static AMPC_TARGET_AVX512 int
unscale_bf16(uint16_t *x, int64_t n, float inv_scale, ampc_amp_counts *c)
{
    const __m512 inv = _mm512_set1_ps(inv_scale);
    int write = inv_scale != 1.0f;
    int inv_plain = isfinite(inv_scale) && inv_scale != 0.0f;
    __mmask32 nonfinite = 0;
    int64_t i = 0;
    if (write) {
        for (; i + 32 <= n; i += 32) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nonfinite |= step_bf16x32(x + i, inv, 1, inv_plain, c);
        }
    }
    else {
        for (; i + 32 <= n; i += 32) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nonfinite |= step_bf16x32(x + i, inv, 0, inv_plain, c);
        }
    }
    /* up to 31 left: the 16-lane step, masked on the last piece */
    return (nonfinite != 0) |
           unscale_x16_loops(x + i, n - i, inv_scale, c, 0);
}

static AMPC_TARGET_AVX512 int
unscale_avx512(ampc_dtype dt, void *x, int64_t n, float inv_scale,
               ampc_amp_counts *c)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return unscale_f32((float *)x, n, inv_scale, c);
    case AMPC_FLOAT16:
        return unscale_x16_loops((uint16_t *)x, n, inv_scale, c, 1);
    default:
        return unscale_bf16((uint16_t *)x, n, inv_scale, c);
    }
}

// ----------------------------------------------------------------------------
// norm accumulators: x (n) of one dtype -> double
//
// 2, 1 and inf are vectorised (float32 lanes widened to double for the
// sums); the rarer norms go through the portable part.

static AMPC_TARGET_AVX512 __m512
load_f32x16(ampc_dtype dt, const void *x, int64_t i, __mmask16 k)
{
    if (dt == AMPC_FLOAT32) {
        return _mm512_maskz_loadu_ps(k, (const float *)x + i);
    }
    __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)x + i);
    if (dt == AMPC_FLOAT16) {
        return _mm512_cvtph_ps(h);
    }
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h),
                                                 16));
}

static AMPC_TARGET_AVX512 double
norm_avx512(ampc_dtype dt, const void *x, int64_t n, double p)
{
    if (p != 2.0 && p != 1.0 && p != INFINITY) {
        return ampc_norm_scalar(dt, x, n, p);
    }
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
    __m512 vmax = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
        __m512 v = load_f32x16(dt, x, i, k);
        if (p == INFINITY) {
            __m512 a = _mm512_castsi512_ps(
                _mm512_and_si512(_mm512_castps_si512(v), absm));
            nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
            vmax = _mm512_max_ps(vmax, a);
            continue;
        }
        if (p == 1.0) {
            v = _mm512_castsi512_ps(
                _mm512_and_si512(_mm512_castps_si512(v), absm));
        }
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(
            _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        if (p == 2.0) {
            acc0 = _mm512_fmadd_pd(lo, lo, acc0);
            acc1 = _mm512_fmadd_pd(hi, hi, acc1);
        }
        else {
            acc0 = _mm512_add_pd(acc0, lo);
            acc1 = _mm512_add_pd(acc1, hi);
        }
    }
    if (p == INFINITY) {
        return nan ? (double)NAN : (double)_mm512_reduce_max_ps(vmax);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

// ----------------------------------------------------------------------------
// the slots

static const ampc_amp_parts amp_parts_avx512 = {
    unscale_avx512, norm_avx512,
};

/* l: tensors of numel[t] elements, unscaled in place; found_inf: 1 float;
 * counts: l->n entries or NULL */
void
ampc_amp_unscale_avx512(const ampc_tensor_list *l, float inv_scale,
                        float *found_inf, ampc_amp_counts *counts)
{
    ampc_amp_unscale_run(&amp_parts_avx512, l, inv_scale, found_inf, counts);
}

/* l: tensors -> acc (l->n) */
void
ampc_grad_norm_avx512(const ampc_tensor_list *l, double p, double *acc)
{
    ampc_grad_norm_run(&amp_parts_avx512, l, p, acc);
}

#endif /* __x86_64__ */
