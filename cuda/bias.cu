/* bias.cu - the element-wise parts of linear, matmul and conv2d that
 * cuBLASLt and cuDNN do not fuse: the GEMM epilogue (bias per row or per
 * column, beta, relu, one rounding), conv2d's bias + relu, the bias
 * gradient (slot bias_grad: a deterministic two-pass sum, float32
 * accumulation), and the gather of a GEMM operand whose strides cuBLAS
 * cannot express.
 */
#include <string.h>

#include "linalg.cuh"

#define BIAS_THREADS 256
/* Enough blocks to fill an H200 (132 SMs) a few times over. */
#define BIAS_TARGET_BLOCKS 1024
#define BIAS_MAX_GRID 65535

static unsigned int
grid_for(int64_t n, int threads)
{
    int64_t g = CEIL_DIV(n, (int64_t)threads);
    if (g < 1) {
        g = 1;
    }
    /* grid-stride loops cover the rest; this many blocks saturate any GPU */
    return (unsigned int)(g < 65536 ? g : 65536);
}

// ----------------------------------------------------------------------------
// GEMM epilogue

/* acc (batch, m, n) float32 or NULL; C (batch, m, n) at c[b*sbc + i*ldc +
 * j]; bias (m,) or (n,).  One thread per element of C, grid-stride, 64-bit
 * indices. */
template <typename CS, typename BS>
__global__ void
gemm_epilogue_kernel(int64_t total, int64_t m, int64_t n, const float *acc,
                     typename CS::type *c, int64_t ldc, int64_t sbc, int beta,
                     const typename BS::type *bias, int mode, int relu)
{
    int64_t mn = m * n;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = idx / mn, r = idx - b * mn;
        int64_t i = r / n, j = r - i * n;
        typename CS::type *p = c + b * sbc + i * ldc + j;
        /* the CPU's order: (AB + C) + bias, then relu, rounded once */
        float x = acc != NULL ? acc[idx] : 0.0f;
        if (beta) {
            x += CS::load(*p);
        }
        if (mode == AMPC_BIAS_ROW) {
            x += BS::load(bias[i]);
        }
        else if (mode == AMPC_BIAS_COL) {
            x += BS::load(bias[j]);
        }
        if (relu) {
            x = ampc_relu_dev(x);
        }
        *p = CS::store(x);
    }
}

template <typename CS, typename BS>
static int
gemm_epilogue_run(int64_t total, int64_t m, int64_t n, const float *acc,
                  void *c, int64_t ldc, int64_t sbc, int beta,
                  const void *bias, ampc_bias_mode mode, int relu)
{
    gemm_epilogue_kernel<CS, BS>
        <<<grid_for(total, BIAS_THREADS), BIAS_THREADS, 0,
           ampc_cuda_stream()>>>(total, m, n, acc,
                                 (typename CS::type *)c, ldc, sbc, beta,
                                 (const typename BS::type *)bias, (int)mode,
                                 relu);
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

template <typename CS>
static int
gemm_epilogue_bias(int64_t total, int64_t m, int64_t n, const float *acc,
                   void *c, int64_t ldc, int64_t sbc, int beta,
                   const void *bias, ampc_dtype bdt, ampc_bias_mode mode,
                   int relu)
{
    if (bias == NULL) {
        mode = AMPC_BIAS_NONE;
    }
    switch (bdt) {
    case AMPC_FLOAT16:
        return gemm_epilogue_run<CS, ampc_st_f16>(total, m, n, acc, c, ldc,
                                                  sbc, beta, bias, mode,
                                                  relu);
    case AMPC_BFLOAT16:
        return gemm_epilogue_run<CS, ampc_st_bf16>(total, m, n, acc, c, ldc,
                                                   sbc, beta, bias, mode,
                                                   relu);
    default:
        return gemm_epilogue_run<CS, ampc_st_f32>(total, m, n, acc, c, ldc,
                                                  sbc, beta, bias, mode,
                                                  relu);
    }
}

int
ampc_gemm_epilogue_launch(int64_t batch, int64_t m, int64_t n,
                          const float *acc, void *c, ampc_dtype cdt,
                          int64_t ldc, int64_t sbc, int beta,
                          const void *bias, ampc_dtype bdt,
                          ampc_bias_mode mode, int relu)
{
    int64_t total = batch * m * n;
    if (total == 0) {
        return 0;
    }
    switch (cdt) {
    case AMPC_FLOAT16:
        return gemm_epilogue_bias<ampc_st_f16>(total, m, n, acc, c, ldc, sbc,
                                               beta, bias, bdt, mode, relu);
    case AMPC_BFLOAT16:
        return gemm_epilogue_bias<ampc_st_bf16>(total, m, n, acc, c, ldc,
                                                sbc, beta, bias, bdt, mode,
                                                relu);
    default:
        return gemm_epilogue_bias<ampc_st_f32>(total, m, n, acc, c, ldc, sbc,
                                               beta, bias, bdt, mode, relu);
    }
}

// ----------------------------------------------------------------------------
// conv2d bias + relu

/* y (planes, hw), in place.  grid.y walks the planes (grid-stride, as
 * planes may exceed 65535), grid.x the positions of a plane, so each thread
 * reads its plane's bias once and the loads stay coalesced.  VEC: every
 * plane starts 16-byte aligned (hw a multiple of the elements in 16 bytes),
 * so each thread moves 16 bytes per load and store. */
template <typename S, bool VEC>
__global__ void
bias_act_kernel(int64_t planes, int64_t oc_count, int64_t hw,
                const typename S::type *bias, int relu, typename S::type *y)
{
    typedef typename S::type T;
    constexpr int V = VEC ? (int)(16 / sizeof(T)) : 1;
    int64_t n = hw / V;
    for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
        float b = bias != NULL ? S::load(bias[p % oc_count]) : 0.0f;
        T *row = y + p * hw;
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
             i < n; i += (int64_t)gridDim.x * blockDim.x) {
            T e[V];
            if (VEC) {
                uint4 v = reinterpret_cast<const uint4 *>(row)[i];
                memcpy(e, &v, sizeof(v));
            }
            else {
                e[0] = row[i];
            }
#pragma unroll
            for (int j = 0; j < V; j++) {
                float x = S::load(e[j]) + b;
                e[j] = S::store(relu ? ampc_relu_dev(x) : x);
            }
            if (VEC) {
                uint4 v;
                memcpy(&v, e, sizeof(v));
                reinterpret_cast<uint4 *>(row)[i] = v;
            }
            else {
                row[i] = e[0];
            }
        }
    }
}

template <typename S>
static int
bias_act_run(int64_t planes, int64_t oc_count, int64_t hw, const void *bias,
             int relu, void *y)
{
    int64_t per16 = 16 / (int64_t)sizeof(typename S::type);
    bool vec = hw % per16 == 0 && (uintptr_t)y % 16 == 0;
    int64_t gx = CEIL_DIV(vec ? hw / per16 : hw, (int64_t)BIAS_THREADS);
    dim3 grid((unsigned int)(gx < 1024 ? gx : 1024),
              (unsigned int)(planes < BIAS_MAX_GRID ? planes
                                                    : BIAS_MAX_GRID));
    if (vec) {
        bias_act_kernel<S, true><<<grid, BIAS_THREADS, 0,
                                   ampc_cuda_stream()>>>(
            planes, oc_count, hw, (const typename S::type *)bias, relu,
            (typename S::type *)y);
    }
    else {
        bias_act_kernel<S, false><<<grid, BIAS_THREADS, 0,
                                    ampc_cuda_stream()>>>(
            planes, oc_count, hw, (const typename S::type *)bias, relu,
            (typename S::type *)y);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

int
ampc_bias_act_launch(ampc_dtype dt, int64_t planes, int64_t oc_count,
                     int64_t hw, const void *bias, int relu, void *y)
{
    if (planes == 0 || hw == 0 || (bias == NULL && !relu)) {
        return 0;
    }
    switch (dt) {
    case AMPC_FLOAT16:
        return bias_act_run<ampc_st_f16>(planes, oc_count, hw, bias, relu, y);
    case AMPC_BFLOAT16:
        return bias_act_run<ampc_st_bf16>(planes, oc_count, hw, bias, relu,
                                          y);
    default:
        return bias_act_run<ampc_st_f32>(planes, oc_count, hw, bias, relu, y);
    }
}

// ----------------------------------------------------------------------------
// bias gradient: db (C) = sum of dy (outer, C, inner) over outer and inner

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024);
 * the result is valid in thread 0.  Fixed shuffle order: deterministic. */
static __device__ __forceinline__ float
block_sum(float v)
{
    __shared__ float warp_sums[32];
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, off);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_sums[warp] = v;
    }
    __syncthreads();
    int nwarps = blockDim.x >> 5;
    v = (int)threadIdx.x < nwarps ? warp_sums[threadIdx.x] : 0.0f;
    if (warp == 0) {
        for (int off = 16; off > 0; off >>= 1) {
            v += __shfl_down_sync(0xffffffffu, v, off);
        }
    }
    return v;
}

/* inner > 1 (conv).  Block (blockIdx.x = channel c, blockIdx.y = split s)
 * sums the flat range [s*chunk, (s+1)*chunk) of the channel's outer*inner
 * elements, element q at dy[(q / inner) * C * inner + c * inner + q %
 * inner]: consecutive threads read consecutive positions of a plane.  Each
 * thread steps q by blockDim.x, so (n, p) = divmod(q, inner) advances by a
 * fixed (dn, dp) and one carry, not a 64-bit division per element.
 * partial (nsplit, C) float32. */
template <typename S>
__global__ void
bias_grad_planes_kernel(int64_t outer, int64_t c_count, int64_t inner,
                        int64_t chunk, const typename S::type *dy,
                        float *partial)
{
    int64_t c = blockIdx.x, total = outer * inner;
    int64_t q0 = (int64_t)blockIdx.y * chunk;
    int64_t q1 = q0 + chunk < total ? q0 + chunk : total;
    int64_t q = q0 + threadIdx.x;
    int64_t n = q / inner, p = q - n * inner;
    int64_t dn = blockDim.x / inner, dp = blockDim.x - dn * inner;
    int64_t plane = c_count * inner;
    const typename S::type *base = dy + c * inner;
    float acc = 0.0f;
    for (; q < q1; q += blockDim.x) {
        acc += S::load(base[n * plane + p]);
        n += dn;
        p += dp;
        if (p >= inner) {
            p -= inner;
            n++;
        }
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) {
        partial[(int64_t)blockIdx.y * c_count + c] = acc;
    }
}

/* inner == 1 (linear): dy (outer, C) row-major.  Block (32, 8): column j =
 * blockIdx.x*32 + threadIdx.x, so a warp reads 32 adjacent columns of a
 * row; the 8 row lanes of split s = blockIdx.y stride through its rows and
 * are summed in a fixed order through shared memory. */
template <typename S>
__global__ void
bias_grad_rows_kernel(int64_t outer, int64_t c_count, int64_t chunk,
                      const typename S::type *dy, float *partial)
{
    __shared__ float sums[8][33];
    int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * chunk;
    int64_t r1 = r0 + chunk < outer ? r0 + chunk : outer;
    float acc = 0.0f;
    if (j < c_count) {
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
            acc += S::load(dy[r * c_count + j]);
        }
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < c_count) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) {
            t += sums[k][threadIdx.x];
        }
        partial[(int64_t)blockIdx.y * c_count + j] = t;
    }
}

/* db[c] = round(sum over s of partial[s, c]), s in order. */
template <typename S>
__global__ void
bias_grad_finish_kernel(int64_t c_count, int64_t nsplit,
                        const float *partial, typename S::type *db)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         c < c_count; c += (int64_t)gridDim.x * blockDim.x) {
        float t = 0.0f;
        for (int64_t s = 0; s < nsplit; s++) {
            t += partial[s * c_count + c];
        }
        db[c] = S::store(t);
    }
}

template <typename S>
static int
bias_grad_run(int64_t outer, int64_t c_count, int64_t inner, const void *dy,
              void *db)
{
    cudaStream_t st = ampc_cuda_stream();
    int64_t total = outer * inner;
    /* splits: enough blocks in all, each with a few hundred elements at
     * least; the split count is fixed by the shape, so the sum is too */
    int64_t per_block = inner > 1 ? (int64_t)BIAS_THREADS * 4 : 8 * 16;
    int64_t col_blocks = inner > 1 ? c_count : CEIL_DIV(c_count, 32);
    int64_t nsplit = CEIL_DIV((int64_t)BIAS_TARGET_BLOCKS, col_blocks);
    int64_t most = CEIL_DIV(total, per_block);
    nsplit = nsplit < most ? nsplit : most;
    nsplit = nsplit < BIAS_MAX_GRID ? nsplit : BIAS_MAX_GRID;
    nsplit = nsplit > 1 ? nsplit : 1;
    int64_t chunk = total > 0 ? CEIL_DIV(total, nsplit) : 0;
    if (inner == 1) {
        chunk = outer > 0 ? CEIL_DIV(outer, nsplit) : 0;
    }
    float *partial = NULL;
    int rc = ampc_cuda_scratch_alloc(
        (size_t)(nsplit * c_count) * sizeof(float), (void **)&partial);
    if (rc != 0) {
        return rc;
    }
    if (inner > 1) {
        dim3 grid((unsigned int)c_count, (unsigned int)nsplit);
        bias_grad_planes_kernel<S><<<grid, BIAS_THREADS, 0, st>>>(
            outer, c_count, inner, chunk, (const typename S::type *)dy,
            partial);
    }
    else {
        dim3 grid((unsigned int)CEIL_DIV(c_count, 32),
                  (unsigned int)nsplit);
        bias_grad_rows_kernel<S><<<grid, dim3(32, 8), 0, st>>>(
            outer, c_count, chunk, (const typename S::type *)dy, partial);
    }
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) {
        bias_grad_finish_kernel<S>
            <<<grid_for(c_count, BIAS_THREADS), BIAS_THREADS, 0, st>>>(
                c_count, nsplit, partial, (typename S::type *)db);
        err = cudaGetLastError();
    }
    /* NOTE: freed while the kernels may still run: the caching allocator
     * hands the block only to later work on this stream. */
    ampc_cuda_scratch_free(partial);
    if (err != cudaSuccess) {
        ampc_cuda_record_error(__FILE__, __LINE__, "bias_grad launch",
                               (int)err);
        return (int)err;
    }
    return 0;
}

extern "C" int
ampc_bias_grad_cuda(ampc_dtype dt, int64_t outer, int64_t c, int64_t inner,
                    const void *dy, void *db)
{
    if (c == 0) {
        return 0;
    }
    if (outer == 0 || inner == 0) {
        /* the sum of nothing: +0.0 has all bits zero in every dtype */
        AMPC_CUDA_CHECK(cudaMemsetAsync(
            db, 0, (size_t)c * ampc_dtype_size[dt], ampc_cuda_stream()));
        return 0;
    }
    if (c > 0x7fffffffLL) {
        ampc_cuda_record_error(__FILE__, __LINE__, "bias_grad: C > 2^31",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }
    switch (dt) {
    case AMPC_FLOAT16:
        return bias_grad_run<ampc_st_f16>(outer, c, inner, dy, db);
    case AMPC_BFLOAT16:
        return bias_grad_run<ampc_st_bf16>(outer, c, inner, dy, db);
    default:
        return bias_grad_run<ampc_st_f32>(outer, c, inner, dy, db);
    }
}

// ----------------------------------------------------------------------------
// operand gather

/* dst (batch, rows, cols) contiguous from strided src; one thread per
 * element of dst (writes coalesced), 64-bit indices. */
template <typename T>
__global__ void
pack_kernel(int64_t total, int64_t rows, int64_t cols, const T *src,
            int64_t sb, int64_t rs, int64_t cs, T *dst)
{
    int64_t rc = rows * cols;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = idx / rc, r = idx - b * rc;
        int64_t i = r / cols, j = r - i * cols;
        dst[idx] = src[b * sb + i * rs + j * cs];
    }
}

int
ampc_pack_launch(size_t es, int64_t batch, int64_t rows, int64_t cols,
                 const void *src, int64_t sb, int64_t rs, int64_t cs,
                 void *dst)
{
    int64_t total = batch * rows * cols;
    if (total == 0) {
        return 0;
    }
    unsigned int grid = grid_for(total, BIAS_THREADS);
    if (es == 2) {
        pack_kernel<uint16_t><<<grid, BIAS_THREADS, 0, ampc_cuda_stream()>>>(
            total, rows, cols, (const uint16_t *)src, sb, rs, cs,
            (uint16_t *)dst);
    }
    else {
        pack_kernel<uint32_t><<<grid, BIAS_THREADS, 0, ampc_cuda_stream()>>>(
            total, rows, cols, (const uint32_t *)src, sb, rs, cs,
            (uint32_t *)dst);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
