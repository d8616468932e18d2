/* dropout.c - dropout's masked scale y = (x * mask) * scale, which is also
 * its backward: the body of cpu/nn_loops.h compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// AVX-512

static AMPC_TARGET_AVX512 void
masked_scale_range(void *ctx, int64_t b, int64_t e)
{
    ampc_masked_scale_range(&ampc_cvt_avx512, ctx, b, e);
}

/* x (n), mask (n) -> y (n) */
void
ampc_masked_scale_avx512(ampc_dtype dt, int64_t n, const void *x,
                         const uint8_t *mask, float scale, void *y)
{
    ampc_masked_scale_launch(masked_scale_range, dt, n, x, mask, scale, y);
}

#endif /* __x86_64__ */
