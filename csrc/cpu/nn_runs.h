/* nn_runs.h - the reductions over a run of floats that the NN loops share
 * (cpu/nn_loops.h's softmax, cpu/loss_loops.h's cross-entropy): the max,
 * the sum, and the sum of exp(x - max), each vectorisable at every level
 * and folded in a fixed order (the same bits at every level and thread
 * count).  A narrow run (a row of 33 or 128 logits) takes AMPC_NN_LANES
 * lanes, a long one loops.h's AMPC_RED_LANES.
 */
#ifndef AMPC_CPU_NN_RUNS_H
#define AMPC_CPU_NN_RUNS_H

#include <stdint.h>
#include <string.h>

#include "cpu/reduce_loops.h"
#include "nn_math.h"

#define AMPC_NN_LANES 16            /* lanes of a narrow run's max and sum */

_Static_assert(AMPC_NN_LANES == 16 && AMPC_RED_LANES == 64,
               "the narrow runs fold 64 lanes into 16, and 16 into one");

/* The larger of a and b, b only when it is greater: one maxps, where
 * ampc_nn_max's NaN test makes gcc branch outside a vectorised loop (the
 * folds of the lanes), and on random logits that branch is mispredicted
 * half the time.  NaN is not propagated: see ampc_nn_max_run. */
static AMPC_ALWAYS_INLINE float
ampc_nn_greater(float a, float b)
{
    return b > a ? b : a;
}

/* The fold of AMPC_NN_LANES lanes by a fixed halving tree, spelled out (a
 * loop over the widths leaves gcc a scalar chain): the max and the sum. */
static AMPC_ALWAYS_INLINE float
ampc_nn_lanes_max(float *a)
{
    int l;
    for (l = 0; l < 8; l++) {
        a[l] = ampc_nn_greater(a[l], a[l + 8]);
    }
    for (l = 0; l < 4; l++) {
        a[l] = ampc_nn_greater(a[l], a[l + 4]);
    }
    return ampc_nn_greater(ampc_nn_greater(a[0], a[2]),
                           ampc_nn_greater(a[1], a[3]));
}

static AMPC_ALWAYS_INLINE float
ampc_nn_lanes_sum(float *a)
{
    int l;
    for (l = 0; l < 8; l++) {
        a[l] += a[l + 8];
    }
    for (l = 0; l < 4; l++) {
        a[l] += a[l + 4];
    }
    return (a[0] + a[2]) + (a[1] + a[3]);
}

/* The max of x[0:n], n >= 1, a softmax row's shift: a long run in
 * AMPC_RED_LANES lanes, then AMPC_NN_LANES lanes, whose last step takes
 * the run's last AMPC_NN_LANES elements again (the max does not mind
 * repeats), so that a narrow row (128 logits, 33) needs no scalar loop.
 * NaN may be passed over; the row's sum of exp(x - max) is NaN then all
 * the same, and so is every output, as torch gives.
 * NOTE: `#pragma GCC unroll 1` keeps gcc from unrolling a 16-lane loop
 * into statements that it then fails to vectorise. */
static AMPC_ALWAYS_INLINE float
ampc_nn_max_run(const float *x, int64_t n)
{
    float a[AMPC_NN_LANES];
    int64_t i;
    int l;
    if (n < AMPC_NN_LANES) {
        float m = x[0];
        for (i = 1; i < n; i++) {
            m = ampc_nn_greater(m, x[i]);
        }
        return m;
    }
    memcpy(a, x, sizeof(a));
    i = AMPC_NN_LANES;
    if (n >= 2 * AMPC_RED_LANES) {
        float w[AMPC_RED_LANES];
        memcpy(w, x, sizeof(w));
        for (i = AMPC_RED_LANES; i + AMPC_RED_LANES <= n;
             i += AMPC_RED_LANES) {
            for (l = 0; l < AMPC_RED_LANES; l++) {
                w[l] = ampc_nn_greater(w[l], x[i + l]);
            }
        }
        for (l = 0; l < AMPC_NN_LANES; l++) {
            a[l] = ampc_nn_greater(ampc_nn_greater(w[l], w[l + 16]),
                                   ampc_nn_greater(w[l + 32], w[l + 48]));
        }
    }
    for (; i + AMPC_NN_LANES <= n; i += AMPC_NN_LANES) {
#pragma GCC unroll 1
        for (l = 0; l < AMPC_NN_LANES; l++) {
            a[l] = ampc_nn_greater(a[l], x[i + l]);
        }
    }
    if (i < n) {
        const float *last = x + n - AMPC_NN_LANES;
#pragma GCC unroll 1
        for (l = 0; l < AMPC_NN_LANES; l++) {
            a[l] = ampc_nn_greater(a[l], last[l]);
        }
    }
    return ampc_nn_lanes_max(a);
}

/* Sum of x[0:n], n <= AMPC_RED_BLOCK: loops.h's lanes for a long run;
 * AMPC_NN_LANES lanes for a narrower one, whose last step takes the run's
 * last AMPC_NN_LANES elements with those already added masked to zero; in
 * order below one step. */
static AMPC_ALWAYS_INLINE float
ampc_nn_sum_run(const float *x, int64_t n)
{
    float a[AMPC_NN_LANES] = {0.0f};
    int64_t i;
    int l;
    if (n >= 2 * AMPC_RED_LANES) {
        return ampc_sum_lanes_f32(x, n);
    }
    if (n < AMPC_NN_LANES) {
        float s = 0.0f;
        for (i = 0; i < n; i++) {
            s += x[i];
        }
        return s;
    }
    for (i = 0; i + AMPC_NN_LANES <= n; i += AMPC_NN_LANES) {
#pragma GCC unroll 1
        for (l = 0; l < AMPC_NN_LANES; l++) {
            a[l] += x[i + l];
        }
    }
    if (i < n) {
        const float *last = x + n - AMPC_NN_LANES;
        int64_t seen = i - (n - AMPC_NN_LANES);
#pragma GCC unroll 1
        for (l = 0; l < AMPC_NN_LANES; l++) {
            uint32_t keep = 0u - (uint32_t)(l >= seen);
            a[l] += ampc_f32_from_bits(ampc_f32_bits(last[l]) & keep);
        }
    }
    return ampc_nn_lanes_sum(a);
}

/* e[i] = exp(x[i] - m) for i < n <= AMPC_RED_BLOCK, m the max of x; returns
 * their sum. */
static AMPC_ALWAYS_INLINE float
ampc_exp_sum_f32(const float *x, int64_t n, float m, float *e)
{
    for (int64_t i = 0; i < n; i++) {
        e[i] = ampc_exp_nonpos_f32(x[i] - m);
    }
    return ampc_nn_sum_run(e, n);
}

#endif /* AMPC_CPU_NN_RUNS_H */
