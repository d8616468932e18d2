/* norm_level.h - batch norm's, layer norm's and group norm's kernels for
 * one CPU level: the range functions that run cpu/batch_norm_loops.h's,
 * cpu/norm_loops.h's and cpu/group_norm_loops.h's bodies with the level's
 * target and converters, and the six slots (kernels.h).  Included once by
 * each level's norm.c, which first defines AMPC_LEVEL_TARGET (its target
 * attribute, or nothing), AMPC_LEVEL_CVT (its converters) and
 * AMPC_LEVEL_NAME(prefix) (prefix with the level's suffix pasted on).
 */
#include "cpu/batch_norm_loops.h"
#include "cpu/group_norm_loops.h"

static AMPC_LEVEL_TARGET void
batch_norm_tile_range(void *ctx, int64_t b, int64_t e)
{
    ampc_batch_norm_tile_range(&AMPC_LEVEL_CVT, ctx, b, e);
}

static AMPC_LEVEL_TARGET void
batch_norm_plane_range(void *ctx, int64_t b, int64_t e)
{
    ampc_batch_norm_plane_range(&AMPC_LEVEL_CVT, ctx, b, e);
}

static AMPC_LEVEL_TARGET void
batch_norm_map_range(void *ctx, int64_t b, int64_t e)
{
    ampc_batch_norm_map_range(&AMPC_LEVEL_CVT, ctx, b, e);
}

static AMPC_LEVEL_TARGET void
layer_norm_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_layer_norm_fwd_range(&AMPC_LEVEL_CVT, ctx, b, e);
}

static AMPC_LEVEL_TARGET void
layer_norm_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_layer_norm_bwd_range(&AMPC_LEVEL_CVT, ctx, b, e);
}

static AMPC_LEVEL_TARGET void
group_norm_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_group_norm_fwd_range(&AMPC_LEVEL_CVT, ctx, b, e);
}

static AMPC_LEVEL_TARGET void
group_norm_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_group_norm_bwd_range(&AMPC_LEVEL_CVT, ctx, b, e);
}

/* x (N, C, HW) -> y (N, C, HW); mean, invstd (C) */
int
AMPC_LEVEL_NAME(ampc_batch_norm_fwd_)(
    const ampc_batch_norm_shape *s, ampc_dtype xdt, ampc_dtype pdt,
    const void *x, const void *weight, const void *bias, void *running_mean,
    void *running_var, float *mean, float *invstd, void *y)
{
    return ampc_batch_norm_fwd_launch(batch_norm_tile_range,
                                      batch_norm_plane_range,
                                      batch_norm_map_range, s, xdt, pdt, x,
                                      weight, bias, running_mean, running_var,
                                      mean, invstd, y);
}

/* grad_y, x (N, C, HW) -> grad_x (N, C, HW), grad_weight, grad_bias (C) */
int
AMPC_LEVEL_NAME(ampc_batch_norm_bwd_)(
    const ampc_batch_norm_shape *s, ampc_dtype xdt, ampc_dtype pdt,
    const void *grad_y, const void *x, const void *weight, const float *mean,
    const float *invstd, void *grad_x, void *grad_weight, void *grad_bias)
{
    return ampc_batch_norm_bwd_launch(batch_norm_tile_range,
                                      batch_norm_plane_range,
                                      batch_norm_map_range, s, xdt, pdt,
                                      grad_y, x, weight, mean, invstd,
                                      grad_x, grad_weight, grad_bias);
}

/* x (rows, D) -> y (rows, D); mean, rstd (rows) */
int
AMPC_LEVEL_NAME(ampc_layer_norm_fwd_)(
    const ampc_layer_norm_shape *s, ampc_dtype xdt, ampc_dtype pdt,
    const void *x, const void *weight, const void *bias, float *mean,
    float *rstd, void *y)
{
    return ampc_layer_norm_fwd_launch(layer_norm_fwd_range, s, xdt, pdt, x,
                                      weight, bias, mean, rstd, y);
}

/* grad_y, x (rows, D) -> grad_x (rows, D), grad_weight, grad_bias (D) */
int
AMPC_LEVEL_NAME(ampc_layer_norm_bwd_)(
    const ampc_layer_norm_shape *s, ampc_dtype xdt, ampc_dtype pdt,
    const void *grad_y, const void *x, const void *weight, const float *mean,
    const float *rstd, void *grad_x, void *grad_weight, void *grad_bias)
{
    return ampc_layer_norm_bwd_launch(layer_norm_bwd_range, s, xdt, pdt,
                                      grad_y, x, weight, mean, rstd, grad_x,
                                      grad_weight, grad_bias);
}

/* x (N, C, HW) -> y (N, C, HW); mean, rstd (N, groups) */
int
AMPC_LEVEL_NAME(ampc_group_norm_fwd_)(
    const ampc_group_norm_shape *s, ampc_dtype xdt, ampc_dtype pdt,
    const void *x, const void *weight, const void *bias, float *mean,
    float *rstd, void *y)
{
    return ampc_group_norm_fwd_launch(group_norm_fwd_range, s, xdt, pdt, x,
                                      weight, bias, mean, rstd, y);
}

/* grad_y, x (N, C, HW) -> grad_x (N, C, HW), grad_weight, grad_bias (C) */
int
AMPC_LEVEL_NAME(ampc_group_norm_bwd_)(
    const ampc_group_norm_shape *s, ampc_dtype xdt, ampc_dtype pdt,
    const void *grad_y, const void *x, const void *weight, const float *mean,
    const float *rstd, void *grad_x, void *grad_weight, void *grad_bias)
{
    return ampc_group_norm_bwd_launch(group_norm_bwd_range, s, xdt, pdt,
                                      grad_y, x, weight, mean, rstd, grad_x,
                                      grad_weight, grad_bias);
}
