/* sort_math.h - the order sort, argsort and topk use, shared by the CPU
 * kernels (csrc/cpu/ref/sort.c) and the CUDA kernels (cuda/sort.cu), so
 * both devices order NaN, -0.0 and ties alike: each element becomes an
 * unsigned integer key whose unsigned order is PyTorch's order of the
 * values.
 *
 * - float32, float16, bfloat16: the sign-magnitude bits made monotonic (a
 *   negative number's bits inverted, a positive one's sign bit set); -0.0
 *   is first made +0.0 (they tie) and every NaN gets the largest key (NaN
 *   sorts after +inf ascending and first descending, as in PyTorch, and
 *   NaNs tie with each other).
 * - int64: the sign bit flipped.  bool: 0 or 1.
 * - descending (topk's largest): the key's bits inverted, so one ascending
 *   stable sort serves both directions and ties keep their input order.
 */
#ifndef AMPC_SORT_MATH_H
#define AMPC_SORT_MATH_H

#include <stdint.h>

#include "amp_math.h"

/* The key widths in bits of each dtype (kernels.h order). */
AMPC_HOST_DEVICE int
ampc_sort_key_bits(int dt)
{
    switch (dt) {
    case 0:                 /* AMPC_FLOAT32 */
        return 32;
    case 1:                 /* AMPC_FLOAT16 */
    case 2:                 /* AMPC_BFLOAT16 */
        return 16;
    case 3:                 /* AMPC_INT64 */
        return 64;
    default:                /* AMPC_BOOL */
        return 8;
    }
}

AMPC_HOST_DEVICE uint32_t
ampc_sort_key_f32(float f, int descending)
{
    uint32_t u = ampc_f32_bits(f);
    uint32_t key;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        key = 0xffffffffu;                  /* NaN: after +inf */
    }
    else if ((u & 0x7fffffffu) == 0) {
        key = 0x80000000u;                  /* -0.0 ties with +0.0 */
    }
    else {
        key = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    }
    return descending ? ~key : key;
}

/* h: float16 bits (nan_above 0x7c00) or bfloat16 bits (0x7f80) */
AMPC_HOST_DEVICE uint32_t
ampc_sort_key_16(uint16_t h, uint32_t nan_above, int descending)
{
    uint32_t u = h;
    uint32_t key;
    if ((u & 0x7fffu) > nan_above) {
        key = 0xffffu;
    }
    else if ((u & 0x7fffu) == 0) {
        key = 0x8000u;
    }
    else {
        key = (u & 0x8000u) ? (~u & 0xffffu) : (u | 0x8000u);
    }
    return descending ? (~key & 0xffffu) : key;
}

AMPC_HOST_DEVICE uint64_t
ampc_sort_key_i64(int64_t v, int descending)
{
    uint64_t key = (uint64_t)v ^ 0x8000000000000000ull;
    return descending ? ~key : key;
}

AMPC_HOST_DEVICE uint32_t
ampc_sort_key_bool(uint8_t b, int descending)
{
    uint32_t key = b != 0;
    return descending ? (key ^ 1u) : key;
}

#endif /* AMPC_SORT_MATH_H */
