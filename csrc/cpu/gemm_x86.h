/* gemm_x86.h - GEMM panel packing with AVX2 + F16C, shared by the avx2 and
 * avx512 levels (packing moves data and is not what limits either level, so
 * 8-lane code serves both): 8-element widening loads for each float dtype
 * and 8x8 / 4x8 register transposes for operands that are contiguous along
 * K.  Include only from a SIMD file, inside its __x86_64__ guard.
 */
#ifndef AMPC_CPU_GEMM_X86_H
#define AMPC_CPU_GEMM_X86_H

#include <immintrin.h>

#include "cpu/gemm.h"

#define AMPC_X86_INLINE static inline AMPC_TARGET_AVX2 \
    __attribute__((always_inline))

// ----------------------------------------------------------------------------
// widening loads

/* 8 contiguous elements of dt at p as float32 (exact). */
AMPC_X86_INLINE __m256
ampc_x86_load8(ampc_dtype dt, const char *p)
{
    if (dt == AMPC_FLOAT32) {
        return _mm256_loadu_ps((const float *)p);
    }
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (dt == AMPC_FLOAT16) {
        return _mm256_cvtph_ps(h);
    }
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 4 contiguous elements of dt at p as float32. */
AMPC_X86_INLINE __m128
ampc_x86_load4(ampc_dtype dt, const char *p)
{
    if (dt == AMPC_FLOAT32) {
        return _mm_loadu_ps((const float *)p);
    }
    __m128i h = _mm_loadl_epi64((const __m128i *)p);
    if (dt == AMPC_FLOAT16) {
        return _mm_cvtph_ps(h);
    }
    return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16));
}

// ----------------------------------------------------------------------------
// transposes

/* r[i] = element q of line i for q < 8  ->  r[q] = element q of lines
 * 0..7 */
AMPC_X86_INLINE void
ampc_x86_tr8x8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
    __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
    __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
    __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
    __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* Lines r[0..3] of 8 elements -> 8 columns of 4, stored at d + q * w. */
AMPC_X86_INLINE void
ampc_x86_tr4x8_store(const __m256 r[4], float *d, int w)
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
    __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
    __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 s[4];
    s[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    s[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    s[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    s[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    for (int q = 0; q < 4; q++) {
        _mm_storeu_ps(d + q * w, _mm256_castps256_ps128(s[q]));
        _mm_storeu_ps(d + (q + 4) * w, _mm256_extractf128_ps(s[q], 1));
    }
}

// ----------------------------------------------------------------------------
// packing (ampc_gemm_pack_fn), for w a multiple of 4

/* Lines contiguous (sl == 1): each depth p of a panel is a run of w. */
AMPC_X86_INLINE void
ampc_x86_pack_runs(ampc_dtype dt, const void *src, int64_t sk, int64_t count,
                   int64_t k, int w, float *dst)
{
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    for (int64_t l0 = 0; l0 < count; l0 += w) {
        int64_t lw = count - l0 < w ? count - l0 : w;
        const char *s = (const char *)src + l0 * es;
        for (int64_t p = 0; p < k; p++) {
            const char *sp = s + p * sk * es;
            float *d = dst + p * w;
            int64_t l = 0;
            for (; l + 8 <= lw; l += 8) {
                _mm256_storeu_ps(d + l, ampc_x86_load8(dt, sp + l * es));
            }
            for (; l + 4 <= lw; l += 4) {
                _mm_storeu_ps(d + l, ampc_x86_load4(dt, sp + l * es));
            }
            for (; l < lw; l++) {
                d[l] = ampc_gemm_load1(dt, sp, l);
            }
            for (; l % 8 != 0 && l < w; l++) {
                d[l] = 0.0f;
            }
            for (; l < w; l += 8) {
                _mm256_storeu_ps(d + l, _mm256_setzero_ps());
            }
        }
        dst += w * k;
    }
}

/* Lines contiguous along k (sk == 1): groups of 8 (or 4) lines are loaded
 * 8 deep and transposed in registers, all groups of a panel for one 8-deep
 * step before the next, so each step writes whole panel rows.  A group
 * that runs past the last line is transposed with zero rows, which also
 * writes the panel's zero padding (a conv layer with 27 lines pads 21 of
 * its 48). */
AMPC_X86_INLINE void
ampc_x86_pack_lines(ampc_dtype dt, const void *src, int64_t sl,
                    int64_t count, int64_t k, int w, float *dst)
{
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    const int gw = w % 8 == 0 ? 8 : 4;
    for (int64_t l0 = 0; l0 < count; l0 += w) {
        int64_t lw = count - l0 < w ? count - l0 : w;
        const char *s = (const char *)src + l0 * sl * es;
        int64_t p = 0;
        for (; p + 8 <= k; p += 8) {
            for (int g = 0; g < w; g += gw) {
                int64_t nl = lw - g < gw ? (lw - g > 0 ? lw - g : 0) : gw;
                __m256 r[8];
                for (int i = 0; i < gw; i++) {
                    r[i] = i < nl ? ampc_x86_load8(
                                        dt, s + ((g + i) * sl + p) * es)
                                  : _mm256_setzero_ps();
                }
                if (gw == 8) {
                    ampc_x86_tr8x8(r);
                    for (int q = 0; q < 8; q++) {
                        _mm256_storeu_ps(dst + (p + q) * w + g, r[q]);
                    }
                }
                else {
                    ampc_x86_tr4x8_store(r, dst + p * w + g, w);
                }
            }
        }
        for (; p < k; p++) {
            for (int64_t l = 0; l < w; l++) {
                dst[p * w + l] = l < lw ? ampc_gemm_load1(dt, s, l * sl + p)
                                        : 0.0f;
            }
        }
        dst += w * k;
    }
}

/* ampc_widen_fn: 8 elements at a time where they are contiguous. */
AMPC_X86_INLINE void
ampc_x86_widen(ampc_dtype dt, const void *src, int64_t ss, int64_t n,
               float *d)
{
    if (ss != 1) {
        ampc_widen_strided(dt, src, ss, n, d);
        return;
    }
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(d + i, ampc_x86_load8(dt, (const char *)src +
                                                       i * es));
    }
    for (; i < n; i++) {
        d[i] = ampc_gemm_load1(dt, src, i);
    }
}

/* The level's ampc_gemm_pack_fn body: the fast layouts, else a gather. */
AMPC_X86_INLINE void
ampc_x86_pack(ampc_dtype dt, const void *src, int64_t sl, int64_t sk,
              int64_t count, int64_t k, int w, float *dst)
{
    if (sl == 1) {
        ampc_x86_pack_runs(dt, src, sk, count, k, w, dst);
    }
    else if (sk == 1) {
        ampc_x86_pack_lines(dt, src, sl, count, k, w, dst);
    }
    else {
        ampc_gemm_pack_gather(dt, src, sl, sk, count, k, w, dst);
    }
}

#endif /* AMPC_CPU_GEMM_X86_H */
