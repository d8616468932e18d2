/* interp.c - interpolate's separable modes, forward and backward: the
 * bodies of cpu/interp_loops.h compiled for the baseline ISA.
 */
#include "cpu/interp_loops.h"

// ----------------------------------------------------------------------------
// CPU reference

static void
interp_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_interp_fwd_range(&ampc_cvt_ref, ctx, b, e);
}

static void
interp_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_interp_bwd_range(&ampc_cvt_ref, ctx, b, e);
}

/* x (planes, D, H, W) -> y (planes, OD, OH, OW) */
int
ampc_interp_fwd_ref(const ampc_interp_shape *s, ampc_dtype dt,
                    const void *x, void *y)
{
    return ampc_interp_launch(interp_fwd_range, s, dt, x, y);
}

/* grad_out (planes, OD, OH, OW) -> grad_in (planes, D, H, W) */
int
ampc_interp_bwd_ref(const ampc_interp_shape *s, ampc_dtype dt,
                    const void *grad_out, void *grad_in)
{
    return ampc_interp_launch(interp_bwd_range, s, dt, grad_out, grad_in);
}

