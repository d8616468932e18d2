/* amp.c - the AMP kernels' per-run parts for AVX2: 8 lanes per vector,
 * float16 through F16C, bfloat16 through integer lanes; tails go through
 * the portable parts.  The split over threads is cpu/ref/amp.c's; results
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

// ----------------------------------------------------------------------------
// telemetry of one vector
//
// ia / oa: the input and output bits with the sign cleared.  Called only for
// a vector that holds something special, which is rare.  Signed compares are
// safe: with the sign cleared every lane is non-negative.

static AMPC_TARGET_AVX2 void
count_x32(ampc_amp_counts *c, __m256i ia, __m256i oa)
{
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    int zero = _mm256_movemask_ps(_mm256_castsi256_ps(
        _mm256_cmpeq_epi32(oa, _mm256_setzero_si256())));
    int low = _mm256_movemask_ps(_mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), oa)));
    c->inf += __builtin_popcount(_mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpeq_epi32(ia, inf))));
    c->nan += __builtin_popcount(_mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(ia, inf))));
    c->zero += __builtin_popcount(zero);
    c->subnormal += __builtin_popcount(low & ~zero);
}

/* 16-bit lanes: movemask_epi8 gives two bits per lane. */
static AMPC_TARGET_AVX2 void
count_x16(ampc_amp_counts *c, __m128i ia, __m128i oa, uint16_t inf_bits,
          uint16_t min_normal)
{
    const __m128i inf = _mm_set1_epi16((short)inf_bits);
    int zero = _mm_movemask_epi8(_mm_cmpeq_epi16(oa, _mm_setzero_si128()));
    int low = _mm_movemask_epi8(
        _mm_cmpgt_epi16(_mm_set1_epi16((short)min_normal), oa));
    c->inf += __builtin_popcount(
                  _mm_movemask_epi8(_mm_cmpeq_epi16(ia, inf))) / 2;
    c->nan += __builtin_popcount(
                  _mm_movemask_epi8(_mm_cmpgt_epi16(ia, inf))) / 2;
    c->zero += __builtin_popcount(zero) / 2;
    c->subnormal += __builtin_popcount(low & ~zero) / 2;
}

// ----------------------------------------------------------------------------
// 8 float32 <-> 8 16-bit values

static AMPC_TARGET_AVX2 __m256
bf16x8_to_f32(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h),
                                                 16));
}

/* As ampc_f32_to_bf16: RNE, NaN kept quiet. */
static AMPC_TARGET_AVX2 __m128i
f32x8_to_bf16(__m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i bias = _mm256_add_epi32(
        _mm256_and_si256(hi, _mm256_set1_epi32(1)),
        _mm256_set1_epi32(0x7fff));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, q, nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r),
                            _mm256_extracti128_si256(r, 1));
}

// ----------------------------------------------------------------------------
// unscale-and-check: x (n) of one dtype, in place
//
// One vector per step: load, test the input's bits for inf/NaN, multiply in
// float32 (unless inv_scale is 1: then nothing is written), round once,
// store; the telemetry compares the bits it already holds.  The tail goes
// through the portable part.

static AMPC_TARGET_AVX2 AMPC_ALWAYS_INLINE __m256i
step_f32(float *x, __m256 inv, int write, ampc_amp_counts *c)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256 v = _mm256_loadu_ps(x);
    __m256i ia = _mm256_and_si256(_mm256_castps_si256(v), absm);
    __m256i nf = _mm256_cmpgt_epi32(ia, _mm256_set1_epi32(0x7f7fffff));
    __m256 o = v;
    if (write) {
        o = _mm256_mul_ps(v, inv);
        _mm256_storeu_ps(x, o);
    }
    if (c != NULL) {
        __m256i oa = _mm256_and_si256(_mm256_castps_si256(o), absm);
        __m256i any = _mm256_or_si256(
            nf, _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), oa));
        if (!_mm256_testz_si256(any, any)) {
            count_x32(c, ia, oa);
        }
    }
    return nf;
}

static AMPC_TARGET_AVX2 int
unscale_f32(float *x, int64_t n, float inv_scale, ampc_amp_counts *c)
{
    const __m256 inv = _mm256_set1_ps(inv_scale);
    int write = inv_scale != 1.0f;
    __m256i nf = _mm256_setzero_si256();
    int64_t i = 0;
    if (write) {
        for (; i + 8 <= n; i += 8) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nf = _mm256_or_si256(nf, step_f32(x + i, inv, 1, c));
        }
    }
    else {
        for (; i + 8 <= n; i += 8) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nf = _mm256_or_si256(nf, step_f32(x + i, inv, 0, c));
        }
    }
    int tail = ampc_amp_unscale_scalar(AMPC_FLOAT32, x + i, n - i,
                                       inv_scale, c);
    return tail || !_mm256_testz_si256(nf, nf);
}

static AMPC_TARGET_AVX2 AMPC_ALWAYS_INLINE __m128i
step_x16(uint16_t *x, __m256 inv, int is_f16, int write, ampc_amp_counts *c)
{
    const __m128i absm = _mm_set1_epi16(0x7fff);
    uint16_t inf_bits = is_f16 ? 0x7c00 : 0x7f80;
    uint16_t min_normal = is_f16 ? 0x0400 : 0x0080;
    __m128i h = _mm_loadu_si128((const __m128i *)x);
    __m128i ia = _mm_and_si128(h, absm);
    __m128i nf = _mm_cmpgt_epi16(ia, _mm_set1_epi16((short)(inf_bits - 1)));
    __m128i oh = h;
    if (write) {
        if (is_f16) {
            oh = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_cvtph_ps(h), inv),
                                 AMPC_RNE);
        }
        else {
            oh = f32x8_to_bf16(_mm256_mul_ps(bf16x8_to_f32(h), inv));
        }
        _mm_storeu_si128((__m128i *)x, oh);
    }
    if (c != NULL) {
        __m128i oa = _mm_and_si128(oh, absm);
        __m128i any = _mm_or_si128(
            nf, _mm_cmpgt_epi16(_mm_set1_epi16((short)min_normal), oa));
        if (!_mm_testz_si128(any, any)) {
            count_x16(c, ia, oa, inf_bits, min_normal);
        }
    }
    return nf;
}

/* The loops of one 16-bit format (is_f16 is a constant at each call). */
static AMPC_TARGET_AVX2 AMPC_ALWAYS_INLINE int
unscale_x16_loops(uint16_t *x, int64_t n, float inv_scale,
                  ampc_amp_counts *c, int is_f16)
{
    const __m256 inv = _mm256_set1_ps(inv_scale);
    int write = inv_scale != 1.0f;
    __m128i nf = _mm_setzero_si128();
    int64_t i = 0;
    if (write) {
        for (; i + 8 <= n; i += 8) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nf = _mm_or_si128(nf, step_x16(x + i, inv, is_f16, 1, c));
        }
    }
    else {
        for (; i + 8 <= n; i += 8) {
            _mm_prefetch((const char *)(x + i) + AMP_PREFETCH, _MM_HINT_T0);
            nf = _mm_or_si128(nf, step_x16(x + i, inv, is_f16, 0, c));
        }
    }
    int tail = ampc_amp_unscale_scalar(is_f16 ? AMPC_FLOAT16 : AMPC_BFLOAT16,
                                       x + i, n - i, inv_scale, c);
    return tail || !_mm_testz_si128(nf, nf);
}

static AMPC_TARGET_AVX2 int
unscale_avx2(ampc_dtype dt, void *x, int64_t n, float inv_scale,
             ampc_amp_counts *c)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return unscale_f32((float *)x, n, inv_scale, c);
    case AMPC_FLOAT16:
        return unscale_x16_loops((uint16_t *)x, n, inv_scale, c, 1);
    default:
        return unscale_x16_loops((uint16_t *)x, n, inv_scale, c, 0);
    }
}

// ----------------------------------------------------------------------------
// norm accumulators: x (n) of one dtype -> double
//
// 2, 1 and inf are vectorised (float32 lanes widened to double for the
// sums); the rarer norms, and the tail, go through the portable part.

static AMPC_TARGET_AVX2 __m256
load_f32x8(ampc_dtype dt, const void *x, int64_t i)
{
    if (dt == AMPC_FLOAT32) {
        return _mm256_loadu_ps((const float *)x + i);
    }
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)x + i));
    return dt == AMPC_FLOAT16 ? _mm256_cvtph_ps(h) : bf16x8_to_f32(h);
}

static AMPC_TARGET_AVX2 double
hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v),
                           _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static AMPC_TARGET_AVX2 double
norm_avx2(ampc_dtype dt, const void *x, int64_t n, double p)
{
    if (p != 2.0 && p != 1.0 && p != INFINITY) {
        return ampc_norm_scalar(dt, x, n, p);
    }
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    __m256 vmax = _mm256_setzero_ps();
    __m256 nan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = load_f32x8(dt, x, i);
        if (p == INFINITY) {
            __m256 a = _mm256_and_ps(v, absm);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
            vmax = _mm256_max_ps(vmax, a);
            continue;
        }
        if (p == 1.0) {
            v = _mm256_and_ps(v, absm);
        }
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        if (p == 2.0) {
            acc0 = _mm256_fmadd_pd(lo, lo, acc0);
            acc1 = _mm256_fmadd_pd(hi, hi, acc1);
        }
        else {
            acc0 = _mm256_add_pd(acc0, lo);
            acc1 = _mm256_add_pd(acc1, hi);
        }
    }
    size_t es = ampc_dtype_size[dt];
    double tail = i < n ? ampc_norm_scalar(dt, (const char *)x + i * es,
                                           n - i, p)
                        : 0.0;
    if (p == INFINITY) {
        if (_mm256_movemask_ps(nan) != 0) {
            return NAN;
        }
        float m[8];
        _mm256_storeu_ps(m, vmax);
        double best = 0.0;
        for (int j = 0; j < 8; j++) {
            best = m[j] > best ? m[j] : best;
        }
        return ampc_norm_fold(p, best, tail);
    }
    return hsum_pd(_mm256_add_pd(acc0, acc1)) + tail;
}

// ----------------------------------------------------------------------------
// the slots

static const ampc_amp_parts amp_parts_avx2 = {
    unscale_avx2, norm_avx2,
};

/* l: tensors of numel[t] elements, unscaled in place; found_inf: 1 float;
 * counts: l->n entries or NULL */
void
ampc_amp_unscale_avx2(const ampc_tensor_list *l, float inv_scale,
                      float *found_inf, ampc_amp_counts *counts)
{
    ampc_amp_unscale_run(&amp_parts_avx2, l, inv_scale, found_inf, counts);
}

/* l: tensors -> acc (l->n) */
void
ampc_grad_norm_avx2(const ampc_tensor_list *l, double p, double *acc)
{
    ampc_grad_norm_run(&amp_parts_avx2, l, p, acc);
}

#endif /* __x86_64__ */
