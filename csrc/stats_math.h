/* stats_math.h - the per-element rules of cummax/cummin, histc and
 * embedding_bag's max mode, shared by the CPU loops (cpu/ref/scan_minmax.c,
 * histc.c, embedding_bag.c) and the CUDA kernels (cuda/scan.cu, histc.cu,
 * embedding_bag.cu), so the CPU tests cover the code the GPU runs.
 */
#ifndef AMPC_STATS_MATH_H
#define AMPC_STATS_MATH_H

#include <stdint.h>

#include "amp_math.h"
#include "kernels.h"

/* torch's cummax (is_min == 0) and cummin rule: x replaces the running
 * value best when x >= best (x <= best) or x is NaN.  Taken over
 * (NaN-ness, value, position), this picks the greatest, so it is
 * associative and a block scan may group the elements. */
AMPC_HOST_DEVICE int
ampc_cummax_takes(int is_min, float x, float best)
{
    return (is_min ? x <= best : x >= best) | (x != x);
}

AMPC_HOST_DEVICE int
ampc_cummax_takes_i64(int is_min, int64_t x, int64_t best)
{
    return is_min ? x <= best : x >= best;
}

/* v rounded to dt (float16 or bfloat16; float32 as is): torch's CPU histc
 * computes in the input's dtype, rounding after each operation. */
AMPC_HOST_DEVICE float
ampc_histc_round(ampc_dtype dt, float v)
{
    if (dt == AMPC_FLOAT16) {
        return ampc_f16_to_f32(ampc_f32_to_f16(v));
    }
    if (dt == AMPC_BFLOAT16) {
        return ampc_bf16_to_f32(ampc_f32_to_bf16(v));
    }
    return v;
}

/* The bin of x among bins equal bins over [lo, hi], or -1 when x lies
 * outside (or is NaN): torch's (x - lo) * bins / (hi - lo) truncated,
 * each step rounded to dt, the right edge belonging to the last bin. */
AMPC_HOST_DEVICE int64_t
ampc_histc_bin(ampc_dtype dt, float x, float lo, float hi, int64_t bins)
{
    if (!(x >= lo && x <= hi)) {
        return -1;
    }
    float t = ampc_histc_round(dt, x - lo);
    t = ampc_histc_round(dt, t * ampc_histc_round(dt, (float)bins));
    t = ampc_histc_round(dt, t / ampc_histc_round(dt, hi - lo));
    int64_t pos = (int64_t)t;
    /* rounding can carry an element just inside hi onto bins, or past */
    return pos >= bins ? bins - 1 : pos;
}

/* embedding_bag's max rule (torch's): a bag's first counted element
 * starts the max, a later one replaces it only when greater (so a NaN
 * after the first is passed over, and a tie keeps the first). */
AMPC_HOST_DEVICE int
ampc_bag_max_takes(int first, float v, float best)
{
    return first | (v > best);
}

#endif /* AMPC_STATS_MATH_H */
