/* linalg.cuh - what cuda/blas.cu, cuda/dnn.cu and cuda/bias.cu share: the
 * storage-type traits of the three float dtypes and the launchers of the
 * element-wise parts of GEMM and convolution that cuBLASLt and cuDNN do not
 * fuse (bias.cu).  Every launcher queues on ampc_cuda_stream() and returns
 * 0 or an error code.
 */
#ifndef AMPC_LINALG_CUH
#define AMPC_LINALG_CUH

#include <stdint.h>

#include "amp_math.h"
#include "common.cuh"

// ----------------------------------------------------------------------------
// storage types: raw bits, widened and rounded with amp_math.h, so the GPU
// rounds exactly as the CPU does (RNE)

struct ampc_st_f32 {
    typedef float type;
    static __device__ __forceinline__ float load(float v) { return v; }
    static __device__ __forceinline__ float store(float f) { return f; }
};

struct ampc_st_f16 {
    typedef uint16_t type;
    static __device__ __forceinline__ float
    load(uint16_t v)
    {
        return ampc_f16_to_f32(v);
    }
    static __device__ __forceinline__ uint16_t
    store(float f)
    {
        return ampc_f32_to_f16(f);
    }
};

struct ampc_st_bf16 {
    typedef uint16_t type;
    static __device__ __forceinline__ float
    load(uint16_t v)
    {
        return ampc_bf16_to_f32(v);
    }
    static __device__ __forceinline__ uint16_t
    store(float f)
    {
        return ampc_f32_to_bf16(f);
    }
};

/* relu as the CPU's (ampc_relu_f32): keeps NaN, maps -0 to +0. */
static __device__ __forceinline__ float
ampc_relu_dev(float x)
{
    return (x > 0.0f || x != x) ? x : 0.0f;
}

/* Scratch memory freed when the owner goes out of scope, so the CHECK
 * macros' early returns do not leak it.
 * NOTE: freed while queued work may still use it: the caching allocator
 * hands the block only to later work on the same stream. */
struct ampc_scratch {
    void *p = NULL;
    ampc_scratch() = default;
    ampc_scratch(const ampc_scratch &) = delete;
    ampc_scratch &operator=(const ampc_scratch &) = delete;
    ~ampc_scratch()
    {
        if (p != NULL) {
            ampc_cuda_scratch_free(p);
        }
    }
};

// ----------------------------------------------------------------------------
// launchers (bias.cu)

/* The GEMM epilogue cuBLASLt did not fuse, for `batch` products:
 *   C[b] (m, n; row stride ldc, batch stride sbc; dtype cdt)
 *     = round(relu(acc[b] + (beta ? C[b] : 0) + bias))
 * acc: float32 (batch, m, n) contiguous, or NULL for zeros (k == 0); bias:
 * dtype bdt, (m,) for AMPC_BIAS_ROW, (n,) for AMPC_BIAS_COL, or NULL. */
int ampc_gemm_epilogue_launch(int64_t batch, int64_t m, int64_t n,
                              const float *acc, void *c, ampc_dtype cdt,
                              int64_t ldc, int64_t sbc, int beta,
                              const void *bias, ampc_dtype bdt,
                              ampc_bias_mode mode, int relu);

/* y (planes, hw) contiguous, plane p = (n, oc) with oc = p % oc_count:
 * y = relu(y + bias[oc]) in place; bias (oc_count,) or NULL. */
int ampc_bias_act_launch(ampc_dtype dt, int64_t planes, int64_t oc_count,
                         int64_t hw, const void *bias, int relu, void *y);

/* dst (batch, rows, cols) contiguous = src element (b, i, j) at
 * src[b*sb + i*rs + j*cs] (elements of es bytes, 2 or 4). */
int ampc_pack_launch(size_t es, int64_t batch, int64_t rows, int64_t cols,
                     const void *src, int64_t sb, int64_t rs, int64_t cs,
                     void *dst);

/* conv2d without cuDNN (conv_gemm.cu): the conv2d slots' meanings for
 * N > 0 (the slots handle empty batches and the bias gradient). */
int ampc_conv2d_fwd_gemm(const ampc_conv2d_shape *s, ampc_dtype dt,
                         const void *x, const void *w, const void *bias,
                         int relu, void *y);
int ampc_conv2d_bwd_input_gemm(const ampc_conv2d_shape *s, ampc_dtype dt,
                               const void *dy, const void *w, void *dx);
int ampc_conv2d_bwd_weight_gemm(const ampc_conv2d_shape *s, ampc_dtype dt,
                                const void *dy, const void *x, void *dw);

#endif /* AMPC_LINALG_CUH */
