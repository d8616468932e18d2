/* softmax.c - softmax and log_softmax over one dim, forward and backward:
 * the bodies of cpu/nn_loops.h compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// AVX-512

static AMPC_TARGET_AVX512 void
softmax_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_softmax_fwd_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
softmax_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_softmax_bwd_range(&ampc_cvt_avx512, ctx, b, e);
}

/* x (outer, R, inner) -> y (outer, R, inner) */
void
ampc_softmax_fwd_avx512(int log, ampc_dtype xdt, ampc_dtype ydt, int64_t outer,
                        int64_t r, int64_t inner, const void *x, void *y)
{
    ampc_softmax_ctx c = {log, xdt, ydt, outer, r, inner, x, NULL, y};
    ampc_softmax_launch(softmax_fwd_range, &c);
}

/* grad_y, y (outer, R, inner) -> grad_x (outer, R, inner) */
void
ampc_softmax_bwd_avx512(int log, ampc_dtype dt, int64_t outer, int64_t r,
                        int64_t inner, const void *grad_y, const void *y,
                        void *grad_x)
{
    ampc_softmax_ctx c = {log, dt, dt, outer, r, inner, grad_y, y, grad_x};
    ampc_softmax_launch(softmax_bwd_range, &c);
}

#endif /* __x86_64__ */
