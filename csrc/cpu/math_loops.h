/* math_loops.h - the element-wise math loops of every CPU level, for
 * cpu/loops.h's unary and binary kernels: sin, cos, tan, log1p, expm1,
 * log2, log10, erf, erfc and the inverse trigonometric and hyperbolic
 * functions; atan2, fmod and remainder (float32 and int64).  The one-value
 * math is the headers' that the CUDA kernels share (trig_math.h,
 * elementwise_math.h, arc_hyp_math.h, mod_math.h); the loops here are on
 * contiguous float32 (or int64) blocks, so they vectorise where the math is
 * branch-free.
 */
#ifndef AMPC_CPU_MATH_LOOPS_H
#define AMPC_CPU_MATH_LOOPS_H

#include <stdint.h>

#include "cpu/cpu.h"
#include "arc_hyp_math.h"
#include "elementwise_math.h"
#include "kernels.h"
#include "mod_math.h"
#include "trig_math.h"

/* One op, from AMPC_UN_SIN up to (not including) AMPC_UN_ISFINITE. */
static AMPC_ALWAYS_INLINE void
ampc_unary_math_f32(ampc_unary_op op, int64_t n, const float *a, float *o)
{
    int64_t i;
    switch (op) {
    case AMPC_UN_SIN:
        ampc_trig_loop(0u, n, a, o);
        break;
    case AMPC_UN_COS:
        ampc_trig_loop(1u, n, a, o);
        break;
    case AMPC_UN_TAN:
        ampc_trig_loop(2u, n, a, o);
        break;
    case AMPC_UN_LOG1P:
        for (i = 0; i < n; i++) {
            o[i] = ampc_log1p_f32(a[i]);
        }
        break;
    case AMPC_UN_EXPM1:
        for (i = 0; i < n; i++) {
            o[i] = ampc_expm1_f32(a[i]);
        }
        break;
    case AMPC_UN_LOG2:
        for (i = 0; i < n; i++) {
            o[i] = ampc_log2_f32(a[i]);
        }
        break;
    case AMPC_UN_LOG10:
        for (i = 0; i < n; i++) {
            o[i] = ampc_log10_f32(a[i]);
        }
        break;
    case AMPC_UN_ERF:
        for (i = 0; i < n; i++) {
            o[i] = ampc_erf_f32(a[i]);
        }
        break;
    case AMPC_UN_ERFC:
        for (i = 0; i < n; i++) {
            o[i] = ampc_erfc_f32(a[i]);
        }
        break;
    case AMPC_UN_ASIN:
        for (i = 0; i < n; i++) {
            o[i] = ampc_asin_f32(a[i]);
        }
        break;
    case AMPC_UN_ACOS:
        for (i = 0; i < n; i++) {
            o[i] = ampc_acos_f32(a[i]);
        }
        break;
    case AMPC_UN_ATAN:
        for (i = 0; i < n; i++) {
            o[i] = ampc_atan_f32(a[i]);
        }
        break;
    case AMPC_UN_SINH:
        for (i = 0; i < n; i++) {
            o[i] = ampc_sinh_f32(a[i]);
        }
        break;
    case AMPC_UN_COSH:
        for (i = 0; i < n; i++) {
            o[i] = ampc_cosh_f32(a[i]);
        }
        break;
    case AMPC_UN_ASINH:
        for (i = 0; i < n; i++) {
            o[i] = ampc_asinh_f32(a[i]);
        }
        break;
    case AMPC_UN_ACOSH:
        for (i = 0; i < n; i++) {
            o[i] = ampc_acosh_f32(a[i]);
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = ampc_atanh_f32(a[i]);
        }
        break;
    }
}

/* fmod (remainder 0) or remainder (1) over a block: one whose quotients
 * all stay below 2^23, nearly always, runs the vectorised fast fmod, one
 * with any larger the complete function (a second pass over those alone
 * could not: o may be a or b). */
static AMPC_ALWAYS_INLINE void
ampc_fmod_loop(int remainder, int64_t n, const float *a, const float *b,
               float *o)
{
    int64_t i;
    int slow = 0;
    for (i = 0; i < n; i++) {
        slow |= ampc_fmod_is_slow(a[i], b[i]);
    }
    if (slow) {
        for (i = 0; i < n; i++) {
            float m = ampc_fmod_f32(a[i], b[i]);
            o[i] = remainder ? ampc_remainder_from_fmod_f32(m, b[i]) : m;
        }
        return;
    }
    for (i = 0; i < n; i++) {
        float m = ampc_fmod_fast_f32(a[i], b[i]);
        o[i] = remainder ? ampc_remainder_from_fmod_f32(m, b[i]) : m;
    }
}

/* ATAN2, FMOD or REMAINDER on float32 blocks. */
static AMPC_ALWAYS_INLINE void
ampc_binary_math_f32(ampc_binary_op op, int64_t n, const float *a,
                     const float *b, float *o)
{
    int64_t i;
    switch (op) {
    case AMPC_BIN_ATAN2:
        for (i = 0; i < n; i++) {
            o[i] = ampc_atan2_f32(a[i], b[i]);
        }
        break;
    case AMPC_BIN_FMOD:
        ampc_fmod_loop(0, n, a, b, o);
        break;
    default:
        ampc_fmod_loop(1, n, a, b, o);
        break;
    }
}

/* FMOD or REMAINDER on int64 blocks (a divisor of 0 never comes from the
 * CPU ops, which raise first). */
static AMPC_ALWAYS_INLINE void
ampc_binary_mod_i64(ampc_binary_op op, int64_t n, const int64_t *a,
                    const int64_t *b, int64_t *o)
{
    int64_t i;
    if (op == AMPC_BIN_FMOD) {
        for (i = 0; i < n; i++) {
            o[i] = ampc_fmod_i64(a[i], b[i]);
        }
        return;
    }
    for (i = 0; i < n; i++) {
        o[i] = ampc_remainder_i64(a[i], b[i]);
    }
}

#endif /* AMPC_CPU_MATH_LOOPS_H */
