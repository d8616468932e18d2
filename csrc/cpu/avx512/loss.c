/* loss.c - the fused cross_entropy (log_softmax and the loss in one pass
 * per row) and mse_loss, forward and backward: the bodies of cpu/loss_loops.h
 * compiled for AVX-512 F/BW/VL.  nll_loss keeps the portable kernels.
 */
#if defined(__x86_64__)

#include "cpu/loss_loops.h"

// ----------------------------------------------------------------------------
// AVX-512

static AMPC_TARGET_AVX512 void
xent_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_xent_fwd_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
xent_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_xent_bwd_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
mse_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_mse_fwd_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
mse_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_mse_bwd_range(&ampc_cvt_avx512, ctx, b, e);
}

/* logits (N, C) -> logp (N, C), row_loss (N), row_weight (N) */
void
ampc_cross_entropy_fwd_avx512(const ampc_class_loss_shape *s, ampc_dtype dt,
                              const void *logits, const int64_t *target,
                              const float *weight, void *logp,
                              double *row_loss, double *row_weight)
{
    ampc_xent_fwd_launch(xent_fwd_range, s, dt, logits, target, weight, logp,
                         row_loss, row_weight);
}

/* logp (N, C) -> grad (N, C) */
void
ampc_cross_entropy_bwd_avx512(const ampc_class_loss_shape *s, ampc_dtype dt,
                              const void *logp, const int64_t *target,
                              const float *weight, const float *row_scale,
                              void *grad)
{
    ampc_xent_bwd_launch(xent_bwd_range, s, dt, logp, target, weight,
                         row_scale, grad);
}

/* x, t (n) -> out (n) or partial (ceil(n / AMPC_LOSS_CHUNK)) */
void
ampc_mse_loss_fwd_avx512(ampc_dtype dt, int64_t n, const void *x,
                         const void *t, void *out, double *partial)
{
    ampc_mse_fwd_launch(mse_fwd_range, dt, n, x, t, out, partial);
}

/* x, t, grad (n) -> grad_x (n) */
void
ampc_mse_loss_bwd_avx512(ampc_dtype dt, int64_t n, const void *x,
                         const void *t, const void *grad, float scale,
                         void *grad_x)
{
    ampc_mse_bwd_launch(mse_bwd_range, dt, n, x, t, grad, scale, grad_x);
}

#endif /* __x86_64__ */
