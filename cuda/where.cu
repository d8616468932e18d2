/* where.cu - where(condition, input, other) on CUDA tensors, over a whole
 * ampc_iter (csrc/iter.c): out = cond ? a : b with elements moved by their
 * byte size, so one kernel per width serves every dtype, bit for bit.  A
 * contiguous path with 128-bit loads and stores, and an N-d strided path,
 * as in cuda/elementwise.cu; the CPU twin is csrc/cpu/ref/where.c.
 */
#include <string.h>

#include "common.cuh"

/* Threads per block, and the most blocks a grid-stride launch uses. */
#define WHERE_THREADS 256
#define WHERE_MAX_BLOCKS 4096

/* NOTE: everything but the slot is in an anonymous namespace, so that these
 * templates never meet cuda/elementwise.cu's at link time. */
namespace {

// ----------------------------------------------------------------------------
// operands

/* One input: p[offset] when p is set (dense, strided or broadcast), else
 * `value` (a host value) for every element.  dense: the contiguous path
 * reads p[i]; otherwise it reads p[0] (stride 0) or value once. */
template <typename T> struct Src {
    const T *p;
    T value;
    int dense;
};

template <typename T>
__device__ __forceinline__ T
src_one(const Src<T> &s)
{
    return s.p != nullptr ? s.p[0] : s.value;
}

template <typename T, int N> struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

/* The iteration's shape and element strides (out, cond, a, b), innermost
 * dim last. */
struct Geometry {
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    int64_t stride[4][AMPC_MAX_DIMS];
};

// ----------------------------------------------------------------------------
// CUDA kernels

/* out (n) contiguous; cond, a, b each contiguous (dense) or one value.  Each
 * thread moves VEC elements per step, one aligned vector load per dense
 * operand (VEC bytes of cond); the n % VEC tail goes one at a time.
 * NOTE: out may be a or b (masked_fill_), so no __restrict__: each element
 * is read before it is written, by the thread that writes it. */
template <typename T, int VEC>
__global__ void
where_contig_kernel(int64_t n, T *out, Src<uint8_t> c, Src<T> a, Src<T> b)
{
    const uint8_t cv = c.dense ? 0 : src_one(c);
    const T av = a.dense ? T() : src_one(a);
    const T bv = b.dense ? T() : src_one(b);
    const int64_t nvec = n / VEC;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t v = tid; v < nvec; v += step) {
        Vec<uint8_t, VEC> vc;
        Vec<T, VEC> va, vb, vo;
        if (c.dense) {
            vc = reinterpret_cast<const Vec<uint8_t, VEC> *>(c.p)[v];
        }
        if (a.dense) {
            va = reinterpret_cast<const Vec<T, VEC> *>(a.p)[v];
        }
        if (b.dense) {
            vb = reinterpret_cast<const Vec<T, VEC> *>(b.p)[v];
        }
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            bool t = (c.dense ? vc.v[k] : cv) != 0;
            vo.v[k] = t ? (a.dense ? va.v[k] : av)
                        : (b.dense ? vb.v[k] : bv);
        }
        reinterpret_cast<Vec<T, VEC> *>(out)[v] = vo;
    }
    for (int64_t i = nvec * VEC + tid; i < n; i += step) {
        bool t = (c.dense ? c.p[i] : cv) != 0;
        out[i] = t ? (a.dense ? a.p[i] : av) : (b.dense ? b.p[i] : bv);
    }
}

/* out, cond, a, b strided over g (n = prod(g.shape) elements); only the
 * chosen side is read.  Index is int32 when every offset fits, else int64. */
template <typename T, typename Index>
__global__ void
where_strided_kernel(Index n, Geometry g, T *out, Src<uint8_t> c, Src<T> a,
                     Src<T> b)
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
        bool t = (c.p != nullptr ? c.p[o[1]] : c.value) != 0;
        out[o[0]] = t ? (a.p != nullptr ? a.p[o[2]] : a.value)
                      : (b.p != nullptr ? b.p[o[3]] : b.value);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

unsigned
where_blocks(int64_t work)
{
    int64_t b = CEIL_DIV(work, (int64_t)WHERE_THREADS);
    return (unsigned)(b < 1 ? 1
                            : (b > WHERE_MAX_BLOCKS ? WHERE_MAX_BLOCKS : b));
}

int
aligned(const void *p, size_t bytes)
{
    return p == nullptr || (uintptr_t)p % bytes == 0;
}

/* The largest |offset| + 1 any operand reaches over the iteration. */
int64_t
max_extent(const Geometry &g)
{
    int64_t m = 0;
    for (int k = 0; k < 4; k++) {
        int64_t e = 0;
        for (int d = 0; d < g.ndim; d++) {
            int64_t s = g.stride[k][d] < 0 ? -g.stride[k][d]
                                            : g.stride[k][d];
            e += (g.shape[d] - 1) * s;
        }
        m = e > m ? e : m;
    }
    return m + 1;
}

/* Iterator operand k + 1 (0 cond, 1 a, 2 b) as a kernel input. */
template <typename T>
Src<T>
make_src(const ampc_iter *it, const ampc_cuda_where_values *v, int k)
{
    Src<T> s{nullptr, T(), 0};
    if (v->host & (1u << k)) {
        memcpy(&s.value, &v->bits[k], sizeof(T));
    }
    else {
        s.p = (const T *)it->data[k + 1];
        s.dense = it->ndim == 1 && it->strides[k + 1][0] == 1;
    }
    return s;
}

/* it: out (T), cond (bool), a, b (T); contiguous when there is one dim,
 * out dense and every other operand dense or one value. */
template <typename T>
int
where_typed(const ampc_iter *it, const ampc_cuda_where_values *v)
{
    Geometry g;
    int64_t n = 1;
    g.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        n *= it->shape[d];
        g.shape[d] = it->shape[d];
        for (int k = 0; k < 4; k++) {
            g.stride[k][d] = it->strides[k][d];
        }
    }
    if (n == 0) {
        return 0;
    }
    T *out = (T *)it->data[0];
    Src<uint8_t> c = make_src<uint8_t>(it, v, 0);
    Src<T> a = make_src<T>(it, v, 1), b = make_src<T>(it, v, 2);
    int contig = it->ndim == 1 && it->strides[0][0] == 1;
    for (int k = 0; k < 3; k++) {
        int64_t s = it->strides[k + 1][0];
        contig &= (v->host & (1u << k)) || s == 0 || s == 1;
    }
    cudaStream_t stream = ampc_cuda_stream();
    if (contig) {
        constexpr int VEC = (int)(16 / sizeof(T));
        int vec_ok = aligned(out, 16) && (!c.dense || aligned(c.p, VEC)) &&
                     (!a.dense || aligned(a.p, 16)) &&
                     (!b.dense || aligned(b.p, 16));
        if (vec_ok) {
            where_contig_kernel<T, VEC>
                <<<where_blocks(CEIL_DIV(n, (int64_t)VEC)), WHERE_THREADS, 0,
                   stream>>>(n, out, c, a, b);
        }
        else {
            where_contig_kernel<T, 1>
                <<<where_blocks(n), WHERE_THREADS, 0, stream>>>(n, out, c, a,
                                                                 b);
        }
    }
    else if (n <= INT32_MAX - (int64_t)WHERE_MAX_BLOCKS * WHERE_THREADS &&
             max_extent(g) <= INT32_MAX) {
        where_strided_kernel<T, int32_t>
            <<<where_blocks(n), WHERE_THREADS, 0, stream>>>((int32_t)n, g,
                                                             out, c, a, b);
    }
    else {
        where_strided_kernel<T, int64_t>
            <<<where_blocks(n), WHERE_THREADS, 0, stream>>>(n, g, out, c, a,
                                                             b);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

}  // namespace

// ----------------------------------------------------------------------------
// the slot

/* it: out (es bytes per element), cond (bool), a, b (es bytes) broadcast to
 * out's shape, or host values (v). */
extern "C" int
ampc_where_cuda(size_t es, const ampc_iter *it,
                const ampc_cuda_where_values *v)
{
    switch (es) {
    case 1:
        return where_typed<uint8_t>(it, v);
    case 2:
        return where_typed<uint16_t>(it, v);
    case 4:
        return where_typed<uint32_t>(it, v);
    default:
        return where_typed<uint64_t>(it, v);
    }
}
