/* norm.c - batch norm and layer norm, forward and backward: the bodies of
 * cpu/batch_norm_loops.h and cpu/norm_loops.h compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/batch_norm_loops.h"

// ----------------------------------------------------------------------------
// AVX-512

static AMPC_TARGET_AVX512 void
batch_norm_tile_range(void *ctx, int64_t b, int64_t e)
{
    ampc_batch_norm_tile_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
batch_norm_plane_range(void *ctx, int64_t b, int64_t e)
{
    ampc_batch_norm_plane_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
batch_norm_map_range(void *ctx, int64_t b, int64_t e)
{
    ampc_batch_norm_map_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
layer_norm_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_layer_norm_fwd_range(&ampc_cvt_avx512, ctx, b, e);
}

static AMPC_TARGET_AVX512 void
layer_norm_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_layer_norm_bwd_range(&ampc_cvt_avx512, ctx, b, e);
}

/* x (N, C, HW) -> y (N, C, HW); mean, invstd (C) */
int
ampc_batch_norm_fwd_avx512(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *x, const void *weight,
                           const void *bias, void *running_mean,
                           void *running_var, float *mean, float *invstd,
                           void *y)
{
    return ampc_batch_norm_fwd_launch(batch_norm_tile_range,
                                      batch_norm_plane_range,
                                      batch_norm_map_range, s, xdt, pdt, x,
                                      weight, bias, running_mean, running_var,
                                      mean, invstd, y);
}

/* grad_y, x (N, C, HW) -> grad_x (N, C, HW), grad_weight, grad_bias (C) */
int
ampc_batch_norm_bwd_avx512(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *grad_y, const void *x,
                           const void *weight, const float *mean,
                           const float *invstd, void *grad_x,
                           void *grad_weight, void *grad_bias)
{
    return ampc_batch_norm_bwd_launch(batch_norm_tile_range,
                                      batch_norm_plane_range,
                                      batch_norm_map_range, s, xdt, pdt,
                                      grad_y, x, weight, mean, invstd,
                                      grad_x, grad_weight, grad_bias);
}

/* x (rows, D) -> y (rows, D); mean, rstd (rows) */
int
ampc_layer_norm_fwd_avx512(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *x, const void *weight,
                           const void *bias, float *mean, float *rstd,
                           void *y)
{
    return ampc_layer_norm_fwd_launch(layer_norm_fwd_range, s, xdt, pdt, x,
                                      weight, bias, mean, rstd, y);
}

/* grad_y, x (rows, D) -> grad_x (rows, D), grad_weight, grad_bias (D) */
int
ampc_layer_norm_bwd_avx512(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                           ampc_dtype pdt, const void *grad_y, const void *x,
                           const void *weight, const float *mean,
                           const float *rstd, void *grad_x, void *grad_weight,
                           void *grad_bias)
{
    return ampc_layer_norm_bwd_launch(layer_norm_bwd_range, s, xdt, pdt,
                                      grad_y, x, weight, mean, rstd, grad_x,
                                      grad_weight, grad_bias);
}

#endif /* __x86_64__ */
