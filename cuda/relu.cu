/* relu.cu - relu's backward on CUDA: grad_in = out <= 0 ? 0 : grad_out, on
 * the bits (nn_math.h ampc_relu_bwd_bits32 / _bits16, the CPU's rule), 16
 * bytes per thread and step where the three buffers are aligned.
 */
#include "nn_common.cuh"

// ----------------------------------------------------------------------------
// CUDA kernels

template <typename U>
__device__ __forceinline__ U
relu_bwd_one(U g, U o, uint16_t inf)
{
    if constexpr (sizeof(U) == 4) {
        return ampc_relu_bwd_bits32(g, o);
    }
    else {
        return ampc_relu_bwd_bits16(g, o, inf);
    }
}

/* grad_out, out, grad_in (n) as raw words U (uint32_t for float32,
 * uint16_t for float16 / bfloat16, whose inf is `inf`); vec: all three are
 * 16-byte aligned. */
template <typename U>
__global__ void
relu_bwd_kernel(int64_t n, const U *g, const U *o, U *gi, uint16_t inf,
                int vec)
{
    constexpr int N = 16 / (int)sizeof(U);
    int64_t stride = nn_nthreads();
    int64_t nvec = vec ? n / N : 0;
    for (int64_t v = nn_tid(); v < nvec; v += stride) {
        uint4 gr = reinterpret_cast<const uint4 *>(g)[v];
        uint4 orr = reinterpret_cast<const uint4 *>(o)[v];
        U *ge = reinterpret_cast<U *>(&gr);
        const U *oe = reinterpret_cast<const U *>(&orr);
#pragma unroll
        for (int k = 0; k < N; k++) {
            ge[k] = relu_bwd_one<U>(ge[k], oe[k], inf);
        }
        reinterpret_cast<uint4 *>(gi)[v] = gr;
    }
    for (int64_t i = nvec * N + nn_tid(); i < n; i += stride) {
        gi[i] = relu_bwd_one<U>(g[i], o[i], inf);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* grad_out, out, grad_in (n) */
extern "C" int
ampc_relu_bwd_cuda(ampc_dtype dt, int64_t n, const void *grad_out,
                   const void *out, void *grad_in)
{
    if (n <= 0) {
        return 0;
    }
    int vec = nn_aligned16(grad_out) && nn_aligned16(out) &&
              nn_aligned16(grad_in);
    cudaStream_t st = ampc_cuda_stream();
    if (dt == AMPC_FLOAT32) {
        int64_t work = vec ? CEIL_DIV(n, 4) : n;
        relu_bwd_kernel<uint32_t><<<nn_blocks(work, AMPC_NN_THREADS),
                                    AMPC_NN_THREADS, 0, st>>>(
            n, (const uint32_t *)grad_out, (const uint32_t *)out,
            (uint32_t *)grad_in, 0, vec);
    }
    else if (dt == AMPC_FLOAT16 || dt == AMPC_BFLOAT16) {
        int64_t work = vec ? CEIL_DIV(n, 8) : n;
        uint16_t inf = dt == AMPC_FLOAT16 ? 0x7c00u : 0x7f80u;
        relu_bwd_kernel<uint16_t><<<nn_blocks(work, AMPC_NN_THREADS),
                                    AMPC_NN_THREADS, 0, st>>>(
            n, (const uint16_t *)grad_out, (const uint16_t *)out,
            (uint16_t *)grad_in, inf, vec);
    }
    else {
        ampc_cuda_record_error(__FILE__, __LINE__, "relu_backward: dtype",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
