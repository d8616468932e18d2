/* cpu.h - what the CPU kernel levels (ref, avx2, avx512) share: the target
 * attributes, the float16/bfloat16 converters each level brings, the parts
 * of the reduction that each level compiles for its ISA, and a prototype for
 * every CPU kernel variant, so that definitions and register.c agree.
 */
#ifndef AMPC_CPU_CPU_H
#define AMPC_CPU_CPU_H

#include <stdint.h>

#include "kernels.h"

// ----------------------------------------------------------------------------
// target attributes
//
// SIMD code is compiled per function, never per file and never with
// -march=native: the attribute works in gcc and clang alike, whereas clang
// ignores #pragma GCC target.  Untagged static inline helpers (loops.h) may be
// inlined into a tagged function and are then vectorised for its ISA.

#define AMPC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define AMPC_TARGET_AVX512 \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define AMPC_ALWAYS_INLINE inline __attribute__((always_inline))

// ----------------------------------------------------------------------------
// float16 / bfloat16 converters
//
// Contiguous runs of any length n >= 0.  Every level must agree bit for bit
// with amp_math.h (only a NaN's payload may differ; a NaN stays a NaN).

typedef struct {
    void (*f16_to_f32)(int64_t n, const uint16_t *src, float *dst);
    void (*f32_to_f16)(int64_t n, const float *src, uint16_t *dst);
    void (*bf16_to_f32)(int64_t n, const uint16_t *src, float *dst);
    void (*f32_to_bf16)(int64_t n, const float *src, uint16_t *dst);
} ampc_converters;

extern const ampc_converters ampc_cvt_ref;
extern const ampc_converters ampc_cvt_avx2;
extern const ampc_converters ampc_cvt_avx512;

// ----------------------------------------------------------------------------
// reduction parts
//
// cpu/ref/reduce.c owns the OpenMP split (an OpenMP region must be written
// inside the function whose ISA its body should get, so it cannot live in an
// inline helper) and calls these per-level parts on pieces of the work.

/* The partial result of reducing one contiguous run. */
typedef struct {
    double sum;         /* float SUM/MEAN */
    uint64_t isum;      /* int64/bool SUM, wrapping */
    int64_t idx;        /* MAX/MIN family: first best position in the run */
} ampc_red_partial;

typedef struct {
    /* x: n > 0 contiguous elements -> *p */
    void (*run)(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t n,
                ampc_red_partial *p);
    /* x (r, inner) with row stride inner: reduces ncols <= AMPC_RED_TILE
     * columns over r and writes out[0:ncols] and idx[0:ncols] (when not
     * NULL), as the kernel itself does. */
    void (*cols)(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t r,
                 int64_t inner, int64_t ncols, void *out, int64_t *idx);
} ampc_reduce_parts;

/* The reduce kernel of every level: the split over threads, with `parts`
 * doing the work.  Results do not depend on the thread count. */
void ampc_reduce_run(const ampc_reduce_parts *parts, ampc_reduce_op op,
                     ampc_dtype dt, int64_t outer, int64_t r, int64_t inner,
                     const void *x, void *out, int64_t *idx);

// ----------------------------------------------------------------------------
// kernel variants (types: kernels.h); levels reuse the names with their suffix

void ampc_cast_ref(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
                   ampc_dtype ddt, void *dst, int64_t ds);
void ampc_binary_ref(ampc_binary_op op, ampc_dtype dt, int64_t n,
                     const void *a, int64_t sa, const void *b, int64_t sb,
                     void *out, int64_t so);
void ampc_compare_ref(ampc_compare_op op, ampc_dtype dt, int64_t n,
                      const void *a, int64_t sa, const void *b, int64_t sb,
                      void *out, int64_t so);
void ampc_unary_ref(ampc_unary_op op, ampc_dtype dt, int64_t n, const void *a,
                    int64_t sa, void *out, int64_t so);
void ampc_reduce_ref(ampc_reduce_op op, ampc_dtype dt, int64_t outer,
                     int64_t r, int64_t inner, const void *x, void *out,
                     int64_t *idx);

void ampc_cast_avx2(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
                    ampc_dtype ddt, void *dst, int64_t ds);
void ampc_binary_avx2(ampc_binary_op op, ampc_dtype dt, int64_t n,
                      const void *a, int64_t sa, const void *b, int64_t sb,
                      void *out, int64_t so);
void ampc_compare_avx2(ampc_compare_op op, ampc_dtype dt, int64_t n,
                       const void *a, int64_t sa, const void *b, int64_t sb,
                       void *out, int64_t so);
void ampc_unary_avx2(ampc_unary_op op, ampc_dtype dt, int64_t n, const void *a,
                     int64_t sa, void *out, int64_t so);
void ampc_reduce_avx2(ampc_reduce_op op, ampc_dtype dt, int64_t outer,
                      int64_t r, int64_t inner, const void *x, void *out,
                      int64_t *idx);

void ampc_cast_avx512(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
                      ampc_dtype ddt, void *dst, int64_t ds);
void ampc_binary_avx512(ampc_binary_op op, ampc_dtype dt, int64_t n,
                        const void *a, int64_t sa, const void *b, int64_t sb,
                        void *out, int64_t so);
void ampc_compare_avx512(ampc_compare_op op, ampc_dtype dt, int64_t n,
                         const void *a, int64_t sa, const void *b, int64_t sb,
                         void *out, int64_t so);
void ampc_unary_avx512(ampc_unary_op op, ampc_dtype dt, int64_t n,
                       const void *a, int64_t sa, void *out, int64_t so);
void ampc_reduce_avx512(ampc_reduce_op op, ampc_dtype dt, int64_t outer,
                        int64_t r, int64_t inner, const void *x, void *out,
                        int64_t *idx);

/* Only ref implements these; no SIMD level overrides them. */
void ampc_random_ref(ampc_random_kind kind, ampc_dtype dt, int64_t n,
                     void *out, uint64_t seed, uint64_t offset, double lo,
                     double hi);
void ampc_arange_ref(ampc_dtype dt, int64_t n, void *out, double start,
                     double step);

#endif /* AMPC_CPU_CPU_H */
