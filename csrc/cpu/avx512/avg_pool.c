/* avg_pool.c - avg_pool2d and adaptive_avg_pool2d, forward and backward:
 * the bodies of cpu/avg_pool_loops.h compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/avg_pool_loops.h"

// ----------------------------------------------------------------------------
// AVX-512

static AMPC_TARGET_AVX512 void
avg_pool2d_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_avg_pool2d_fwd_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
avg_pool2d_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_avg_pool2d_bwd_range(&ampc_cvt_avx512, ctx, b, e);
}

/* x (planes, H, W) -> y (planes, OH, OW) */
int
ampc_avg_pool2d_fwd_avx512(const ampc_avg_pool2d_shape *s, ampc_dtype dt,
                           const void *x, void *y)
{
    return ampc_avg_pool2d_launch(avg_pool2d_fwd_range, s, dt, x, y);
}

/* grad_out (planes, OH, OW) -> grad_in (planes, H, W) */
int
ampc_avg_pool2d_bwd_avx512(const ampc_avg_pool2d_shape *s, ampc_dtype dt,
                           const void *grad_out, void *grad_in)
{
    return ampc_avg_pool2d_launch(avg_pool2d_bwd_range, s, dt, grad_out,
                                  grad_in);
}

#endif /* __x86_64__ */
