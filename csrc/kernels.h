/* kernels.h - the kernel ABI shared by the CPU variants (ref, avx2, avx512)
 * and the CUDA launchers: dtypes, op codes, kernel function types and the
 * per-device kernel table generated from ops.def.  No Python here: kernels
 * trust their arguments, which csrc/ops.c has already checked.
 *
 * Dimension letters used in shape comments: N batch, C channels, H/W image,
 * OC output channels, KH/KW kernel, OH/OW output image, M/K/N GEMM.
 * Element-wise strides are in elements, never bytes.
 */
#ifndef AMPC_KERNELS_H
#define AMPC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    AMPC_FLOAT32 = 0,
    AMPC_FLOAT16,
    AMPC_BFLOAT16,
    AMPC_INT64,
    AMPC_BOOL,
    AMPC_NUM_DTYPES
} ampc_dtype;

/* Bytes per element, indexed by ampc_dtype. */
static const size_t ampc_dtype_size[AMPC_NUM_DTYPES] = {4, 2, 2, 8, 1};

static inline int
ampc_dtype_is_float(ampc_dtype dt)
{
    return dt == AMPC_FLOAT32 || dt == AMPC_FLOAT16 || dt == AMPC_BFLOAT16;
}

// ----------------------------------------------------------------------------
// op codes

typedef enum {
    AMPC_BIN_ADD = 0,
    AMPC_BIN_SUB,
    AMPC_BIN_MUL,
    AMPC_BIN_DIV,
    AMPC_BIN_MAXIMUM,
    AMPC_BIN_MINIMUM,
    AMPC_BIN_POW,
    AMPC_BIN_FMOD,          /* C's fmod: the dividend's sign (mod_math.h) */
    AMPC_BIN_REMAINDER,     /* PyTorch's remainder: the divisor's sign */
    /* a * f'(b), the backward of activation f at input b given gradient
     * a (activation_math.h); float only */
    AMPC_BIN_GELU_BACKWARD,
    AMPC_BIN_GELU_TANH_BACKWARD,
    AMPC_BIN_SILU_BACKWARD,
    /* a * f'(x) from the output b = f(x) (elementwise_math.h) */
    AMPC_BIN_SIGMOID_BACKWARD,
    AMPC_BIN_TANH_BACKWARD,
    AMPC_BIN_ATAN2,         /* atan2(a, b): float only (arc_hyp_math.h) */
    AMPC_NUM_BINARY
} ampc_binary_op;

typedef enum {
    AMPC_CMP_EQ = 0,
    AMPC_CMP_NE,
    AMPC_CMP_LT,
    AMPC_CMP_LE,
    AMPC_CMP_GT,
    AMPC_CMP_GE,
    AMPC_NUM_COMPARE
} ampc_compare_op;

typedef enum {
    AMPC_UN_NEG = 0,
    AMPC_UN_ABS,
    AMPC_UN_SQRT,
    AMPC_UN_EXP,
    AMPC_UN_LOG,
    AMPC_UN_RELU,
    AMPC_UN_SIGN,
    AMPC_UN_SIGMOID,        /* sigmoid .. reciprocal: float only */
    AMPC_UN_TANH,
    AMPC_UN_GELU,           /* x Phi(x) */
    AMPC_UN_GELU_TANH,      /* GELU(approximate="tanh") */
    AMPC_UN_SILU,
    AMPC_UN_GELU_GRAD,      /* the derivatives of the three above */
    AMPC_UN_GELU_TANH_GRAD,
    AMPC_UN_SILU_GRAD,
    AMPC_UN_SQUARE,         /* x * x: pow's shortcut for x ** 2 */
    AMPC_UN_CUBE,           /* x * x * x: x ** 3 */
    AMPC_UN_RECIPROCAL_SQUARE,  /* 1 / (x * x): x ** -2 */
    AMPC_UN_RSQRT,          /* 1 / sqrt(x): x ** -0.5 */
    AMPC_UN_RECIPROCAL,     /* 1 / x: x ** -1 */
    AMPC_UN_FLOOR,          /* the roundings to an integer value */
    AMPC_UN_CEIL,
    AMPC_UN_ROUND,          /* half to even */
    AMPC_UN_TRUNC,
    AMPC_UN_FRAC,           /* x - trunc(x) */
    AMPC_UN_SIN,            /* the element-wise math of csrc/trig_math.h */
    AMPC_UN_COS,
    AMPC_UN_LOG1P,          /* and of elementwise_math.h */
    AMPC_UN_EXPM1,
    AMPC_UN_LOG2,
    AMPC_UN_LOG10,
    AMPC_UN_ERF,
    AMPC_UN_ERFC,
    AMPC_UN_TAN,            /* trig_math.h */
    AMPC_UN_ASIN,           /* asin .. atanh: arc_hyp_math.h */
    AMPC_UN_ACOS,
    AMPC_UN_ATAN,
    AMPC_UN_SINH,
    AMPC_UN_COSH,
    AMPC_UN_ASINH,
    AMPC_UN_ACOSH,
    AMPC_UN_ATANH,
    AMPC_UN_ISFINITE,       /* output dtype is bool */
    AMPC_NUM_UNARY
} ampc_unary_op;

typedef enum {
    AMPC_RED_SUM = 0,
    AMPC_RED_MEAN,
    AMPC_RED_MAX,
    AMPC_RED_MIN,
    AMPC_RED_ARGMAX,        /* writes only the int64 indices */
    AMPC_RED_ARGMIN,
    AMPC_RED_PROD,          /* float dtypes in double, ints wrapping int64 */
    AMPC_NUM_REDUCE
} ampc_reduce_op;

typedef enum {
    AMPC_RAND_UNIFORM = 0,  /* [lo, hi) */
    AMPC_RAND_NORMAL,       /* mean lo, std hi */
    AMPC_RAND_INT,          /* integers in [lo, hi) */
    AMPC_RAND_BERNOULLI     /* 1 with probability lo, else 0 */
} ampc_random_kind;

// ----------------------------------------------------------------------------
// element-wise iteration (built by csrc/iter.c)

#define AMPC_MAX_DIMS 16
#define AMPC_ITER_MAX_OPS 4      /* where: out, cond, a, b */

/* Operand 0 is the output; the others are broadcast to its shape (stride 0
 * along broadcast dims).  Dims are ordered and merged by iter.c, so a dense
 * iteration has ndim == 1.  The CPU runs a 1-D kernel per innermost run;
 * the CUDA element-wise launchers take the whole iteration. */
typedef struct {
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    int nops;
    char *data[AMPC_ITER_MAX_OPS];
    size_t itemsize[AMPC_ITER_MAX_OPS];
    int64_t strides[AMPC_ITER_MAX_OPS][AMPC_MAX_DIMS];  /* elements */
} ampc_iter;

// ----------------------------------------------------------------------------
// kernel function types
//
// Element-wise kernels take n elements at strides given in elements; a
// stride of 0 broadcasts one value.  Operands share the dtype `dt`, except
// where noted.  Float16 and bfloat16 are widened to float32 at load, computed
// in float32 and rounded once (RNE) at store.

/* dst[i*ds] = (ddt) src[i*ss] for every pair of dtypes. */
typedef void (*ampc_cast_fn)(int64_t n, ampc_dtype sdt, const void *src,
                             int64_t ss, ampc_dtype ddt, void *dst,
                             int64_t ds);

/* out[i*so] = a[i*sa] OP b[i*sb]; int64 division is never requested (the
 * caller promotes true division to float). */
typedef void (*ampc_binary_fn)(ampc_binary_op op, ampc_dtype dt, int64_t n,
                               const void *a, int64_t sa, const void *b,
                               int64_t sb, void *out, int64_t so);

/* out (bool) [i*so] = a[i*sa] OP b[i*sb]. */
typedef void (*ampc_compare_fn)(ampc_compare_op op, ampc_dtype dt, int64_t n,
                                const void *a, int64_t sa, const void *b,
                                int64_t sb, void *out, int64_t so);

/* out[i*so] = OP(a[i*sa]); out is bool for AMPC_UN_ISFINITE, else dt. */
typedef void (*ampc_unary_fn)(ampc_unary_op op, ampc_dtype dt, int64_t n,
                              const void *a, int64_t sa, void *out,
                              int64_t so);

/* x contiguous (outer, r, inner) -> out (outer, inner), reducing over r >= 1.
 * out dtype: dt for float inputs, int64 for int64/bool inputs (SUM, MEAN is
 * float only), dt for MAX/MIN.  idx (int64, may be NULL for SUM/MEAN/MAX/MIN)
 * receives the position along r of the first max/min; ARGMAX/ARGMIN write
 * only idx.  NaN wins max and min, as in PyTorch.  Float16 and bfloat16
 * accumulate in float32. */
typedef void (*ampc_reduce_fn)(ampc_reduce_op op, ampc_dtype dt,
                               int64_t outer, int64_t r, int64_t inner,
                               const void *x, void *out, int64_t *idx);

/* Fill n contiguous elements of dt from the counter-based generator:
 * element i depends only on (seed, offset + i), never on threads. */
typedef void (*ampc_random_fn)(ampc_random_kind kind, ampc_dtype dt,
                               int64_t n, void *out, uint64_t seed,
                               uint64_t offset, double lo, double hi);

/* out[i] = start + i * step, n contiguous elements of dt. */
typedef void (*ampc_arange_fn)(ampc_dtype dt, int64_t n, void *out,
                               double start, double step);

/* out[i*so] = cond[i*sc] ? a[i*sa] : b[i*sb], with cond bool (any nonzero
 * byte is true) and a, b, out elements of es bytes (1, 2, 4 or 8): a
 * select, so every dtype is copied bit for bit (NaN payloads too). */
typedef void (*ampc_where_fn)(size_t es, int64_t n, const uint8_t *cond,
                              int64_t sc, const void *a, int64_t sa,
                              const void *b, int64_t sb, void *out,
                              int64_t so);

/* out[i*so] = lerp(start[i*ss], end[i*se], w) (elementwise_math.h
 * ampc_lerp_f32), w = weight[i*sw], or `scalar` for every element when
 * weight is NULL (a Python number stays float32, as PyTorch's opmath);
 * float dtypes only. */
typedef void (*ampc_lerp_fn)(ampc_dtype dt, int64_t n, const void *start,
                             int64_t ss, const void *end, int64_t se,
                             const void *weight, int64_t sw, float scalar,
                             void *out, int64_t so);

// ----------------------------------------------------------------------------
// advanced indexing and nonzero (Python side: csrc/index_ops.c)

/* A strided tensor t whose first k dims are indexed by k rows of n int64
 * indices (idx, contiguous, each row in [-size, size): a negative one
 * counts from the end; in [0, size) when not wrap), the other dims
 * ("rest") taken whole, and a strided operand v of shape (n, rest...):
 * gather reads t into v, put writes v into t.  Strides are in elements;
 * the rest dims are merged where both t and v allow it, so a dense row is
 * one run. */
typedef struct {
    int k;
    int wrap;                               /* 0: a negative index is bad */
    int ordered;                            /* put: tuples land in order */
    int64_t n;
    int64_t size[AMPC_MAX_DIMS];            /* t's indexed dims */
    int64_t stride[AMPC_MAX_DIMS];          /* and their strides in t */
    int nrest;
    int64_t rest[AMPC_MAX_DIMS];            /* the rest dims' sizes */
    int64_t t_rest_stride[AMPC_MAX_DIMS];
    int64_t v_rest_stride[AMPC_MAX_DIMS];
    int64_t v_stride;                       /* v's stride along n */
    int64_t rest_numel;
} ampc_index_geom;

/* v[j, r] = t[idx[:, j], r], elements of es bytes (any dtype).  0, or -1
 * when out of host memory. */
typedef int (*ampc_index_gather_fn)(const ampc_index_geom *g, size_t es,
                                     const void *t, const int64_t *idx,
                                     void *v);

/* t[idx[:, j], r] = v[j, r], or += when accumulate (dt float32 or int64
 * then; an index met twice adds twice, in order of j).  Without
 * accumulate, which of two writes to one element lands is unspecified
 * (g->ordered: the last).  0, or -1 when out of host memory. */
typedef int (*ampc_index_put_fn)(const ampc_index_geom *g, ampc_dtype dt,
                                  int accumulate, void *t,
                                  const int64_t *idx, const void *v);

/* The number of true elements of the n bools at mask. */
typedef int64_t (*ampc_count_true_fn)(int64_t n, const uint8_t *mask);

/* out (count, ndim) int64, count from count_true: the coordinates in a
 * contiguous bool tensor of the given shape (n elements) of each of its true
 * elements, in order.  0, or -1 when out of host memory. */
typedef int (*ampc_nonzero_fn)(int ndim, const int64_t *shape, int64_t n,
                               const uint8_t *mask, int64_t *out);

// ----------------------------------------------------------------------------
// scatter_reduce (Python side: csrc/scatter_ops.c; the per-element rules:
// scatter_math.h)

typedef enum {
    AMPC_SCATTER_SUM = 0,
    AMPC_SCATTER_PROD,
    AMPC_SCATTER_MEAN,
    AMPC_SCATTER_AMAX,
    AMPC_SCATTER_AMIN,
    AMPC_NUM_SCATTER_OPS
} ampc_scatter_op;

/* t[..., idx[p], ...] (idx[p] replacing coordinate `dim` of p) op= src[p]
 * for every position p of the index, whose shape is `size`; t, idx and src
 * are strided (element strides), idx in [0, dim_size) (t's size along
 * dim).  include_self == 0: every element of t that is scattered to starts
 * from the op's identity instead of its value.  MEAN sums and counts each
 * scattered element's values in `count` (int64 zeros of t's shape, strides
 * c_stride), then divides (floor division for int64) by the count, plus
 * one for t's own value with include_self. */
typedef struct {
    int ndim;                               /* >= 1 */
    int dim;
    int include_self;
    int64_t dim_size;
    int64_t size[AMPC_MAX_DIMS];
    int64_t t_stride[AMPC_MAX_DIMS];
    int64_t i_stride[AMPC_MAX_DIMS];
    int64_t s_stride[AMPC_MAX_DIMS];
    int64_t c_stride[AMPC_MAX_DIMS];        /* MEAN only */
} ampc_scatter_geom;

/* dt float32 or int64 (float16/bfloat16 are reduced in a float32 copy, bool
 * in an int64 one); the index is not empty, and every index is in range
 * (the caller checked).  Each element of t receives its values in the order
 * of its positions along dim, so float results do not depend on the thread
 * count. */
typedef void (*ampc_scatter_reduce_fn)(const ampc_scatter_geom *g,
                                       ampc_dtype dt, ampc_scatter_op op,
                                       void *t, const int64_t *idx,
                                       const void *src, int64_t *count);

// ----------------------------------------------------------------------------
// scans and sorts along one dim (Python side: csrc/ops_scan.c,
// csrc/ops_sort.c; the sort order: sort_math.h).  x is contiguous
// (outer, n, inner): the dim has n elements at stride inner.

typedef enum {
    AMPC_SCAN_SUM = 0,
    AMPC_SCAN_PROD,
    AMPC_NUM_SCAN_OPS
} ampc_scan_op;

/* x -> out (outer, n, inner), both of dt (float32, float16, bfloat16 or
 * int64; bool is scanned in an int64 copy): out[o, j, i] = x[o, 0, i] op
 * ... op x[o, j, i], in order.  The running value is a double for float32
 * and a float for float16/bfloat16 (each output rounded once), wrapping
 * for int64.  out may be x itself. */
typedef void (*ampc_scan_fn)(ampc_scan_op op, ampc_dtype dt, int64_t outer,
                             int64_t n, int64_t inner, const void *x,
                             void *out);

/* x (outer, n, inner) of any dtype -> values (outer, n, inner) of dt (or
 * NULL: argsort) and indices (outer, n, inner): each line along the dim
 * sorted by sort_math.h's order, ascending or descending, stably (equal
 * elements keep their input order).  0, or -1 when out of memory. */
typedef int (*ampc_sort_fn)(ampc_dtype dt, int descending, int64_t outer,
                            int64_t n, int64_t inner, const void *x,
                            void *values, int64_t *indices);

/* x (outer, n, inner) -> values, indices (outer, k, inner), 0 <= k <= n:
 * the k largest (or smallest) of each line, in sorted order, ties taken
 * in input order (the first ones win).  0, or -1 when out of memory. */
typedef int (*ampc_topk_fn)(ampc_dtype dt, int largest, int64_t outer,
                            int64_t n, int64_t inner, int64_t k,
                            const void *x, void *values, int64_t *indices);

// ----------------------------------------------------------------------------
// AMP: the fused unscale-and-check, the scale update, the gradient norm
// (csrc/cpu/*/amp.c; Python side in csrc/amp_ops.c and csrc/grad_scaler.c)

/* A list of contiguous tensors (an optimiser's gradients): tensor t holds
 * numel[t] elements of dtype[t] at data[t].  The dtypes may be mixed. */
typedef struct {
    int64_t n;
    void *const *data;
    const int64_t *numel;
    const ampc_dtype *dtype;
} ampc_tensor_list;

/* What one unscale pass saw in one tensor: inf and NaN among the INPUT
 * elements, zero and subnormal among the OUTPUT elements (in the tensor's
 * own dtype, after unscaling: underflow telemetry). */
typedef struct {
    int64_t inf;
    int64_t nan;
    int64_t zero;
    int64_t subnormal;
} ampc_amp_counts;

/* l: float32/float16/bfloat16 tensors, each x <- x * inv_scale in place
 * (PyTorch's _amp_foreach_non_finite_check_and_unscale_): *found_inf is set
 * to 1.0f when any input element is inf or NaN and is never cleared;
 * inv_scale == 1 leaves every bit as it was (nothing is written).  counts
 * (l->n entries, zeroed by the caller) may be NULL. */
typedef void (*ampc_amp_unscale_fn)(const ampc_tensor_list *l,
                                    float inv_scale, float *found_inf,
                                    ampc_amp_counts *counts);

/* PyTorch's _amp_update_scale_ on one scale and one tracker (amp_math.h
 * ampc_amp_update_scale_one). */
typedef void (*ampc_amp_update_scale_fn)(float *scale, int64_t *tracker,
                                         const float *found_inf,
                                         double growth_factor,
                                         double backoff_factor,
                                         int64_t growth_interval);

/* Per-tensor norm accumulators of l (float dtypes), acc[t] for tensor t:
 * p == 2: sum x^2; p == 1: sum |x|; p == inf: max |x|; p == -inf: min |x|
 * (inf for an empty tensor); p == 0: count of x != 0; else sum |x|^p.  NaN
 * propagates.  Double accumulation; the result does not depend on the
 * number of threads. */
typedef void (*ampc_grad_norm_fn)(const ampc_tensor_list *l, double p,
                                  double *acc);

// ----------------------------------------------------------------------------
// linear algebra: GEMM and conv2d (csrc/cpu/*/gemm.c, csrc/cpu/ref/conv2d.c;
// Python side in csrc/linalg_ops.c)

/* Kernel status: 0, or this when scratch memory cannot be had. */
#define AMPC_LINALG_NOMEM 1

typedef enum {
    AMPC_BIAS_NONE = 0,
    AMPC_BIAS_ROW,          /* bias (M,): one value per row of C (conv) */
    AMPC_BIAS_COL           /* bias (N,): one value per column (linear) */
} ampc_bias_mode;

/* C (M, N) = A (M, K) B (K, N) [+ C] [+ bias] [relu], float32 accumulation,
 * C rounded once (RNE).  Element (i, p) of A is a[i*rsa + p*csa] and (p, j)
 * of B is b[p*rsb + j*csb], so transposed operands need no copy; C is
 * row-major with row stride ldc.  A, B and the bias have dtype dt; C has
 * dtype cdt, either dt or float32. */
typedef struct {
    int64_t m, n, k;
    ampc_dtype dt;
    const void *a;
    int64_t rsa, csa;
    const void *b;
    int64_t rsb, csb;
    void *c;
    ampc_dtype cdt;
    int64_t ldc;
    const void *bias;
    ampc_bias_mode bias_mode;
    int relu;               /* max(x, 0) after the bias; NaN stays NaN */
    int beta;               /* 1: C += A B (C's old values summed in fp32) */
    int nthreads;           /* 0: every OpenMP thread */
    int64_t batch;          /* 0 or 1: one product; else this many, ... */
    int64_t sba, sbb, sbc;  /* ... the b-th at a + b*sba, b + b*sbb, c +
                             * b*sbc (elements; 0 broadcasts) */
} ampc_gemm_args;

/* Returns 0 or AMPC_LINALG_NOMEM. */
typedef int (*ampc_gemm_fn)(const ampc_gemm_args *g);

/* Every tensor contiguous.  With G groups, output channels [g*OC/G,
 * (g+1)*OC/G) see only input channels [g*C/G, (g+1)*C/G): the weight is
 * (OC, C/G, KH, KW), and G divides C and OC. */
typedef struct {
    int64_t n, c, h, w;     /* input x (N, C, H, W) */
    int64_t oc, kh, kw;     /* weight (OC, C/G, KH, KW) */
    int64_t groups;         /* G >= 1 */
    int64_t oh, ow;         /* output y (N, OC, OH, OW) */
    int64_t sh, sw;         /* stride */
    int64_t ph, pw;         /* zero padding */
    int64_t dh, dw;         /* dilation */
} ampc_conv2d_shape;

/* x, w, bias (OC) or NULL -> y = conv(x, w) + bias [relu]; returns 0 or
 * AMPC_LINALG_NOMEM, as the two below. */
typedef int (*ampc_conv2d_fwd_fn)(const ampc_conv2d_shape *s, ampc_dtype dt,
                                  const void *x, const void *w,
                                  const void *bias, int relu, void *y);
/* dy (N, OC, OH, OW), w -> dx (N, C, H, W) */
typedef int (*ampc_conv2d_bwd_input_fn)(const ampc_conv2d_shape *s,
                                        ampc_dtype dt, const void *dy,
                                        const void *w, void *dx);
/* dy, x -> dw (OC, C/G, KH, KW) and db (OC), each NULL when not wanted;
 * summed over the batch in float32 and rounded once. */
typedef int (*ampc_conv2d_bwd_weight_fn)(const ampc_conv2d_shape *s,
                                         ampc_dtype dt, const void *dy,
                                         const void *x, void *dw, void *db);

typedef enum {
    AMPC_PEAK_FMA = 0,      /* float32 multiply-adds at the level's width */
    AMPC_PEAK_BF16_DOT      /* AVX512_BF16 vdpbf16ps pair dot products */
} ampc_peak_kind;

/* Runs independent multiply-add chains on nthreads threads (0: all) for
 * about `seconds`: the FLOP/s measured (each thread timed by its CPU
 * clock, then summed), or 0 when the level lacks `kind`. */
typedef double (*ampc_peak_flops_fn)(ampc_peak_kind kind, double seconds,
                                     int nthreads);

// ----------------------------------------------------------------------------
// NN kernels and fused optimizer steps (csrc/cpu/*/{relu,pool,softmax,loss,
// dropout,optim}.c, bodies in csrc/cpu/nn_loops.h; Python side in
// csrc/nn_ops.c and csrc/optim_ops.c)
//
// Every tensor is contiguous.  These kernels are called outside any parallel
// region and split their work over threads themselves; the results do not
// depend on the number of threads.  Float16 and bfloat16 are widened at
// load, computed in float32 and rounded once (RNE) at store.

/* Status of the kernels that can fail. */
typedef enum {
    AMPC_NN_OK = 0,
    AMPC_NN_BAD_INDEX = 1,      /* an index outside its plane (skipped) */
    AMPC_NN_NO_MEMORY = 2       /* scratch memory could not be had */
} ampc_nn_status;

/* avg_pool2d (kernel KH x KW, stride, implicit zero padding, ceil_mode in
 * the output size) and adaptive_avg_pool2d (adaptive: torch's windows for
 * an OH x OW output; k, s and p unused) over planes = N * C planes of
 * H x W.  Output (i, j) is the float32 sum of its window divided by
 * divisor_override when nonzero, else by fh(i) * fw(j), one factor per axis
 * (avg_pool_math.h ampc_avg_window). */
typedef struct {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    int adaptive, count_include_pad;
    int64_t divisor_override;
} ampc_avg_pool2d_shape;

/* x (planes, H, W) -> y (planes, OH, OW); each window summed by columns
 * (each column's rows in order, then the columns in order) */
typedef int (*ampc_avg_pool2d_fwd_fn)(const ampc_avg_pool2d_shape *s,
                                      ampc_dtype dt, const void *x,
                                      void *y);
/* grad_out (planes, OH, OW) -> grad_in (planes, H, W): each input element
 * the sum, over the output rows whose windows hold it (in order), of the
 * sums over the output columns likewise of grad_out / divisor.  Both
 * return an ampc_nn_status. */
typedef int (*ampc_avg_pool2d_bwd_fn)(const ampc_avg_pool2d_shape *s,
                                      ampc_dtype dt, const void *grad_out,
                                      void *grad_in);

/* grad_in (n) = out <= 0 ? 0 : grad_out, with out the relu's output (a NaN
 * passes the gradient, as torch's threshold_backward lets it). */
typedef void (*ampc_relu_bwd_fn)(ampc_dtype dt, int64_t n,
                                 const void *grad_out, const void *out,
                                 void *grad_in);

/* max_pool2d over planes = N * C planes of H x W; the window is KH x KW
 * with stride, implicit -inf padding and dilation; output OH x OW.
 * relu_masked folds the backward of a ReLU before the pooling into the
 * indices: the forward stores -1 - idx for an output <= 0 (its window held
 * no positive value, so relu's backward passes nothing there; a NaN is not
 * <= 0), and the backward adds nothing for such an index.  The ReLU's
 * output then need not be kept for backward.  Exact when no window is
 * empty (no ceil_mode window wholly in the padding). */
typedef struct {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int relu_masked;
} ampc_pool2d_shape;

/* x (planes, H, W) -> y (planes, OH, OW) and idx (planes, OH, OW), the flat
 * index of each window's max in its H*W plane: torch's rule (a NaN wins, a
 * tie keeps the first). */
typedef void (*ampc_max_pool2d_fwd_fn)(const ampc_pool2d_shape *s,
                                       ampc_dtype dt, const void *x, void *y,
                                       int64_t *idx);
/* grad_out (planes, OH, OW), idx -> grad_in (planes, H, W), overwritten
 * with the gradients summed at their indices (float32 sums); an index
 * outside [0, H*W) is skipped (unless it is a relu_masked one).  Reads
 * only planes, h, w, oh, ow and relu_masked of s.
 * Returns an ampc_nn_status. */
typedef int (*ampc_max_pool2d_bwd_fn)(const ampc_pool2d_shape *s,
                                      ampc_dtype dt, const void *grad_out,
                                      const int64_t *idx, void *grad_in);

/* x (planes, H, W), idx (planes, OH, OW) -> out (planes, OH, OW):
 * out = x at each index (the adjoint of max_pool2d_bwd, for second
 * derivatives); a relu_masked index gives 0.  Elements of es bytes are
 * copied, so any dtype.  Reads only planes, h, w, oh, ow and relu_masked
 * of s.  Returns an ampc_nn_status (an index outside its plane gives 0
 * and AMPC_NN_BAD_INDEX). */
typedef int (*ampc_max_pool2d_gather_fn)(const ampc_pool2d_shape *s,
                                         size_t es, const void *x,
                                         const int64_t *idx, void *out);

/* x (outer, R, inner) of dtype xdt -> y of dtype ydt: softmax (log == 0) or
 * log_softmax (log == 1) over R >= 1, max-subtracted. */
typedef void (*ampc_softmax_fwd_fn)(int log, ampc_dtype xdt, ampc_dtype ydt,
                                    int64_t outer, int64_t r, int64_t inner,
                                    const void *x, void *y);
/* grad_y, y (outer, R, inner) -> grad_x: softmax y * (gy - sum(gy * y)),
 * log_softmax gy - exp(y) * sum(gy), sums over R. */
typedef void (*ampc_softmax_bwd_fn)(int log, ampc_dtype dt, int64_t outer,
                                    int64_t r, int64_t inner,
                                    const void *grad_y, const void *y,
                                    void *grad_x);

/* Class-index losses over N rows of C classes: target (N) holds classes in
 * [0, C) or ignore_index (checked by the caller); weight (C) is float32 or
 * NULL for all ones; row outputs are doubles, 0 for ignored rows. */
typedef struct {
    int64_t n, c;
    int64_t ignore_index;
    double label_smoothing;     /* cross_entropy only */
} ampc_class_loss_shape;

/* logp (N, C) -> row_loss = -w[t] * logp[t], row_weight = w[t] */
typedef void (*ampc_nll_fwd_fn)(const ampc_class_loss_shape *s, ampc_dtype dt,
                                const void *logp, const int64_t *target,
                                const float *weight, double *row_loss,
                                double *row_weight);
/* -> grad (N, C): 0 except grad[i, t_i] = -row_scale[i] * w[t_i] */
typedef void (*ampc_nll_bwd_fn)(const ampc_class_loss_shape *s, ampc_dtype dt,
                                const int64_t *target, const float *weight,
                                const float *row_scale, void *grad);
/* logits (N, C) -> logp (N, C) = log_softmax(logits) and, with
 * ls = label_smoothing, row_loss = (1 - ls) * w[t] * -logp[t]
 * + ls / C * sum_k w[k] * -logp[k], row_weight = w[t] (one pass per row) */
typedef void (*ampc_xent_fwd_fn)(const ampc_class_loss_shape *s,
                                 ampc_dtype dt, const void *logits,
                                 const int64_t *target, const float *weight,
                                 void *logp, double *row_loss,
                                 double *row_weight);
/* logp (N, C) -> grad (N, C) of row_scale[i] * row_loss[i] with respect to
 * the logits: row_scale[i] * (exp(logp) * A_i - a_ik), a_ik the
 * coefficient of -logp[k] in row_loss[i] and A_i their sum. */
typedef void (*ampc_xent_bwd_fn)(const ampc_class_loss_shape *s,
                                 ampc_dtype dt, const void *logp,
                                 const int64_t *target, const float *weight,
                                 const float *row_scale, void *grad);

/* Elements per partial sum of the mse_loss kernel. */
#define AMPC_LOSS_CHUNK 16384

/* x, t (n) -> out (n) = (x - t)^2 when out is not NULL, else partial[k]
 * (k < ceil(n / AMPC_LOSS_CHUNK)) = the sum of (x - t)^2 over chunk k. */
typedef void (*ampc_mse_fwd_fn)(ampc_dtype dt, int64_t n, const void *x,
                                const void *t, void *out, double *partial);
/* grad_x (n) = (scale * (x - t)) * grad, grad (n) or NULL for ones */
typedef void (*ampc_mse_bwd_fn)(ampc_dtype dt, int64_t n, const void *x,
                                const void *t, const void *grad, float scale,
                                void *grad_x);

/* y (n) = (x * mask) * scale, mask bool: dropout and its backward */
typedef void (*ampc_masked_scale_fn)(ampc_dtype dt, int64_t n, const void *x,
                                     const uint8_t *mask, float scale,
                                     void *y);

/* the fused optimizer steps: SGD, Adam/AdamW, RMSprop, Adagrad */
#include "kernels_optim.h"

// ----------------------------------------------------------------------------
// normalisation layers: batch norm, layer norm and group norm

#include "kernels_norm.h"

#include "kernels_extra.h"

// ----------------------------------------------------------------------------
// the kernel table: one slot per line of ops.def

typedef struct {
#define AMPC_OP(name, fn_type) fn_type name;
#include "ops.def"
#undef AMPC_OP
} ampc_kernel_table;

typedef enum {
#define AMPC_OP(name, fn_type) AMPC_SLOT_##name,
#include "ops.def"
#undef AMPC_OP
    AMPC_NUM_SLOTS
} ampc_slot;

/* The CPU levels, lowest first. */
typedef enum {
    AMPC_CPU_REF = 0,
    AMPC_CPU_AVX2,
    AMPC_CPU_AVX512,
    AMPC_NUM_CPU_LEVELS
} ampc_cpu_level;

/* Each level's register function fills the slots it implements and records
 * its level name in `variant` for those slots.  ref fills every slot. */
void ampc_register_cpu_ref(ampc_kernel_table *t, const char **variant);
void ampc_register_cpu_avx2(ampc_kernel_table *t, const char **variant);
void ampc_register_cpu_avx512(ampc_kernel_table *t, const char **variant);

/* cpu/features.c: the best level this CPU and OS support (cpuid + XGETBV). */
ampc_cpu_level ampc_cpu_detect(void);
/* One bit per feature, for ampc.backends.cpu.capability(). */
int ampc_cpu_has(const char *feature);

#ifdef __cplusplus
}
#endif

#endif /* AMPC_KERNELS_H */
