/* convert.c - the portable float16/bfloat16 converters: amp_math.h's scalar
 * conversions in a loop (the bfloat16 ones vectorise as they stand).
 */
#include "amp_math.h"
#include "cpu/cpu.h"

// ----------------------------------------------------------------------------
// CPU reference

static void
f16_to_f32_ref(int64_t n, const uint16_t *src, float *dst)
{
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ampc_f16_to_f32(src[i]);
    }
}

static void
f32_to_f16_ref(int64_t n, const float *src, uint16_t *dst)
{
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ampc_f32_to_f16(src[i]);
    }
}

static void
bf16_to_f32_ref(int64_t n, const uint16_t *src, float *dst)
{
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ampc_bf16_to_f32(src[i]);
    }
}

static void
f32_to_bf16_ref(int64_t n, const float *src, uint16_t *dst)
{
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ampc_f32_to_bf16(src[i]);
    }
}

const ampc_converters ampc_cvt_ref = {
    f16_to_f32_ref, f32_to_f16_ref, bf16_to_f32_ref, f32_to_bf16_ref,
};
