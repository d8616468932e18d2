/* convert.c - float16/bfloat16 converters for AVX-512 (F, BW, VL): 16 lanes,
 * masked tails.  Bit-exact with amp_math.h for every input, NaN payloads
 * included.
 *
 * NOTE: avx512bf16's vcvtneps2bf16 is not used: it flushes subnormal inputs
 * and outputs to zero, which amp_math.h does not.
 */
#if defined(__x86_64__)

#include <immintrin.h>

#include "cpu/cpu.h"

/* RNE, without touching the MXCSR flags. */
#define AMPC_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static AMPC_TARGET_AVX512 __mmask16
tail_mask(int64_t m)
{
    return (__mmask16)((1u << m) - 1u);
}

// ----------------------------------------------------------------------------
// float16

/* NOTE: vcvtph2ps quiets a signalling NaN, amp_math.h does not (and e.g.
 * powf(sNaN, 0) is NaN where powf(qNaN, 0) is 1): NaN lanes are rebuilt as
 * amp_math.h builds them.  They are found on the input bits, as clang
 * scalarises a test on the converted value. */
static AMPC_TARGET_AVX512 __m512
f16x16_to_f32(__m256i h)
{
    __m512 f = _mm512_cvtph_ps(h);
    __mmask16 nan = _mm256_cmpgt_epi16_mask(
        _mm256_and_si256(h, _mm256_set1_epi16(0x7fff)),
        _mm256_set1_epi16(0x7c00));
    if (nan == 0) {
        return f;
    }
    __m512i w = _mm512_cvtepu16_epi32(h);
    __m512i sign = _mm512_slli_epi32(
        _mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16);
    __m512i man = _mm512_slli_epi32(
        _mm512_and_si512(w, _mm512_set1_epi32(0x3ff)), 13);
    __m512i bits = _mm512_or_si512(
        _mm512_or_si512(sign, man), _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(bits));
}

static AMPC_TARGET_AVX512 void
f16_to_f32_avx512(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        _mm512_storeu_ps(dst + i, f16x16_to_f32(h));
    }
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        __m256i h = _mm256_maskz_loadu_epi16(k, src + i);
        _mm512_mask_storeu_ps(dst + i, k, f16x16_to_f32(h));
    }
}

static AMPC_TARGET_AVX512 void
f32_to_f16_avx512(int64_t n, const float *src, uint16_t *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), AMPC_RNE);
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, src + i),
                                    AMPC_RNE);
        _mm256_mask_storeu_epi16(dst + i, k, h);
    }
}

// ----------------------------------------------------------------------------
// bfloat16: the top half of a float32, rounded as ampc_f32_to_bf16 does

static AMPC_TARGET_AVX512 __m512
bf16x16_to_f32(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h),
                                                 16));
}

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

static AMPC_TARGET_AVX512 void
bf16_to_f32_avx512(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        _mm512_storeu_ps(dst + i, bf16x16_to_f32(h));
    }
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        __m256i h = _mm256_maskz_loadu_epi16(k, src + i);
        _mm512_mask_storeu_ps(dst + i, k, bf16x16_to_f32(h));
    }
}

static AMPC_TARGET_AVX512 void
f32_to_bf16_avx512(int64_t n, const float *src, uint16_t *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = f32x16_to_bf16(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        __m256i h = f32x16_to_bf16(_mm512_maskz_loadu_ps(k, src + i));
        _mm256_mask_storeu_epi16(dst + i, k, h);
    }
}

const ampc_converters ampc_cvt_avx512 = {
    f16_to_f32_avx512, f32_to_f16_avx512, bf16_to_f32_avx512,
    f32_to_bf16_avx512,
};

#endif /* __x86_64__ */
