/* kernels_extra.h - kernel types of the ops added beside kernels.h's
 * families: cummax/cummin, histc, adaptive_max_pool2d, embedding_bag and
 * (interp.h) interpolate's separable modes (Python side: csrc/ops_stats.c,
 * csrc/nn_adaptive_max_pool.c, csrc/nn_embedding_bag.c, nn_interp.c).  Included by kernels.h before the table, inside
 * its extern "C"; kernels.h's conventions hold (contiguous tensors, float16
 * and bfloat16 computed in float32 and rounded once).
 */
#ifndef AMPC_KERNELS_EXTRA_H
#define AMPC_KERNELS_EXTRA_H

// ----------------------------------------------------------------------------
// cummax and cummin along one dim (stats_math.h ampc_cummax_takes)

/* x (outer, n, inner) of dt (any dtype) -> values (outer, n, inner) of dt
 * and indices: the running max (is_min: min) along the dim and the
 * position it came from.  torch's rule: x[j] replaces the running value
 * when x[j] >= it (<= for min) or x[j] is NaN, so a later tie wins and a
 * NaN holds until the next NaN. */
typedef void (*ampc_scan_minmax_fn)(int is_min, ampc_dtype dt, int64_t outer,
                                    int64_t n, int64_t inner, const void *x,
                                    void *values, int64_t *indices);

// ----------------------------------------------------------------------------
// histc (stats_math.h ampc_histc_bin)

/* n elements into bins equal bins over [lo, hi] (lo < hi, both already
 * rounded to the input's dtype); elements outside it (and NaN) are not
 * counted. */
typedef struct {
    int64_t n, bins;
    float lo, hi;
} ampc_histc_shape;

/* x (n) of a float dt -> out (bins) of dt: the counts, taken exactly and
 * rounded once.  0, or -1 when out of memory. */
typedef int (*ampc_histc_fn)(const ampc_histc_shape *s, ampc_dtype dt,
                             const void *x, void *out);

// ----------------------------------------------------------------------------
// adaptive_max_pool2d (windows: avg_pool_math.h ampc_avg_window, adaptive)

/* x (planes, H, W) -> y, idx (planes, OH, OW), OH, OW >= 1: each output
 * the max of its adaptive window (torch's start floor(i H / OH), end
 * ceil((i + 1) H / OH)) by max_pool2d's rule (nn_math.h ampc_pool_takes),
 * idx the flat index of the max in its H*W plane.  Reads planes, h, w, oh
 * and ow of s; the backward is max_pool2d_bwd at these indices. */
typedef void (*ampc_adaptive_max_pool2d_fn)(const ampc_pool2d_shape *s,
                                            ampc_dtype dt, const void *x,
                                            void *y, int64_t *idx);

// ----------------------------------------------------------------------------
// embedding_bag

typedef enum {
    AMPC_BAG_SUM = 0,
    AMPC_BAG_MEAN,
    AMPC_BAG_MAX
} ampc_bag_mode;

/* n indices into a (num, D) weight, in bags: bag b holds the indices
 * [offsets[b], offsets[b + 1]) (offsets has bags + 1 entries, from 0 to n,
 * non-decreasing).  An index equal to padding_idx (-1: none) is skipped
 * and not counted. */
typedef struct {
    int64_t n, bags, d, num, padding_idx;
    ampc_bag_mode mode;
} ampc_bag_shape;

/* weight (num, D), indices (n), offsets (bags + 1), psw (n, of dt; NULL
 * for all ones; sum only) -> out (bags, D) of dt, bag_size (bags): the
 * indices counted, max_idx (bags, D; max only, else NULL): the weight row
 * of each max, -1 for an empty bag.  sum: the float32 sum of psw[k] *
 * weight[idx[k]] in order; mean: the sum over bag_size; max: the first
 * largest (a later element wins only when greater).  An empty bag gives
 * 0.  Returns an ampc_nn_status: AMPC_NN_BAD_INDEX for an index outside
 * [0, num) (its bag is then incomplete). */
typedef int (*ampc_embedding_bag_fwd_fn)(const ampc_bag_shape *s,
                                         ampc_dtype dt, const void *weight,
                                         const int64_t *indices,
                                         const int64_t *offsets,
                                         const void *psw, void *out,
                                         int64_t *bag_size,
                                         int64_t *max_idx);

/* grad (bags, D), indices, offsets, bag_size, max_idx as the forward's,
 * scale (n) float32 or NULL (all ones) -> grad_weight (num, D) of dt,
 * overwritten: sum and mean add scale[k] * grad[b] (mean: over bag_size[b])
 * at row idx[k] for each counted index k of bag b; max adds grad[b, c] at
 * (max_idx[b, c], c).  float32 sums, rounded once.  Returns an
 * ampc_nn_status. */
typedef int (*ampc_embedding_bag_bwd_fn)(const ampc_bag_shape *s,
                                         ampc_dtype dt, const void *grad,
                                         const int64_t *indices,
                                         const int64_t *offsets,
                                         const float *scale,
                                         const int64_t *bag_size,
                                         const int64_t *max_idx,
                                         void *grad_weight);

// ----------------------------------------------------------------------------
// interpolate's separable modes (csrc/nn_interp.c)

#include "interp.h"

#endif /* AMPC_KERNELS_EXTRA_H */
