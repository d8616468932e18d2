/* norm.cuh - what the normalisation kernels (norm.cu: batch norm and
 * layer norm; group_norm.cu) share: the float32 accumulators folded into
 * doubles, and the dispatch over the input's and the parameters' dtypes.
 */
#ifndef AMPC_NORM_CUH
#define AMPC_NORM_CUH

#include "nn_common.cuh"
#include "norm_math.h"

#define AMPC_NORM_FOLD 64           /* float32 terms per double fold */

/* Float32 accumulators folded into doubles every AMPC_NORM_FOLD terms. */
struct norm_acc {
    float a1 = 0.0f, a2 = 0.0f;
    double d1 = 0.0, d2 = 0.0;
    int k = 0;

    __device__ __forceinline__ void
    add(int kind, float x, float g, float m)
    {
        ampc_norm_term(kind, x, g, m, &a1, &a2);
        if (++k == AMPC_NORM_FOLD) {
            fold();
        }
    }

    __device__ __forceinline__ void
    fold()
    {
        d1 += a1;
        d2 += a2;
        a1 = a2 = 0.0f;
        k = 0;
    }
};

/* Runs BODY with constexpr XT (x's dtype) and PT (the parameters': XT or
 * float32); returns cudaErrorInvalidValue from the enclosing function for
 * any other pair. */
#define NORM_DISPATCH(xdt, pdt, ...)                                        \
    AMPC_NN_DISPATCH(xdt, XT, {                                             \
        if (pdt == XT) {                                                    \
            constexpr ampc_dtype PT = XT;                                   \
            __VA_ARGS__;                                                    \
        }                                                                   \
        else if (pdt == AMPC_FLOAT32) {                                     \
            constexpr ampc_dtype PT = AMPC_FLOAT32;                         \
            __VA_ARGS__;                                                    \
        }                                                                   \
        else {                                                              \
            ampc_cuda_record_error(__FILE__, __LINE__,                      \
                                   "unsupported parameter dtype",           \
                                   (int)cudaErrorInvalidValue);             \
            return (int)cudaErrorInvalidValue;                              \
        }                                                                   \
    })

#endif /* AMPC_NORM_CUH */
