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
    AMPC_NUM_REDUCE
} ampc_reduce_op;

typedef enum {
    AMPC_RAND_UNIFORM = 0,  /* [lo, hi) */
    AMPC_RAND_NORMAL,       /* mean lo, std hi */
    AMPC_RAND_INT,          /* integers in [lo, hi) */
    AMPC_RAND_BERNOULLI     /* 1 with probability lo, else 0 */
} ampc_random_kind;

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
