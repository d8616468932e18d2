/* scatter_math.h - the per-element rules of scatter_reduce, shared by the
 * CPU loops (csrc/cpu/ref/scatter.c) and the CUDA kernels (cuda/scatter.cu,
 * inside their compare-and-swap loops): each op's identity (where an
 * element starts when include_self is false), the combine of a value into
 * an element, and mean's final division.  Static inline in C, __host__
 * __device__ in nvcc, so the CPU tests cover the code the GPU runs.
 */
#ifndef AMPC_SCATTER_MATH_H
#define AMPC_SCATTER_MATH_H

#include <math.h>
#include <stdint.h>

#include "elementwise_math.h"
#include "kernels.h"
#include "nn_math.h"

// ----------------------------------------------------------------------------
// float32

AMPC_HOST_DEVICE float
ampc_scatter_identity_f32(ampc_scatter_op op)
{
    switch (op) {
    case AMPC_SCATTER_PROD:
        return 1.0f;
    case AMPC_SCATTER_AMAX:
        return -INFINITY;
    case AMPC_SCATTER_AMIN:
        return INFINITY;
    default:
        return 0.0f;
    }
}

/* acc op v.  amax/amin as PyTorch's kernels: a NaN value replaces acc, a
 * NaN acc stays, and a tie keeps acc (so +0 stays +0 against -0). */
AMPC_HOST_DEVICE float
ampc_scatter_combine_f32(ampc_scatter_op op, float acc, float v)
{
    switch (op) {
    case AMPC_SCATTER_PROD:
        return AMPC_MUL(acc, v);
    case AMPC_SCATTER_AMAX:
        return ((v > acc) | (v != v)) ? v : acc;
    case AMPC_SCATTER_AMIN:
        return ((v < acc) | (v != v)) ? v : acc;
    default:
        return AMPC_ADD(acc, v);
    }
}

/* mean: the sum over its n >= 1 terms */
AMPC_HOST_DEVICE float
ampc_scatter_mean_f32(float sum, int64_t n)
{
    return sum / (float)n;
}

// ----------------------------------------------------------------------------
// int64: sums and products wrap (elementwise_math.h), as in PyTorch

AMPC_HOST_DEVICE int64_t
ampc_scatter_identity_i64(ampc_scatter_op op)
{
    switch (op) {
    case AMPC_SCATTER_PROD:
        return 1;
    case AMPC_SCATTER_AMAX:
        return INT64_MIN;
    case AMPC_SCATTER_AMIN:
        return INT64_MAX;
    default:
        return 0;
    }
}

AMPC_HOST_DEVICE int64_t
ampc_scatter_combine_i64(ampc_scatter_op op, int64_t acc, int64_t v)
{
    switch (op) {
    case AMPC_SCATTER_PROD:
        return ampc_mul_i64(acc, v);
    case AMPC_SCATTER_AMAX:
        return ampc_maximum_i64(acc, v);
    case AMPC_SCATTER_AMIN:
        return ampc_minimum_i64(acc, v);
    default:
        return ampc_add_i64(acc, v);
    }
}

/* mean of int64: the sum floor-divided by n >= 1 (PyTorch's
 * rounding_mode="floor": -7 / 3 is -3) */
AMPC_HOST_DEVICE int64_t
ampc_scatter_mean_i64(int64_t sum, int64_t n)
{
    int64_t q = sum / n;
    return (sum % n != 0 && sum < 0) ? q - 1 : q;
}

#endif /* AMPC_SCATTER_MATH_H */
