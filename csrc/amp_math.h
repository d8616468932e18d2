/* amp_math.h - element-wise math shared by the C kernels and the CUDA
 * kernels: bit-exact float16/bfloat16 <-> float32 conversions with
 * round-to-nearest-even, finiteness tests, and the one-value rules of the
 * AMP kernels (unscale-and-check, scale update).  Everything is static
 * inline and free of Python, so the CPU tests cover the exact code the GPU
 * runs.
 */
#ifndef AMPC_AMP_MATH_H
#define AMPC_AMP_MATH_H

#include <stdint.h>
#include <string.h>

/* Always inlined, on the host as on the device: a copy left out of line
 * would be compiled for the baseline ISA, not for the SIMD level of the
 * loop that calls it, so that loop would not vectorise and AMPC_FMA would
 * become a call to libm's fmaf. */
#if defined(__CUDACC__)
#define AMPC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define AMPC_HOST_DEVICE static inline __attribute__((always_inline))
#endif

// ----------------------------------------------------------------------------
// bit casts

AMPC_HOST_DEVICE uint32_t
ampc_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

AMPC_HOST_DEVICE float
ampc_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// ----------------------------------------------------------------------------
// bfloat16: the top 16 bits of a float32

AMPC_HOST_DEVICE float
ampc_bf16_to_f32(uint16_t h)
{
    return ampc_f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest, ties to even.  NaN stays NaN (quiet bit forced so that
 * truncation cannot turn a NaN into inf); overflow rounds to inf. */
AMPC_HOST_DEVICE uint16_t
ampc_f32_to_bf16(float f)
{
    uint32_t u = ampc_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x0040u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// ----------------------------------------------------------------------------
// float16 (IEEE binary16)

AMPC_HOST_DEVICE float
ampc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) {                     /* inf or NaN */
        return ampc_f32_from_bits(sign | 0x7f800000u | (man << 13));
    }
    if (exp != 0) {                         /* normal */
        return ampc_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    }
    if (man == 0) {
        return ampc_f32_from_bits(sign);
    }
    /* subnormal: man * 2^-24 is exact in float32 */
    float v = (float)man * 5.9604644775390625e-08f;
    return sign ? -v : v;
}

/* Round to nearest, ties to even; overflow to inf; NaN stays NaN. */
AMPC_HOST_DEVICE uint16_t
ampc_f32_to_f16(float f)
{
    uint32_t u = ampc_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {                  /* NaN: keep payload top, quiet */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    if (a >= 0x477ff000u) {                 /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a >= 0x38800000u) {                 /* normal in float16 (>= 2^-14) */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a < 0x33000000u) {                  /* < 2^-25: rounds to zero */
        return sign;
    }
    /* subnormal in float16: shift the implicit-one mantissa into place */
    uint32_t exp = a >> 23;
    uint32_t man = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;            /* 14..24 */
    uint32_t half_bit = 1u << (shift - 1);
    uint32_t rest = man & ((1u << shift) - 1u);
    uint32_t q = man >> shift;
    if (rest > half_bit || (rest == half_bit && (q & 1u))) {
        q += 1;
    }
    return (uint16_t)(sign | q);
}

// ----------------------------------------------------------------------------
// finiteness on the bit pattern (fast and immune to -ffast-math)

AMPC_HOST_DEVICE int
ampc_f32_isfinite(float f)
{
    return (ampc_f32_bits(f) & 0x7f800000u) != 0x7f800000u;
}

// ----------------------------------------------------------------------------
// the AMP kernels' one-value rules (PyTorch's AmpKernels, AK-cpu/AK-cuda)

/* The multiplier that unscales a gradient scaled by `scale`: the
 * reciprocal in double, rounded to float, as PyTorch computes it ("FP32
 * division can be imprecise for certain compile options"). */
AMPC_HOST_DEVICE float
ampc_amp_inv_scale(float scale)
{
    return (float)(1.0 / (double)scale);
}

/* One gradient element of _amp_foreach_non_finite_check_and_unscale_: the
 * finiteness test is on the INPUT (a finite value that overflows after the
 * multiply is not flagged), and inv_scale == 1 returns val itself, with no
 * multiply, so that a check-only pass cannot change a bit.  Float16 and
 * bfloat16 are widened to float first and rounded back once by the caller.
 * Sets *nonfinite to 1 for inf, -inf and NaN; never clears it. */
AMPC_HOST_DEVICE float
ampc_amp_unscale_one(float val, float inv_scale, int *nonfinite)
{
    if (!ampc_f32_isfinite(val)) {
        *nonfinite = 1;
    }
    return inv_scale == 1.0f ? val : val * inv_scale;
}

/* _amp_update_scale_ on one scale and its growth tracker:
 * - found_inf nonzero (NaN included, since NaN != 0): the scale backs off,
 *   scale = float(double(scale) * backoff_factor), with no floor and no
 *   finiteness test, and the tracker restarts at 0;
 * - else the tracker counts this clean step; when the count equals
 *   growth_interval (equality, so an interval <= 0 never grows) the scale
 *   grows to float(double(scale) * growth_factor) unless that is inf or NaN
 *   ("do not grow the scale past fp32 bounds"), and the tracker restarts at
 *   0 either way.
 * NOTE: PyTorch's tracker is int32; ampc's is int64 (no int32 dtype). */
AMPC_HOST_DEVICE void
ampc_amp_update_scale_one(float *scale, int64_t *tracker, float found_inf,
                          double growth_factor, double backoff_factor,
                          int64_t growth_interval)
{
    if (found_inf != 0.0f) {
        *scale = (float)((double)*scale * backoff_factor);
        *tracker = 0;
        return;
    }
    int64_t successful = *tracker + 1;
    if (successful == growth_interval) {
        float grown = (float)((double)*scale * growth_factor);
        if (ampc_f32_isfinite(grown)) {
            *scale = grown;
        }
        *tracker = 0;
    }
    else {
        *tracker = successful;
    }
}

#endif /* AMPC_AMP_MATH_H */
