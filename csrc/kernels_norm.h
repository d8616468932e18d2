/* kernels_norm.h - the kernel ABI of the normalisation layers (batch
 * norm, layer norm, group norm): their shapes and slot types.  Part of
 * kernels.h, which includes it after ampc_dtype and before the table (and
 * inside its extern "C"); include kernels.h, not this.  No Python here.
 */
#ifndef AMPC_KERNELS_NORM_H
#define AMPC_KERNELS_NORM_H

#ifndef AMPC_KERNELS_H
#error "kernels_norm.h is part of kernels.h: include that"
#endif

// ----------------------------------------------------------------------------
// normalisation layers: batch norm, layer norm and group norm
// (csrc/cpu/*/norm.c, bodies in csrc/cpu/batch_norm_loops.h, norm_loops.h
// and group_norm_loops.h; Python side in csrc/nn_norm.c and
// nn_group_norm.c)
//
// x has dtype xdt (float32, float16 or bfloat16); the parameters (weight,
// bias, running statistics) share dtype pdt, either xdt or float32 (a
// 16-bit input with float32 parameters: PyTorch's mixed precision).  The
// saved statistics are float32.  Sums take float32 lanes of at most
// AMPC_RED_LANES terms folded into doubles, in a fixed order (the results do
// not depend on the thread count); variances are two-pass.  Every tensor is
// contiguous.  Each returns an ampc_nn_status.

/* batch norm over x (N, C, HW): statistics per channel, over N and HW */
typedef struct {
    int64_t n, c, hw;
    int training;           /* 1: batch statistics; 0: the running ones */
    double momentum;        /* running = (1 - m) running + m batch */
    double eps;
} ampc_batch_norm_shape;

/* x -> y (N, C, HW) of xdt.  weight, bias (C): NULL for ones and zeros.
 * running_mean, running_var (C): updated in place when training (the
 * variance unbiased), read otherwise; NULL in training when not tracked.
 * mean, invstd (C) receive the statistics y was normalised with: the batch
 * mean and 1 / sqrt(biased variance + eps), or the running ones.  An empty
 * batch (N * HW == 0) leaves the running statistics as they are. */
typedef int (*ampc_batch_norm_fwd_fn)(const ampc_batch_norm_shape *s,
                                      ampc_dtype xdt, ampc_dtype pdt,
                                      const void *x, const void *weight,
                                      const void *bias, void *running_mean,
                                      void *running_var, float *mean,
                                      float *invstd, void *y);
/* grad_y, x (N, C, HW), the forward's mean and invstd -> grad_x (xdt),
 * grad_weight, grad_bias (C, pdt); each output NULL when not wanted.
 * training: the gradient through the batch statistics; else through the
 * fixed running ones (grad_y * weight * invstd). */
typedef int (*ampc_batch_norm_bwd_fn)(const ampc_batch_norm_shape *s,
                                      ampc_dtype xdt, ampc_dtype pdt,
                                      const void *grad_y, const void *x,
                                      const void *weight, const float *mean,
                                      const float *invstd, void *grad_x,
                                      void *grad_weight, void *grad_bias);

/* layer norm over the last D elements of x (rows, D) */
typedef struct {
    int64_t rows, d;
    double eps;
} ampc_layer_norm_shape;

/* x -> y (rows, D) of xdt, weight, bias (D) or NULL; mean, rstd (rows)
 * receive each row's mean and 1 / sqrt(biased variance + eps). */
typedef int (*ampc_layer_norm_fwd_fn)(const ampc_layer_norm_shape *s,
                                      ampc_dtype xdt, ampc_dtype pdt,
                                      const void *x, const void *weight,
                                      const void *bias, float *mean,
                                      float *rstd, void *y);
/* grad_y, x (rows, D), mean, rstd -> grad_x (xdt), grad_weight, grad_bias
 * (D, pdt), each NULL when not wanted. */
typedef int (*ampc_layer_norm_bwd_fn)(const ampc_layer_norm_shape *s,
                                      ampc_dtype xdt, ampc_dtype pdt,
                                      const void *grad_y, const void *x,
                                      const void *weight, const float *mean,
                                      const float *rstd, void *grad_x,
                                      void *grad_weight, void *grad_bias);

/* group norm over x (N, C, HW): statistics per (sample, group), over the
 * group's C / groups channels and HW, which lie contiguous in x */
typedef struct {
    int64_t n, c, hw, groups;
    double eps;
} ampc_group_norm_shape;

/* x -> y (N, C, HW) of xdt, with a per-channel affine: weight, bias (C) or
 * NULL.  mean, rstd (N, groups) receive each group's mean and 1 / sqrt(biased
 * variance + eps) (an empty group: 0 and 1 / sqrt(eps)). */
typedef int (*ampc_group_norm_fwd_fn)(const ampc_group_norm_shape *s,
                                      ampc_dtype xdt, ampc_dtype pdt,
                                      const void *x, const void *weight,
                                      const void *bias, float *mean,
                                      float *rstd, void *y);
/* grad_y, x (N, C, HW), mean, rstd -> grad_x (xdt), grad_weight, grad_bias
 * (C, pdt), each NULL when not wanted: one pass for the per-(sample,
 * channel) sums that all three need, one more for grad_x. */
typedef int (*ampc_group_norm_bwd_fn)(const ampc_group_norm_shape *s,
                                      ampc_dtype xdt, ampc_dtype pdt,
                                      const void *grad_y, const void *x,
                                      const void *weight, const float *mean,
                                      const float *rstd, void *grad_x,
                                      void *grad_weight, void *grad_bias);

#endif /* AMPC_KERNELS_NORM_H */
