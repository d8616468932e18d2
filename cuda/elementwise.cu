/* elementwise.cu - binary ops, comparisons and unary ops on CUDA tensors,
 * over a whole ampc_iter (csrc/iter.c): a contiguous fast path with 128-bit
 * loads and stores, and an N-d strided path.  The per-element rules are
 * csrc/elementwise_math.h, the ones the CPU loops use.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.cuh"
#include "activation_math.h"
#include "arc_hyp_math.h"
#include "elementwise_math.h"
#include "mod_math.h"

/* Threads per block, and the most blocks a grid-stride launch uses: about
 * 1M threads, a few waves on any current GPU. */
#define EW_THREADS 256
#define EW_MAX_BLOCKS 4096

// ----------------------------------------------------------------------------
// storage types: load to the compute type, store from it
//
// NOTE: float16 and bfloat16 use the hardware conversions (cvt.rn), which
// round to nearest even exactly as amp_math.h does; the bits differ only in
// a NaN's payload (the hardware writes the canonical NaN).

template <typename T> struct Num;

template <> struct Num<float> {
    using C = float;
    static __device__ __forceinline__ float load(float v) { return v; }
    static __device__ __forceinline__ float store(float c) { return c; }
};

template <> struct Num<__half> {
    using C = float;
    static __device__ __forceinline__ float load(__half v)
    {
        return __half2float(v);
    }
    static __device__ __forceinline__ __half store(float c)
    {
        return __float2half_rn(c);
    }
};

template <> struct Num<__nv_bfloat16> {
    using C = float;
    static __device__ __forceinline__ float load(__nv_bfloat16 v)
    {
        return __bfloat162float(v);
    }
    static __device__ __forceinline__ __nv_bfloat16 store(float c)
    {
        return __float2bfloat16_rn(c);
    }
};

template <> struct Num<int64_t> {
    using C = int64_t;
    static __device__ __forceinline__ int64_t load(int64_t v) { return v; }
    static __device__ __forceinline__ int64_t store(int64_t c) { return c; }
};

/* bool is one byte; ops normalise it (any nonzero byte is true). */
template <> struct Num<uint8_t> {
    using C = uint8_t;
    static __device__ __forceinline__ uint8_t load(uint8_t v) { return v; }
    static __device__ __forceinline__ uint8_t store(uint8_t c) { return c; }
};

// ----------------------------------------------------------------------------
// the ops on compute values; OP >= 0 fixes the op at compile time (the
// contiguous kernels), OP < 0 reads it at run time (the strided kernels,
// where the index arithmetic dominates anyway)

template <int OP>
__device__ __forceinline__ float
binary_c(int op, float a, float b)
{
    switch (OP >= 0 ? OP : op) {
    case AMPC_BIN_ADD:
        return a + b;
    case AMPC_BIN_SUB:
        return a - b;
    case AMPC_BIN_MUL:
        return a * b;
    case AMPC_BIN_DIV:
        return a / b;
    case AMPC_BIN_MAXIMUM:
        return ampc_maximum_f32(a, b);
    case AMPC_BIN_MINIMUM:
        return ampc_minimum_f32(a, b);
    case AMPC_BIN_GELU_BACKWARD:
        return __fmul_rn(a, ampc_gelu_grad_f32(b));
    case AMPC_BIN_GELU_TANH_BACKWARD:
        return __fmul_rn(a, ampc_gelu_tanh_grad_f32(b));
    case AMPC_BIN_SILU_BACKWARD:
        return __fmul_rn(a, ampc_silu_grad_f32(b));
    case AMPC_BIN_SIGMOID_BACKWARD:
        return ampc_sigmoid_backward_f32(a, b);
    case AMPC_BIN_TANH_BACKWARD:
        return ampc_tanh_backward_f32(a, b);
    case AMPC_BIN_FMOD:
        return ampc_fmod_f32(a, b);
    case AMPC_BIN_REMAINDER:
        return ampc_remainder_f32(a, b);
    case AMPC_BIN_ATAN2:
        return ampc_atan2_f32(a, b);
    default:
        return powf(a, b);
    }
}

template <int OP>
__device__ __forceinline__ int64_t
binary_c(int op, int64_t a, int64_t b)
{
    switch (OP >= 0 ? OP : op) {
    case AMPC_BIN_ADD:
        return ampc_add_i64(a, b);
    case AMPC_BIN_SUB:
        return ampc_sub_i64(a, b);
    case AMPC_BIN_MUL:
        return ampc_mul_i64(a, b);
    case AMPC_BIN_DIV:
        return ampc_div_i64(a, b);
    case AMPC_BIN_MAXIMUM:
        return ampc_maximum_i64(a, b);
    case AMPC_BIN_MINIMUM:
        return ampc_minimum_i64(a, b);
    case AMPC_BIN_FMOD:
        return ampc_fmod_i64(a, b);
    case AMPC_BIN_REMAINDER:
        return ampc_remainder_i64(a, b);
    default:
        return ampc_pow_i64(a, b);
    }
}

template <int OP>
__device__ __forceinline__ uint8_t
binary_c(int op, uint8_t a, uint8_t b)
{
    return ampc_binary_bool_one((ampc_binary_op)(OP >= 0 ? OP : op), a, b);
}

/* NaN compares false except for NE; bool compares its 0/1 values. */
template <int OP, typename C>
__device__ __forceinline__ uint8_t
compare_c(int op, C a, C b)
{
    switch (OP >= 0 ? OP : op) {
    case AMPC_CMP_EQ:
        return a == b;
    case AMPC_CMP_NE:
        return a != b;
    case AMPC_CMP_LT:
        return a < b;
    case AMPC_CMP_LE:
        return a <= b;
    case AMPC_CMP_GT:
        return a > b;
    default:
        return a >= b;
    }
}

template <int OP>
__device__ __forceinline__ float
unary_c(int op, float a)
{
    switch (OP >= 0 ? OP : op) {
    case AMPC_UN_NEG:
        return -a;
    case AMPC_UN_ABS:
        return fabsf(a);
    case AMPC_UN_SQRT:
        return sqrtf(a);
    case AMPC_UN_EXP:
        return ampc_exp_f32(a);
    case AMPC_UN_LOG:
        return ampc_log_f32(a);
    case AMPC_UN_RELU:
        return ampc_relu_f32(a);
    case AMPC_UN_SIGMOID:
        return ampc_sigmoid_f32(a);
    case AMPC_UN_TANH:
        return ampc_tanh_f32(a);
    case AMPC_UN_GELU:
        return ampc_gelu_f32(a);
    case AMPC_UN_GELU_TANH:
        return ampc_gelu_tanh_f32(a);
    case AMPC_UN_SILU:
        return ampc_silu_f32(a);
    case AMPC_UN_GELU_GRAD:
        return ampc_gelu_grad_f32(a);
    case AMPC_UN_GELU_TANH_GRAD:
        return ampc_gelu_tanh_grad_f32(a);
    case AMPC_UN_SILU_GRAD:
        return ampc_silu_grad_f32(a);
    case AMPC_UN_SQUARE:
        return ampc_square_f32(a);
    case AMPC_UN_CUBE:
        return ampc_cube_f32(a);
    case AMPC_UN_RECIPROCAL_SQUARE:
        return ampc_reciprocal_square_f32(a);
    case AMPC_UN_RSQRT:
        return ampc_rsqrt_f32(a);
    case AMPC_UN_FLOOR:
        return floorf(a);
    case AMPC_UN_CEIL:
        return ceilf(a);
    case AMPC_UN_ROUND:
        return ampc_round_f32(a);
    case AMPC_UN_TRUNC:
        return truncf(a);
    case AMPC_UN_FRAC:
        return ampc_frac_f32(a);
    case AMPC_UN_RECIPROCAL:
        return ampc_reciprocal_f32(a);
    case AMPC_UN_SIN:
        return ampc_trig_f32(a, 0u);
    case AMPC_UN_COS:
        return ampc_trig_f32(a, 1u);
    case AMPC_UN_TAN:
        return ampc_trig_f32(a, 2u);
    case AMPC_UN_ASIN:
        return ampc_asin_f32(a);
    case AMPC_UN_ACOS:
        return ampc_acos_f32(a);
    case AMPC_UN_ATAN:
        return ampc_atan_f32(a);
    case AMPC_UN_SINH:
        return ampc_sinh_f32(a);
    case AMPC_UN_COSH:
        return ampc_cosh_f32(a);
    case AMPC_UN_ASINH:
        return ampc_asinh_f32(a);
    case AMPC_UN_ACOSH:
        return ampc_acosh_f32(a);
    case AMPC_UN_ATANH:
        return ampc_atanh_f32(a);
    case AMPC_UN_LOG1P:
        return ampc_log1p_f32(a);
    case AMPC_UN_EXPM1:
        return ampc_expm1_f32(a);
    case AMPC_UN_LOG2:
        return ampc_log2_f32(a);
    case AMPC_UN_LOG10:
        return ampc_log10_f32(a);
    case AMPC_UN_ERF:
        return ampc_erf_f32(a);
    case AMPC_UN_ERFC:
        return ampc_erfc_f32(a);
    default:
        return ampc_sign_f32(a);
    }
}

/* NEG ABS RELU SIGN (the caller promotes the others to float). */
template <int OP>
__device__ __forceinline__ int64_t
unary_c(int op, int64_t a)
{
    switch (OP >= 0 ? OP : op) {
    case AMPC_UN_NEG:
        return ampc_neg_i64(a);
    case AMPC_UN_ABS:
        return ampc_abs_i64(a);
    case AMPC_UN_RELU:
        return ampc_relu_i64(a);
    default:
        return ampc_sign_i64(a);
    }
}

/* Only ISFINITE is defined on bool; the rest keep the value (as the CPU). */
template <int OP>
__device__ __forceinline__ uint8_t
unary_c(int op, uint8_t a)
{
    return a != 0;
}

// ----------------------------------------------------------------------------
// functors: storage T in, storage TO out, op(C a, C b) computes one element

template <typename T, int OP> struct BinaryF {
    using TA = T;
    using TO = T;
    using C = typename Num<T>::C;
    int op;
    __device__ __forceinline__ TO operator()(C a, C b) const
    {
        return Num<T>::store(binary_c<OP>(op, a, b));
    }
};

/* bool compares as int64 0/1, like the CPU. */
template <typename T, int OP> struct CompareF {
    using TA = T;
    using TO = uint8_t;
    using C = typename Num<T>::C;
    int op;
    __device__ __forceinline__ TO operator()(C a, C b) const
    {
        if constexpr (std::is_same<T, uint8_t>::value) {
            return compare_c<OP>(op, (int64_t)(a != 0), (int64_t)(b != 0));
        }
        else {
            return compare_c<OP>(op, a, b);
        }
    }
};

/* b is unused (a broadcast zero that is never read from memory). */
template <typename T, int OP> struct UnaryF {
    using TA = T;
    using TO = T;
    using C = typename Num<T>::C;
    int op;
    __device__ __forceinline__ TO operator()(C a, C) const
    {
        return Num<T>::store(unary_c<OP>(op, a));
    }
};

/* isfinite: bool out; integers are always finite. */
template <typename T> struct IsFiniteF {
    using TA = T;
    using TO = uint8_t;
    using C = typename Num<T>::C;
    int op;
    __device__ __forceinline__ TO operator()(C a, C) const
    {
        if constexpr (std::is_same<C, float>::value) {
            return (uint8_t)ampc_f32_isfinite(a);
        }
        else {
            return 1;
        }
    }
};

// ----------------------------------------------------------------------------
// operands

/* One input: data at p (stride per iterator dim), or one value for every
 * element: `value`, or the float32 at `pf` (device memory), or p[0] when
 * bcast is set. */
template <typename T, typename C> struct In {
    const T *p;
    const float *pf;
    C value;
    int bcast;
};

template <typename T, typename C>
__device__ __forceinline__ C
in_value(const In<T, C> &in)
{
    if (in.pf != nullptr) {
        return (C)*in.pf;
    }
    return in.p != nullptr ? Num<T>::load(in.p[0]) : in.value;
}

/* 128-bit (or narrower, for the bool side of a compare) aligned groups. */
template <typename T, int N> struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

// ----------------------------------------------------------------------------
// CUDA kernels

/* out (n) contiguous; a, b contiguous or broadcast (bcast).  Each thread
 * handles VEC consecutive elements per step with one aligned vector load
 * per operand; the n % VEC tail goes element by element.
 * NOTE: out may be a or b (in-place ops), so no __restrict__: each element
 * is read before it is written, by the thread that writes it. */
template <typename F, int VEC>
__global__ void
ew_contig_kernel(int64_t n, typename F::TO *out,
                 In<typename F::TA, typename F::C> a,
                 In<typename F::TA, typename F::C> b, F f)
{
    using TA = typename F::TA;
    using TO = typename F::TO;
    using C = typename F::C;
    const C av = a.bcast ? in_value(a) : C();
    const C bv = b.bcast ? in_value(b) : C();
    const int64_t nvec = n / VEC;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t v = tid; v < nvec; v += step) {
        Vec<TA, VEC> va, vb;
        if (!a.bcast) {
            va = reinterpret_cast<const Vec<TA, VEC> *>(a.p)[v];
        }
        if (!b.bcast) {
            vb = reinterpret_cast<const Vec<TA, VEC> *>(b.p)[v];
        }
        Vec<TO, VEC> vo;
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            C x = a.bcast ? av : Num<TA>::load(va.v[k]);
            C y = b.bcast ? bv : Num<TA>::load(vb.v[k]);
            vo.v[k] = f(x, y);
        }
        reinterpret_cast<Vec<TO, VEC> *>(out)[v] = vo;
    }
    for (int64_t i = nvec * VEC + tid; i < n; i += step) {
        C x = a.bcast ? av : Num<TA>::load(a.p[i]);
        C y = b.bcast ? bv : Num<TA>::load(b.p[i]);
        out[i] = f(x, y);
    }
}

/* The iteration's shape and element strides (output, a, b), innermost
 * dim last; a value operand has no strides (its p is NULL). */
struct Geometry {
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    int64_t stride[3][AMPC_MAX_DIMS];
};

/* out, a, b strided over g (n = prod(g.shape) elements).  Index is int32
 * when every offset fits, else int64. */
template <typename F, typename Index>
__global__ void
ew_strided_kernel(Index n, Geometry g, typename F::TO *out,
                  In<typename F::TA, typename F::C> a,
                  In<typename F::TA, typename F::C> b, F f)
{
    using TA = typename F::TA;
    using C = typename F::C;
    const C av = a.p == nullptr ? in_value(a) : C();
    const C bv = b.p == nullptr ? in_value(b) : C();
    const Index step = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += step) {
        Index rem = i, o0 = 0, o1 = 0, o2 = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            Index sz = (Index)g.shape[d];
            Index c = rem % sz;
            rem /= sz;
            o0 += c * (Index)g.stride[0][d];
            o1 += c * (Index)g.stride[1][d];
            o2 += c * (Index)g.stride[2][d];
        }
        C x = a.p == nullptr ? av : Num<TA>::load(a.p[o1]);
        C y = b.p == nullptr ? bv : Num<TA>::load(b.p[o2]);
        out[o0] = f(x, y);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

static unsigned
ew_blocks(int64_t work)
{
    int64_t b = CEIL_DIV(work, (int64_t)EW_THREADS);
    return (unsigned)(b < 1 ? 1 : (b > EW_MAX_BLOCKS ? EW_MAX_BLOCKS : b));
}

static int
aligned(const void *p, size_t bytes)
{
    return p == nullptr || (uintptr_t)p % bytes == 0;
}

/* The largest |offset| + 1 any operand reaches over the iteration. */
static int64_t
max_extent(const Geometry &g)
{
    int64_t m = 0;
    for (int k = 0; k < 3; k++) {
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

/* Which input (0 or 1) the scalar replaces, or -1. */
static int
sc_pos_index(const ampc_cuda_scalar *sc, int nin)
{
    return (nin == 2 && sc != nullptr && sc->pos != 0) ? sc->pos - 1 : -1;
}

/* An op's operands over `it` (operand 0 the output): with a scalar at pos
 * 1 or 2 the iterator's operand 1 is the other input; unary ops (nin == 1)
 * read operand 1 only. */
template <typename TA, typename C> struct Operands {
    int64_t n;
    void *out;
    In<TA, C> in[2];
    Geometry g;
    int contig;     /* one dense dim; each input dense or one value */
};

template <typename TA, typename C>
static void
prepare(const ampc_iter *it, const ampc_cuda_scalar *sc, int nin,
        Operands<TA, C> *o)
{
    int src[2] = {1, 2};        /* iterator operand of each input, or 0 */
    if (nin == 1) {
        src[1] = 0;
    }
    else if (sc != nullptr && sc->pos != 0) {
        src[sc->pos - 1] = 0;
        src[2 - sc->pos] = 1;
    }
    o->n = 1;
    o->g.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        o->n *= it->shape[d];
        o->g.shape[d] = it->shape[d];
        o->g.stride[0][d] = it->strides[0][d];
        for (int k = 0; k < 2; k++) {
            o->g.stride[1 + k][d] = src[k] ? it->strides[src[k]][d] : 0;
        }
    }
    o->out = it->data[0];
    o->contig = it->ndim == 1 && it->strides[0][0] == 1;
    for (int k = 0; k < 2; k++) {
        In<TA, C> &in = o->in[k];
        in = In<TA, C>{nullptr, nullptr, C(), 1};
        if (src[k]) {
            int64_t s = it->strides[src[k]][0];
            in.p = (const TA *)it->data[src[k]];
            in.bcast = it->ndim == 1 && s == 0;
            o->contig &= s == 1 || s == 0;
        }
        else if (k == sc_pos_index(sc, nin) && sc->dev_f32 != nullptr) {
            in.pf = sc->dev_f32;
        }
        else if (k == sc_pos_index(sc, nin)) {
            in.value = std::is_same<C, float>::value ? (C)sc->f : (C)sc->i;
        }
    }
}

/* One dim, dense output: VEC elements per vector step when every dense
 * operand is aligned to a vector, else one at a time. */
template <typename F>
static int
launch_contig(const Operands<typename F::TA, typename F::C> &o, F f)
{
    using TA = typename F::TA;
    using TO = typename F::TO;
    constexpr size_t wide = sizeof(TA) > sizeof(TO) ? sizeof(TA)
                                                    : sizeof(TO);
    constexpr int VEC = (int)(16 / wide);
    TO *out = (TO *)o.out;
    int vec_ok = aligned(out, sizeof(TO) * VEC);
    for (int k = 0; k < 2; k++) {
        vec_ok &= o.in[k].bcast || aligned(o.in[k].p, sizeof(TA) * VEC);
    }
    cudaStream_t stream = ampc_cuda_stream();
    if (vec_ok) {
        ew_contig_kernel<F, VEC><<<ew_blocks(CEIL_DIV(o.n, (int64_t)VEC)),
                                   EW_THREADS, 0, stream>>>(
            o.n, out, o.in[0], o.in[1], f);
    }
    else {
        ew_contig_kernel<F, 1><<<ew_blocks(o.n), EW_THREADS, 0, stream>>>(
            o.n, out, o.in[0], o.in[1], f);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* Any geometry: int32 indexing when every offset fits, and the
 * grid-stride index (at most n - 1 + one grid of threads) does too. */
template <typename F>
static int
launch_strided(const Operands<typename F::TA, typename F::C> &o, F f)
{
    using TO = typename F::TO;
    TO *out = (TO *)o.out;
    cudaStream_t stream = ampc_cuda_stream();
    if (o.n <= INT32_MAX - (int64_t)EW_MAX_BLOCKS * EW_THREADS &&
        max_extent(o.g) <= INT32_MAX) {
        ew_strided_kernel<F, int32_t><<<ew_blocks(o.n), EW_THREADS, 0,
                                        stream>>>((int32_t)o.n, o.g, out,
                                                  o.in[0], o.in[1], f);
    }
    else {
        ew_strided_kernel<F, int64_t><<<ew_blocks(o.n), EW_THREADS, 0,
                                        stream>>>(o.n, o.g, out, o.in[0],
                                                  o.in[1], f);
    }
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* Contiguous iterations run Fixed (the op a compile-time constant), the
 * rest Runtime (the op read from the functor). */
template <typename Fixed, typename Runtime>
static int
launch_pair(const ampc_iter *it, const ampc_cuda_scalar *sc, int nin, int op)
{
    static_assert(std::is_same<typename Fixed::TA,
                               typename Runtime::TA>::value,
                  "one storage type");
    Operands<typename Fixed::TA, typename Fixed::C> o;
    prepare(it, sc, nin, &o);
    if (o.n == 0) {
        return 0;
    }
    if (o.contig) {
        return launch_contig(o, Fixed{op});
    }
    return launch_strided(o, Runtime{op});
}

template <typename T>
static int
binary_typed(ampc_binary_op op, const ampc_iter *it,
             const ampc_cuda_scalar *sc)
{
    using R = BinaryF<T, -1>;
    switch (op) {
    case AMPC_BIN_ADD:
        return launch_pair<BinaryF<T, AMPC_BIN_ADD>, R>(it, sc, 2, op);
    case AMPC_BIN_SUB:
        return launch_pair<BinaryF<T, AMPC_BIN_SUB>, R>(it, sc, 2, op);
    case AMPC_BIN_MUL:
        return launch_pair<BinaryF<T, AMPC_BIN_MUL>, R>(it, sc, 2, op);
    case AMPC_BIN_DIV:
        return launch_pair<BinaryF<T, AMPC_BIN_DIV>, R>(it, sc, 2, op);
    case AMPC_BIN_MAXIMUM:
        return launch_pair<BinaryF<T, AMPC_BIN_MAXIMUM>, R>(it, sc, 2, op);
    case AMPC_BIN_MINIMUM:
        return launch_pair<BinaryF<T, AMPC_BIN_MINIMUM>, R>(it, sc, 2, op);
    case AMPC_BIN_GELU_BACKWARD:
        return launch_pair<BinaryF<T, AMPC_BIN_GELU_BACKWARD>, R>(it, sc, 2,
                                                                  op);
    case AMPC_BIN_GELU_TANH_BACKWARD:
        return launch_pair<BinaryF<T, AMPC_BIN_GELU_TANH_BACKWARD>, R>(
            it, sc, 2, op);
    case AMPC_BIN_SILU_BACKWARD:
        return launch_pair<BinaryF<T, AMPC_BIN_SILU_BACKWARD>, R>(it, sc, 2,
                                                                  op);
    case AMPC_BIN_SIGMOID_BACKWARD:
        return launch_pair<BinaryF<T, AMPC_BIN_SIGMOID_BACKWARD>, R>(
            it, sc, 2, op);
    case AMPC_BIN_TANH_BACKWARD:
        return launch_pair<BinaryF<T, AMPC_BIN_TANH_BACKWARD>, R>(it, sc, 2,
                                                                  op);
    case AMPC_BIN_FMOD:
        return launch_pair<BinaryF<T, AMPC_BIN_FMOD>, R>(it, sc, 2, op);
    case AMPC_BIN_REMAINDER:
        return launch_pair<BinaryF<T, AMPC_BIN_REMAINDER>, R>(it, sc, 2, op);
    case AMPC_BIN_ATAN2:
        return launch_pair<BinaryF<T, AMPC_BIN_ATAN2>, R>(it, sc, 2, op);
    default:
        return launch_pair<BinaryF<T, AMPC_BIN_POW>, R>(it, sc, 2, op);
    }
}

/* Comparisons and unary ops read the op at run time on both paths: the
 * switch on a uniform value costs little beside the memory traffic, and a
 * compile-time op per kernel would multiply the kernels (and the build
 * time) by each op. */
template <typename T>
static int
compare_typed(ampc_compare_op op, const ampc_iter *it,
              const ampc_cuda_scalar *sc)
{
    using F = CompareF<T, -1>;
    return launch_pair<F, F>(it, sc, 2, op);
}

/* A unary op fixed at compile time: the activations, whose PTX the build
 * test checks for fused multiply-adds (they give the CPU's bits). */
template <typename T, int OP>
static int
unary_fixed(const ampc_iter *it, ampc_unary_op op)
{
    return launch_pair<UnaryF<T, OP>, UnaryF<T, -1>>(it, nullptr, 1, op);
}

template <typename T>
static int
unary_typed(ampc_unary_op op, const ampc_iter *it)
{
    if (op == AMPC_UN_ISFINITE) {
        using F = IsFiniteF<T>;
        return launch_pair<F, F>(it, nullptr, 1, op);
    }
    /* integer inputs of the float-only ops arrive as float32 */
    if constexpr (!std::is_same<T, int64_t>::value &&
                  !std::is_same<T, uint8_t>::value) {
        switch (op) {
        case AMPC_UN_GELU:
            return unary_fixed<T, AMPC_UN_GELU>(it, op);
        case AMPC_UN_GELU_TANH:
            return unary_fixed<T, AMPC_UN_GELU_TANH>(it, op);
        case AMPC_UN_SILU:
            return unary_fixed<T, AMPC_UN_SILU>(it, op);
        case AMPC_UN_GELU_GRAD:
            return unary_fixed<T, AMPC_UN_GELU_GRAD>(it, op);
        case AMPC_UN_GELU_TANH_GRAD:
            return unary_fixed<T, AMPC_UN_GELU_TANH_GRAD>(it, op);
        case AMPC_UN_SILU_GRAD:
            return unary_fixed<T, AMPC_UN_SILU_GRAD>(it, op);
        default:
            break;
        }
    }
    using F = UnaryF<T, -1>;
    return launch_pair<F, F>(it, nullptr, 1, op);
}

// ----------------------------------------------------------------------------
// the slots

/* it: out (dt), a, b (dt) broadcast to out's shape, or one of them sc. */
extern "C" int
ampc_binary_cuda(ampc_binary_op op, ampc_dtype dt, const ampc_iter *it,
                 const ampc_cuda_scalar *scalar)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return binary_typed<float>(op, it, scalar);
    case AMPC_FLOAT16:
        return binary_typed<__half>(op, it, scalar);
    case AMPC_BFLOAT16:
        return binary_typed<__nv_bfloat16>(op, it, scalar);
    case AMPC_INT64:
        return binary_typed<int64_t>(op, it, scalar);
    default:
        return binary_typed<uint8_t>(op, it, scalar);
    }
}

/* it: out (bool), a, b (dt) broadcast, or one of them sc. */
extern "C" int
ampc_compare_cuda(ampc_compare_op op, ampc_dtype dt, const ampc_iter *it,
                  const ampc_cuda_scalar *scalar)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return compare_typed<float>(op, it, scalar);
    case AMPC_FLOAT16:
        return compare_typed<__half>(op, it, scalar);
    case AMPC_BFLOAT16:
        return compare_typed<__nv_bfloat16>(op, it, scalar);
    case AMPC_INT64:
        return compare_typed<int64_t>(op, it, scalar);
    default:
        return compare_typed<uint8_t>(op, it, scalar);
    }
}

/* it: out (dt, or bool for ISFINITE), a (dt). */
extern "C" int
ampc_unary_cuda(ampc_unary_op op, ampc_dtype dt, const ampc_iter *it)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return unary_typed<float>(op, it);
    case AMPC_FLOAT16:
        return unary_typed<__half>(op, it);
    case AMPC_BFLOAT16:
        return unary_typed<__nv_bfloat16>(op, it);
    case AMPC_INT64:
        return unary_typed<int64_t>(op, it);
    default:
        return unary_typed<uint8_t>(op, it);
    }
}
