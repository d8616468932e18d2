/* interp.h - the kernel ABI of interpolate's separable modes (linear,
 * bilinear, trilinear, bicubic, and antialiased bilinear and bicubic):
 * the geometry and the slot types.  Included by kernels_extra.h (for
 * kernels.h's table); the per-output taps are interp_math.h's, shared by
 * the CPU loops (cpu/interp_loops.h) and the CUDA kernels (cuda/interp.cu).
 *
 * Each spatial axis is resampled on its own: output o along an axis reads
 * the inputs [first, first + count) of that axis with float32 weights
 * (interp_math.h ampc_interp_span).  Shapes are (planes, D, H, W) ->
 * (planes, OD, OH, OW) with planes = N * C; fewer spatial axes have the
 * outer ones of size 1 (copy axes).
 */
#ifndef AMPC_INTERP_H
#define AMPC_INTERP_H

#define AMPC_INTERP_AXES 3

typedef enum {
    AMPC_INTERP_LINEAR = 0,     /* two taps, torch's linear lambdas */
    AMPC_INTERP_CUBIC,          /* four taps, A = -0.75, clamped at the
                                 * borders (folded onto the edge pixel) */
    AMPC_INTERP_AA_LINEAR,      /* antialias: the triangle filter over the
                                 * support, normalised (torch's _aa) */
    AMPC_INTERP_AA_CUBIC        /* antialias: the cubic filter, A = -0.5 */
} ampc_interp_kind;

/* One axis: input size n, output size on; scale is torch's
 * area_pixel_compute_scale in float32 (align_corners: (n - 1) / (on - 1),
 * else 1 / scale_factor when one is used, else n / on); copy: output o is
 * input o (a size-1 padding axis, or torch's same-size shortcut); taps:
 * the most inputs an output reads (ampc_interp_max_taps). */
typedef struct {
    int64_t n, on;
    float scale;
    int align_corners, copy, taps;
} ampc_interp_axis;

typedef struct {
    int64_t planes;
    ampc_interp_kind kind;
    ampc_interp_axis ax[AMPC_INTERP_AXES];     /* D, H, W */
} ampc_interp_shape;

/* x (planes, D, H, W) -> y (planes, OD, OH, OW):
 * y = sum_d wd (sum_h wh (sum_w ww x)), each sum in float32 from 0 in
 * the order of its taps, rounded once to dt.  Returns an ampc_nn_status. */
typedef int (*ampc_interp_fwd_fn)(const ampc_interp_shape *s, ampc_dtype dt,
                                  const void *x, void *y);
/* grad_out (planes, OD, OH, OW) -> grad_in (planes, D, H, W), the adjoint:
 * each input element sum_ow ww (sum_oh wh (sum_od wd g)) over the outputs
 * that read it, in increasing order, in float32 from 0 (no atomics: the
 * same bits whatever the thread count).  Returns an ampc_nn_status. */
typedef int (*ampc_interp_bwd_fn)(const ampc_interp_shape *s, ampc_dtype dt,
                                  const void *grad_out, void *grad_in);

#endif /* AMPC_INTERP_H */
