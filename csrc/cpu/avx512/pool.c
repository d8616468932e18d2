/* pool.c - max_pool2d forward (values and indices) and backward (the
 * gradients scattered to the indices): the bodies of cpu/nn_loops.h
 * compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// AVX-512

static AMPC_TARGET_AVX512 void
max_pool2d_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_max_pool2d_fwd_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
max_pool2d_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_max_pool2d_bwd_range(&ampc_cvt_avx512, ctx, b, e);
}

/* x (planes, H, W) -> y (planes, OH, OW), idx (planes, OH, OW) */
void
ampc_max_pool2d_fwd_avx512(const ampc_pool2d_shape *s, ampc_dtype dt,
                           const void *x, void *y, int64_t *idx)
{
    ampc_max_pool2d_fwd_launch(max_pool2d_fwd_range, s, dt, x, y, idx);
}

/* grad_out (planes, OH, OW), idx (planes, OH, OW) -> grad_in (planes, H, W) */
int
ampc_max_pool2d_bwd_avx512(const ampc_pool2d_shape *s, ampc_dtype dt,
                           const void *grad_out, const int64_t *idx,
                           void *grad_in)
{
    return ampc_max_pool2d_bwd_launch(max_pool2d_bwd_range, s, dt, grad_out,
                                      idx, grad_in);
}

#endif /* __x86_64__ */
