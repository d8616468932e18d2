/* convert.c - float16/bfloat16 converters for AVX2: F16C for float16,
 * integer lanes for bfloat16.  Bit-exact with amp_math.h for every input,
 * NaN payloads included.  Tails use the same instructions on a padded copy,
 * so a run converts uniformly.
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "cpu/cpu.h"

/* RNE, without touching the MXCSR flags. */
#define AMPC_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

// ----------------------------------------------------------------------------
// float16 (F16C)

/* NOTE: vcvtph2ps quiets a signalling NaN, amp_math.h does not (and e.g.
 * powf(sNaN, 0) is NaN where powf(qNaN, 0) is 1): NaN lanes are rebuilt as
 * amp_math.h builds them.  They are found on the input bits, as clang
 * scalarises a test on the converted value. */
static AMPC_TARGET_AVX2 __m256
f16x8_to_f32(__m128i h)
{
    __m256 f = _mm256_cvtph_ps(h);
    __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)),
                                  _mm_set1_epi16(0x7c00));
    if (_mm_movemask_epi8(nan) == 0) {
        return f;
    }
    __m256i w = _mm256_cvtepu16_epi32(h);
    __m256i sign = _mm256_slli_epi32(
        _mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16);
    __m256i man = _mm256_slli_epi32(
        _mm256_and_si256(w, _mm256_set1_epi32(0x3ff)), 13);
    __m256i bits = _mm256_or_si256(
        _mm256_or_si256(sign, man), _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_ps(f, _mm256_castsi256_ps(bits),
                            _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan)));
}

static AMPC_TARGET_AVX2 void
f16_to_f32_avx2(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, f16x8_to_f32(h));
    }
    if (i < n) {
        uint16_t h[8] = {0};
        float f[8];
        size_t m = (size_t)(n - i);
        memcpy(h, src + i, m * sizeof(uint16_t));
        _mm256_storeu_ps(f, f16x8_to_f32(_mm_loadu_si128((__m128i *)h)));
        memcpy(dst + i, f, m * sizeof(float));
    }
}

static AMPC_TARGET_AVX2 void
f32_to_f16_avx2(int64_t n, const float *src, uint16_t *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), AMPC_RNE);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    if (i < n) {
        float f[8] = {0.0f};
        uint16_t h[8];
        size_t m = (size_t)(n - i);
        memcpy(f, src + i, m * sizeof(float));
        _mm_storeu_si128((__m128i *)h,
                         _mm256_cvtps_ph(_mm256_loadu_ps(f), AMPC_RNE));
        memcpy(dst + i, h, m * sizeof(uint16_t));
    }
}

// ----------------------------------------------------------------------------
// bfloat16: the top half of a float32, rounded as ampc_f32_to_bf16 does

static AMPC_TARGET_AVX2 __m256
bf16x8_to_f32(__m128i h)
{
    __m256i w = _mm256_cvtepu16_epi32(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

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
    /* every lane is <= 0xffff, so the saturating pack is exact */
    return _mm_packus_epi32(_mm256_castsi256_si128(r),
                            _mm256_extracti128_si256(r, 1));
}

static AMPC_TARGET_AVX2 void
bf16_to_f32_avx2(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, bf16x8_to_f32(h));
    }
    if (i < n) {
        uint16_t h[8] = {0};
        float f[8];
        size_t m = (size_t)(n - i);
        memcpy(h, src + i, m * sizeof(uint16_t));
        _mm256_storeu_ps(f, bf16x8_to_f32(_mm_loadu_si128((__m128i *)h)));
        memcpy(dst + i, f, m * sizeof(float));
    }
}

static AMPC_TARGET_AVX2 void
f32_to_bf16_avx2(int64_t n, const float *src, uint16_t *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = f32x8_to_bf16(_mm256_loadu_ps(src + i));
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    if (i < n) {
        float f[8] = {0.0f};
        uint16_t h[8];
        size_t m = (size_t)(n - i);
        memcpy(f, src + i, m * sizeof(float));
        _mm_storeu_si128((__m128i *)h, f32x8_to_bf16(_mm256_loadu_ps(f)));
        memcpy(dst + i, h, m * sizeof(uint16_t));
    }
}

const ampc_converters ampc_cvt_avx2 = {
    f16_to_f32_avx2, f32_to_f16_avx2, bf16_to_f32_avx2, f32_to_bf16_avx2,
};

#endif /* __x86_64__ */
