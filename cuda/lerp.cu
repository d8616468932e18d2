/* lerp.cu - torch.lerp on CUDA tensors over a whole ampc_iter
 * (csrc/iter.c): out = lerp(start, end, weight) with a weight tensor or a
 * float32 number, float32 math in registers (elementwise_math.h
 * ampc_lerp_f32, the CPU's rule) and one rounding at store.  A contiguous
 * path with 128-bit loads and stores, and an N-d strided path for
 * broadcast or strided operands; the CPU twin is csrc/cpu/lerp_loops.h.
 */
#include "nn_common.cuh"

#include "elementwise_math.h"

/* NOTE: everything but the slot is in an anonymous namespace, so that these
 * templates never meet another file's at link time. */
namespace {

/* The iteration's shape and element strides (out, start, end, weight),
 * innermost dim last. */
struct Geometry {
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    int64_t stride[4][AMPC_MAX_DIMS];
};

// ----------------------------------------------------------------------------
// CUDA kernels

/* out, start, end, weight (NULL: `scalar`) (n), all contiguous.  Each
 * thread takes one 16-byte pack of every operand per step when PACKS (all
 * pointers 16-byte aligned), the n % N tail one element at a time.
 * NOTE: out may be start or end (lerp_), so no __restrict__: each element
 * is read before it is written, by the thread that writes it. */
template <ampc_dtype DT, bool PACKS>
__global__ void
lerp_contig_kernel(int64_t n, nn_t<DT> *out, const nn_t<DT> *s,
                   const nn_t<DT> *e, const nn_t<DT> *w, float scalar)
{
    constexpr int N = nn_pack<DT>::N;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t npacks = PACKS ? n / N : 0;
    for (int64_t v = tid; v < npacks; v += step) {
        int64_t i = v * N;
        nn_pack<DT> ps, pe, pw;
        ps.load(s + i);
        pe.load(e + i);
        if (w != nullptr) {
            pw.load(w + i);
        }
#pragma unroll
        for (int k = 0; k < N; k++) {
            ps.f[k] = ampc_lerp_f32(ps.f[k], pe.f[k],
                                    w != nullptr ? pw.f[k] : scalar);
        }
        ps.store(out + i);
    }
    for (int64_t i = npacks * N + tid; i < n; i += step) {
        float wv = w != nullptr ? nn_load<DT>(w[i]) : scalar;
        out[i] = nn_store<DT>(
            ampc_lerp_f32(nn_load<DT>(s[i]), nn_load<DT>(e[i]), wv));
    }
}

/* The same over g (n = prod(g.shape) elements), every operand strided or
 * broadcast (stride 0).  Index is int32 when every offset fits, else
 * int64. */
template <ampc_dtype DT, typename Index>
__global__ void
lerp_strided_kernel(Index n, Geometry g, nn_t<DT> *out, const nn_t<DT> *s,
                    const nn_t<DT> *e, const nn_t<DT> *w, float scalar)
{
    const Index step = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += step) {
        Index rem = i, o[4] = {0, 0, 0, 0};
        for (int d = g.ndim - 1; d >= 0; d--) {
            Index sz = (Index)g.shape[d];
            Index k = rem % sz;
            rem /= sz;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                o[j] += k * (Index)g.stride[j][d];
            }
        }
        float wv = w != nullptr ? nn_load<DT>(w[o[3]]) : scalar;
        out[o[0]] = nn_store<DT>(
            ampc_lerp_f32(nn_load<DT>(s[o[1]]), nn_load<DT>(e[o[2]]), wv));
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* The largest |offset| + 1 any operand reaches over the iteration. */
int64_t
max_extent(const Geometry &g)
{
    int64_t m = 0;
    for (int k = 0; k < 4; k++) {
        int64_t ext = 0;
        for (int d = 0; d < g.ndim; d++) {
            int64_t s = g.stride[k][d] < 0 ? -g.stride[k][d]
                                            : g.stride[k][d];
            ext += (g.shape[d] - 1) * s;
        }
        m = ext > m ? ext : m;
    }
    return m + 1;
}

/* it: out, start, end[, weight] of DT (see the slot). */
template <ampc_dtype DT>
int
lerp_typed(const ampc_iter *it, float scalar)
{
    Geometry g;
    int64_t n = 1;
    int nops = it->nops;
    g.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        n *= it->shape[d];
        g.shape[d] = it->shape[d];
        for (int k = 0; k < 4; k++) {
            g.stride[k][d] = k < nops ? it->strides[k][d] : 0;
        }
    }
    if (n == 0) {
        return 0;
    }
    nn_t<DT> *out = (nn_t<DT> *)it->data[0];
    const nn_t<DT> *s = (const nn_t<DT> *)it->data[1];
    const nn_t<DT> *e = (const nn_t<DT> *)it->data[2];
    const nn_t<DT> *w = nops == 4 ? (const nn_t<DT> *)it->data[3] : nullptr;
    int contig = it->ndim == 1;
    for (int k = 0; k < nops && contig; k++) {
        contig = it->strides[k][0] == 1;
    }
    cudaStream_t stream = ampc_cuda_stream();
    if (contig) {
        constexpr int N = nn_pack<DT>::N;
        if (nn_aligned16(out) && nn_aligned16(s) && nn_aligned16(e) &&
            nn_aligned16(w)) {
            lerp_contig_kernel<DT, true>
                <<<nn_blocks(CEIL_DIV(n, (int64_t)N), AMPC_NN_THREADS),
                   AMPC_NN_THREADS, 0, stream>>>(n, out, s, e, w, scalar);
        }
        else {
            lerp_contig_kernel<DT, false>
                <<<nn_blocks(n, AMPC_NN_THREADS), AMPC_NN_THREADS, 0,
                   stream>>>(n, out, s, e, w, scalar);
        }
    }
    else if (n <= INT32_MAX - (int64_t)AMPC_NN_MAX_BLOCKS * AMPC_NN_THREADS &&
             max_extent(g) <= INT32_MAX) {
        lerp_strided_kernel<DT, int32_t>
            <<<nn_blocks(n, AMPC_NN_THREADS), AMPC_NN_THREADS, 0, stream>>>(
                (int32_t)n, g, out, s, e, w, scalar);
    }
    else {
        lerp_strided_kernel<DT, int64_t>
            <<<nn_blocks(n, AMPC_NN_THREADS), AMPC_NN_THREADS, 0, stream>>>(
                n, g, out, s, e, w, scalar);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

}  // namespace

// ----------------------------------------------------------------------------
// the slot

/* it: out, start, end and (nops == 4) weight of dt, broadcast to out's
 * shape; with three operands the weight is `scalar`. */
extern "C" int
ampc_lerp_cuda(ampc_dtype dt, const ampc_iter *it, float scalar)
{
    AMPC_NN_DISPATCH(dt, DT, { return lerp_typed<DT>(it, scalar); });
    return 0;
}
