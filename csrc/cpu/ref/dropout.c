/* dropout.c - dropout's masked scale y = (x * mask) * scale, which is also
 * its backward: the body of cpu/nn_loops.h compiled for the baseline ISA.
 * The mask itself comes from the random slot (Philox, Bernoulli).
 */
#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// CPU reference

static void
masked_scale_range(void *ctx, int64_t b, int64_t e)
{
    ampc_masked_scale_range(&ampc_cvt_ref, ctx, b, e);
}

/* x (n), mask (n) -> y (n) */
void
ampc_masked_scale_ref(ampc_dtype dt, int64_t n, const void *x,
                      const uint8_t *mask, float scale, void *y)
{
    ampc_masked_scale_launch(masked_scale_range, dt, n, x, mask, scale, y);
}
