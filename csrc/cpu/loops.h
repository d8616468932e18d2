/* loops.h - the element-wise loops of every CPU level (reduce_loops.h has
 * the reductions, built on these; blocks.h the loads and stores), written
 * once in portable C.  Each level calls them from a function tagged with
 * its target (cpu.h), so they are inlined there and auto-vectorised for
 * that ISA;
 * float16/bfloat16 runs go through the level's converters.  The results are
 * therefore the same bits at every level, reductions included (except which
 * payload a NaN + NaN returns: x86 keeps the first operand's, and a compiler
 * may swap the operands of a commutative add or multiply).
 *
 * Element-wise kernels work in blocks of AMPC_BLOCK elements: each input is
 * widened into a float32 buffer (or used in place when it is contiguous
 * float32), the float32 loop runs, and the block is narrowed once at store.
 */
#ifndef AMPC_CPU_LOOPS_H
#define AMPC_CPU_LOOPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "amp_math.h"
#include "cpu/blocks.h"
#include "cpu/cpu.h"
#include "cpu/math_loops.h"
#include "activation_math.h"
#include "elementwise_math.h"
#include "kernels.h"

#define AMPC_RED_LANES 64           /* independent float32 partial sums */
/* No float32 partial sum adds more than AMPC_RED_LANES terms before it is
 * folded into a double, which keeps long sums accurate. */
#define AMPC_RED_BLOCK (AMPC_RED_LANES * AMPC_RED_LANES)
#define AMPC_RED_TILE 256           /* columns per ampc_reduce_parts.cols */

// ----------------------------------------------------------------------------
// one-value rules, shared by every loop below

/* The i-th element at stride s (in elements of es bytes). */
static inline const char *
ampc_at(const void *p, int64_t i, int64_t s, size_t es)
{
    return (const char *)p + i * s * (int64_t)es;
}

/* The one-value rules (maximum, minimum, relu, sign, int64 wrapping,
 * conversions) are in elementwise_math.h, shared with the CUDA kernels. */

// ----------------------------------------------------------------------------
// compute loops on contiguous blocks (the part that vectorises)

static AMPC_ALWAYS_INLINE void
ampc_binary_f32(ampc_binary_op op, int64_t n, const float *a, const float *b,
                float *o)
{
    int64_t i;
    switch (op) {
    case AMPC_BIN_ADD:
        for (i = 0; i < n; i++) {
            o[i] = a[i] + b[i];
        }
        break;
    case AMPC_BIN_SUB:
        for (i = 0; i < n; i++) {
            o[i] = a[i] - b[i];
        }
        break;
    case AMPC_BIN_MUL:
        for (i = 0; i < n; i++) {
            o[i] = a[i] * b[i];
        }
        break;
    case AMPC_BIN_DIV:
        for (i = 0; i < n; i++) {
            o[i] = a[i] / b[i];
        }
        break;
    case AMPC_BIN_MAXIMUM:
        for (i = 0; i < n; i++) {
            o[i] = ampc_maximum_f32(a[i], b[i]);
        }
        break;
    case AMPC_BIN_MINIMUM:
        for (i = 0; i < n; i++) {
            o[i] = ampc_minimum_f32(a[i], b[i]);
        }
        break;
    case AMPC_BIN_GELU_BACKWARD:
        for (i = 0; i < n; i++) {
            o[i] = a[i] * ampc_gelu_grad_f32(b[i]);
        }
        break;
    case AMPC_BIN_GELU_TANH_BACKWARD:
        for (i = 0; i < n; i++) {
            o[i] = a[i] * ampc_gelu_tanh_grad_f32(b[i]);
        }
        break;
    case AMPC_BIN_SILU_BACKWARD:
        for (i = 0; i < n; i++) {
            o[i] = a[i] * ampc_silu_grad_f32(b[i]);
        }
        break;
    case AMPC_BIN_SIGMOID_BACKWARD:
        for (i = 0; i < n; i++) {
            o[i] = ampc_sigmoid_backward_f32(a[i], b[i]);
        }
        break;
    case AMPC_BIN_TANH_BACKWARD:
        for (i = 0; i < n; i++) {
            o[i] = ampc_tanh_backward_f32(a[i], b[i]);
        }
        break;
    case AMPC_BIN_ATAN2:
    case AMPC_BIN_FMOD:
    case AMPC_BIN_REMAINDER:
        ampc_binary_math_f32(op, n, a, b, o);
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = powf(a[i], b[i]);
        }
        break;
    }
}

/* Wrap-around arithmetic, done unsigned to stay clear of overflow UB.
 * NOTE: the int64 and bool loops spell out the expressions of
 * elementwise_math.h's ampc_*_i64 and ampc_binary_bool_one (which the CUDA
 * kernels call) instead of calling them: the calls, though inlined, change
 * gcc's code for this whole kernel, and these loops must stay as they are
 * vectorised now. */
static AMPC_ALWAYS_INLINE void
ampc_binary_i64(ampc_binary_op op, int64_t n, const int64_t *a,
                const int64_t *b, int64_t *o)
{
    int64_t i;
    switch (op) {
    case AMPC_BIN_ADD:
        for (i = 0; i < n; i++) {
            o[i] = (int64_t)((uint64_t)a[i] + (uint64_t)b[i]);
        }
        break;
    case AMPC_BIN_SUB:
        for (i = 0; i < n; i++) {
            o[i] = (int64_t)((uint64_t)a[i] - (uint64_t)b[i]);
        }
        break;
    case AMPC_BIN_MUL:
        for (i = 0; i < n; i++) {
            o[i] = (int64_t)((uint64_t)a[i] * (uint64_t)b[i]);
        }
        break;
    case AMPC_BIN_DIV:
        for (i = 0; i < n; i++) {
            o[i] = ampc_div_i64(a[i], b[i]);
        }
        break;
    case AMPC_BIN_MAXIMUM:
        for (i = 0; i < n; i++) {
            o[i] = a[i] > b[i] ? a[i] : b[i];
        }
        break;
    case AMPC_BIN_MINIMUM:
        for (i = 0; i < n; i++) {
            o[i] = a[i] < b[i] ? a[i] : b[i];
        }
        break;
    case AMPC_BIN_FMOD:
    case AMPC_BIN_REMAINDER:
        ampc_binary_mod_i64(op, n, a, b, o);
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = ampc_pow_i64(a[i], b[i]);
        }
        break;
    }
}

/* ADD and MAXIMUM are "or", MUL and MINIMUM "and".  SUB, DIV and POW are
 * rejected by the caller; here they give the 0/1 integer result where one
 * exists (xor, a ** b = a or not b) and "and" for DIV. */
static AMPC_ALWAYS_INLINE void
ampc_binary_bool(ampc_binary_op op, int64_t n, const uint8_t *a,
                 const uint8_t *b, uint8_t *o)
{
    int64_t i;
    switch (op) {
    case AMPC_BIN_ADD:
    case AMPC_BIN_MAXIMUM:
        for (i = 0; i < n; i++) {
            o[i] = (a[i] | b[i]) != 0;
        }
        break;
    case AMPC_BIN_SUB:
        for (i = 0; i < n; i++) {
            o[i] = (a[i] != 0) != (b[i] != 0);
        }
        break;
    case AMPC_BIN_POW:
        for (i = 0; i < n; i++) {
            o[i] = (a[i] != 0) | (b[i] == 0);
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = (a[i] != 0) & (b[i] != 0);
        }
        break;
    }
}

/* NaN compares false except for NE. */
static AMPC_ALWAYS_INLINE void
ampc_compare_f32(ampc_compare_op op, int64_t n, const float *a,
                 const float *b, uint8_t *o)
{
    int64_t i;
    switch (op) {
    case AMPC_CMP_EQ:
        for (i = 0; i < n; i++) {
            o[i] = a[i] == b[i];
        }
        break;
    case AMPC_CMP_NE:
        for (i = 0; i < n; i++) {
            o[i] = a[i] != b[i];
        }
        break;
    case AMPC_CMP_LT:
        for (i = 0; i < n; i++) {
            o[i] = a[i] < b[i];
        }
        break;
    case AMPC_CMP_LE:
        for (i = 0; i < n; i++) {
            o[i] = a[i] <= b[i];
        }
        break;
    case AMPC_CMP_GT:
        for (i = 0; i < n; i++) {
            o[i] = a[i] > b[i];
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = a[i] >= b[i];
        }
        break;
    }
}

static AMPC_ALWAYS_INLINE void
ampc_compare_i64(ampc_compare_op op, int64_t n, const int64_t *a,
                 const int64_t *b, uint8_t *o)
{
    int64_t i;
    switch (op) {
    case AMPC_CMP_EQ:
        for (i = 0; i < n; i++) {
            o[i] = a[i] == b[i];
        }
        break;
    case AMPC_CMP_NE:
        for (i = 0; i < n; i++) {
            o[i] = a[i] != b[i];
        }
        break;
    case AMPC_CMP_LT:
        for (i = 0; i < n; i++) {
            o[i] = a[i] < b[i];
        }
        break;
    case AMPC_CMP_LE:
        for (i = 0; i < n; i++) {
            o[i] = a[i] <= b[i];
        }
        break;
    case AMPC_CMP_GT:
        for (i = 0; i < n; i++) {
            o[i] = a[i] > b[i];
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = a[i] >= b[i];
        }
        break;
    }
}

/* Every unary op but ISFINITE (which writes bool); SIN and the math after
 * it in cpu/math_loops.h. */
static AMPC_ALWAYS_INLINE void
ampc_unary_f32(ampc_unary_op op, int64_t n, const float *a, float *o)
{
    int64_t i;
    if (op >= AMPC_UN_SIN) {
        ampc_unary_math_f32(op, n, a, o);
        return;
    }
    switch (op) {
    case AMPC_UN_NEG:
        for (i = 0; i < n; i++) {
            o[i] = -a[i];
        }
        break;
    case AMPC_UN_ABS:
        for (i = 0; i < n; i++) {
            o[i] = fabsf(a[i]);
        }
        break;
    case AMPC_UN_SQRT:
        for (i = 0; i < n; i++) {
            o[i] = sqrtf(a[i]);
        }
        break;
    case AMPC_UN_EXP:
        for (i = 0; i < n; i++) {
            o[i] = ampc_exp_f32(a[i]);
        }
        break;
    case AMPC_UN_LOG:
        for (i = 0; i < n; i++) {
            o[i] = ampc_log_f32(a[i]);
        }
        break;
    case AMPC_UN_RELU:
        for (i = 0; i < n; i++) {
            o[i] = ampc_relu_f32(a[i]);
        }
        break;
    case AMPC_UN_SIGMOID:
        for (i = 0; i < n; i++) {
            o[i] = ampc_sigmoid_f32(a[i]);
        }
        break;
    case AMPC_UN_TANH:
        for (i = 0; i < n; i++) {
            o[i] = ampc_tanh_f32(a[i]);
        }
        break;
    case AMPC_UN_GELU:
        for (i = 0; i < n; i++) {
            o[i] = ampc_gelu_f32(a[i]);
        }
        break;
    case AMPC_UN_GELU_TANH:
        for (i = 0; i < n; i++) {
            o[i] = ampc_gelu_tanh_f32(a[i]);
        }
        break;
    case AMPC_UN_SILU:
        for (i = 0; i < n; i++) {
            o[i] = ampc_silu_f32(a[i]);
        }
        break;
    case AMPC_UN_GELU_GRAD:
        for (i = 0; i < n; i++) {
            o[i] = ampc_gelu_grad_f32(a[i]);
        }
        break;
    case AMPC_UN_GELU_TANH_GRAD:
        for (i = 0; i < n; i++) {
            o[i] = ampc_gelu_tanh_grad_f32(a[i]);
        }
        break;
    case AMPC_UN_SILU_GRAD:
        for (i = 0; i < n; i++) {
            o[i] = ampc_silu_grad_f32(a[i]);
        }
        break;
    case AMPC_UN_SQUARE:
        for (i = 0; i < n; i++) {
            o[i] = ampc_square_f32(a[i]);
        }
        break;
    case AMPC_UN_CUBE:
        for (i = 0; i < n; i++) {
            o[i] = ampc_cube_f32(a[i]);
        }
        break;
    case AMPC_UN_RECIPROCAL_SQUARE:
        for (i = 0; i < n; i++) {
            o[i] = ampc_reciprocal_square_f32(a[i]);
        }
        break;
    case AMPC_UN_RSQRT:
        for (i = 0; i < n; i++) {
            o[i] = ampc_rsqrt_f32(a[i]);
        }
        break;
    case AMPC_UN_FLOOR:
        for (i = 0; i < n; i++) {
            o[i] = floorf(a[i]);
        }
        break;
    case AMPC_UN_CEIL:
        for (i = 0; i < n; i++) {
            o[i] = ceilf(a[i]);
        }
        break;
    case AMPC_UN_ROUND:
        for (i = 0; i < n; i++) {
            o[i] = ampc_round_f32(a[i]);
        }
        break;
    case AMPC_UN_TRUNC:
        for (i = 0; i < n; i++) {
            o[i] = truncf(a[i]);
        }
        break;
    case AMPC_UN_FRAC:
        for (i = 0; i < n; i++) {
            o[i] = ampc_frac_f32(a[i]);
        }
        break;
    case AMPC_UN_RECIPROCAL:
        for (i = 0; i < n; i++) {
            o[i] = ampc_reciprocal_f32(a[i]);
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = ampc_sign_f32(a[i]);
        }
        break;
    }
}

/* NEG ABS RELU SIGN (the caller promotes the others to float); wrapping, so
 * -INT64_MIN and |INT64_MIN| are INT64_MIN. */
static AMPC_ALWAYS_INLINE void
ampc_unary_i64(ampc_unary_op op, int64_t n, const int64_t *a, int64_t *o)
{
    int64_t i;
    switch (op) {
    case AMPC_UN_NEG:
        for (i = 0; i < n; i++) {
            o[i] = (int64_t)(0 - (uint64_t)a[i]);
        }
        break;
    case AMPC_UN_ABS:
        for (i = 0; i < n; i++) {
            o[i] = a[i] < 0 ? (int64_t)(0 - (uint64_t)a[i]) : a[i];
        }
        break;
    case AMPC_UN_RELU:
        for (i = 0; i < n; i++) {
            o[i] = a[i] > 0 ? a[i] : 0;
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            o[i] = (a[i] > 0) - (a[i] < 0);
        }
        break;
    }
}

// ----------------------------------------------------------------------------
// element-wise kernels (the bodies of ampc_{cast,binary,compare,unary}_*)
//
// Called from inside the iterator's OpenMP region, so no OpenMP here.  An
// input of stride 0 is read once and spread over its whole buffer.

static AMPC_ALWAYS_INLINE void
ampc_binary_loop(const ampc_converters *cv, ampc_binary_op op, ampc_dtype dt,
                 int64_t n, const void *a, int64_t sa, const void *b,
                 int64_t sb, void *out, int64_t so)
{
    size_t es = ampc_dtype_size[dt];
    int64_t first = n < AMPC_BLOCK ? n : AMPC_BLOCK;
    int64_t i, j;

    if (n <= 0) {
        return;
    }
    if (dt == AMPC_INT64) {
        int64_t abuf[AMPC_BLOCK], bbuf[AMPC_BLOCK], obuf[AMPC_BLOCK];
        for (j = 0; j < first; j++) {
            abuf[j] = *(const int64_t *)a;
            bbuf[j] = *(const int64_t *)b;
        }
        for (i = 0; i < n; i += AMPC_BLOCK) {
            int64_t m = ampc_block_len(n, i);
            const int64_t *pa = sa == 0 ? abuf : ampc_load_block_i64(
                dt, ampc_at(a, i, sa, es), sa, m, abuf);
            const int64_t *pb = sb == 0 ? bbuf : ampc_load_block_i64(
                dt, ampc_at(b, i, sb, es), sb, m, bbuf);
            int64_t *po = so == 1 ? (int64_t *)out + i : obuf;
            ampc_binary_i64(op, m, pa, pb, po);
            if (po == obuf) {
                ampc_scatter_i64(obuf, m, (char *)ampc_at(out, i, so, es),
                                 so);
            }
        }
        return;
    }
    if (dt == AMPC_BOOL) {
        uint8_t abuf[AMPC_BLOCK], bbuf[AMPC_BLOCK], obuf[AMPC_BLOCK];
        memset(abuf, *(const uint8_t *)a, (size_t)first);
        memset(bbuf, *(const uint8_t *)b, (size_t)first);
        for (i = 0; i < n; i += AMPC_BLOCK) {
            int64_t m = ampc_block_len(n, i);
            const uint8_t *pa = sa == 0 ? abuf : ampc_load_block_u8(
                ampc_at(a, i, sa, es), sa, m, abuf);
            const uint8_t *pb = sb == 0 ? bbuf : ampc_load_block_u8(
                ampc_at(b, i, sb, es), sb, m, bbuf);
            uint8_t *po = so == 1 ? (uint8_t *)out + i : obuf;
            ampc_binary_bool(op, m, pa, pb, po);
            if (po == obuf) {
                ampc_scatter_u8(obuf, m, (char *)ampc_at(out, i, so, es), so);
            }
        }
        return;
    }

    if (dt == AMPC_FLOAT32 && sa == 1 && sb == 1 && so == 1) {
        ampc_binary_f32(op, n, (const float *)a, (const float *)b,
                        (float *)out);
        return;
    }
    float abuf[AMPC_BLOCK], bbuf[AMPC_BLOCK], obuf[AMPC_BLOCK];
    uint16_t tmp[AMPC_BLOCK];
    float av = ampc_load_f32(dt, a), bv = ampc_load_f32(dt, b);
    for (j = 0; j < first; j++) {
        abuf[j] = av;
        bbuf[j] = bv;
    }
    for (i = 0; i < n; i += AMPC_BLOCK) {
        int64_t m = ampc_block_len(n, i);
        const float *pa = sa == 0 ? abuf : ampc_load_block_f32(
            cv, dt, ampc_at(a, i, sa, es), sa, m, abuf, tmp);
        const float *pb = sb == 0 ? bbuf : ampc_load_block_f32(
            cv, dt, ampc_at(b, i, sb, es), sb, m, bbuf, tmp);
        float *po = (dt == AMPC_FLOAT32 && so == 1) ? (float *)out + i : obuf;
        ampc_binary_f32(op, m, pa, pb, po);
        if (po == obuf) {
            ampc_store_block_f32(cv, dt, obuf, m,
                                 (char *)ampc_at(out, i, so, es), so, tmp);
        }
    }
}

static AMPC_ALWAYS_INLINE void
ampc_compare_loop(const ampc_converters *cv, ampc_compare_op op,
                  ampc_dtype dt, int64_t n, const void *a, int64_t sa,
                  const void *b, int64_t sb, void *out, int64_t so)
{
    size_t es = ampc_dtype_size[dt];
    int64_t first = n < AMPC_BLOCK ? n : AMPC_BLOCK;
    uint8_t obuf[AMPC_BLOCK];
    int64_t i, j;

    if (n <= 0) {
        return;
    }
    if (!ampc_dtype_is_float(dt)) {
        /* bool compares its 0/1 values, read as int64 */
        int64_t abuf[AMPC_BLOCK], bbuf[AMPC_BLOCK];
        int64_t av = ampc_load_i64(dt, a), bv = ampc_load_i64(dt, b);
        for (j = 0; j < first; j++) {
            abuf[j] = av;
            bbuf[j] = bv;
        }
        for (i = 0; i < n; i += AMPC_BLOCK) {
            int64_t m = ampc_block_len(n, i);
            const int64_t *pa = sa == 0 ? abuf : ampc_load_block_i64(
                dt, ampc_at(a, i, sa, es), sa, m, abuf);
            const int64_t *pb = sb == 0 ? bbuf : ampc_load_block_i64(
                dt, ampc_at(b, i, sb, es), sb, m, bbuf);
            uint8_t *po = so == 1 ? (uint8_t *)out + i : obuf;
            ampc_compare_i64(op, m, pa, pb, po);
            if (po == obuf) {
                ampc_scatter_u8(obuf, m, (char *)out + i * so, so);
            }
        }
        return;
    }

    float abuf[AMPC_BLOCK], bbuf[AMPC_BLOCK];
    uint16_t tmp[AMPC_BLOCK];
    float av = ampc_load_f32(dt, a), bv = ampc_load_f32(dt, b);
    for (j = 0; j < first; j++) {
        abuf[j] = av;
        bbuf[j] = bv;
    }
    for (i = 0; i < n; i += AMPC_BLOCK) {
        int64_t m = ampc_block_len(n, i);
        const float *pa = sa == 0 ? abuf : ampc_load_block_f32(
            cv, dt, ampc_at(a, i, sa, es), sa, m, abuf, tmp);
        const float *pb = sb == 0 ? bbuf : ampc_load_block_f32(
            cv, dt, ampc_at(b, i, sb, es), sb, m, bbuf, tmp);
        uint8_t *po = so == 1 ? (uint8_t *)out + i : obuf;
        ampc_compare_f32(op, m, pa, pb, po);
        if (po == obuf) {
            ampc_scatter_u8(obuf, m, (char *)out + i * so, so);
        }
    }
}

static AMPC_ALWAYS_INLINE void
ampc_unary_loop(const ampc_converters *cv, ampc_unary_op op, ampc_dtype dt,
                int64_t n, const void *a, int64_t sa, void *out, int64_t so)
{
    size_t es = ampc_dtype_size[dt];
    int64_t i, j;

    if (n <= 0) {
        return;
    }
    if (op == AMPC_UN_ISFINITE) {
        uint8_t *o = (uint8_t *)out;
        if (!ampc_dtype_is_float(dt)) {
            for (i = 0; i < n; i++) {
                o[i * so] = 1;
            }
            return;
        }
        float abuf[AMPC_BLOCK];
        uint16_t tmp[AMPC_BLOCK];
        for (i = 0; i < n; i += AMPC_BLOCK) {
            int64_t m = ampc_block_len(n, i);
            const float *pa = ampc_load_block_f32(
                cv, dt, ampc_at(a, i, sa, es), sa, m, abuf, tmp);
            for (j = 0; j < m; j++) {
                o[(i + j) * so] = (uint8_t)ampc_f32_isfinite(pa[j]);
            }
        }
        return;
    }
    if (dt == AMPC_INT64) {
        int64_t abuf[AMPC_BLOCK], obuf[AMPC_BLOCK];
        for (i = 0; i < n; i += AMPC_BLOCK) {
            int64_t m = ampc_block_len(n, i);
            const int64_t *pa = ampc_load_block_i64(
                dt, ampc_at(a, i, sa, es), sa, m, abuf);
            int64_t *po = so == 1 ? (int64_t *)out + i : obuf;
            ampc_unary_i64(op, m, pa, po);
            if (po == obuf) {
                ampc_scatter_i64(obuf, m, (char *)ampc_at(out, i, so, es),
                                 so);
            }
        }
        return;
    }
    if (dt == AMPC_BOOL) {
        /* only ISFINITE is defined on bool; the rest keep the value */
        for (i = 0; i < n; i++) {
            ((uint8_t *)out)[i * so] = ((const uint8_t *)a)[i * sa] != 0;
        }
        return;
    }

    float abuf[AMPC_BLOCK], obuf[AMPC_BLOCK];
    uint16_t tmp[AMPC_BLOCK];
    for (i = 0; i < n; i += AMPC_BLOCK) {
        int64_t m = ampc_block_len(n, i);
        const float *pa = ampc_load_block_f32(
            cv, dt, ampc_at(a, i, sa, es), sa, m, abuf, tmp);
        float *po = (dt == AMPC_FLOAT32 && so == 1) ? (float *)out + i : obuf;
        ampc_unary_f32(op, m, pa, po);
        if (po == obuf) {
            ampc_store_block_f32(cv, dt, obuf, m,
                                 (char *)ampc_at(out, i, so, es), so, tmp);
        }
    }
}

/* Same dtype: the bits are copied (so a float16 NaN keeps its payload);
 * bool is rewritten as 0/1. */
static AMPC_ALWAYS_INLINE void
ampc_copy_loop(int64_t n, ampc_dtype dt, const void *src, int64_t ss,
               void *dst, int64_t ds)
{
    size_t es = ampc_dtype_size[dt];
    int64_t i;
    if (dt == AMPC_BOOL) {
        for (i = 0; i < n; i++) {
            ((uint8_t *)dst)[i * ds] = ((const uint8_t *)src)[i * ss] != 0;
        }
        return;
    }
    if (ss == 1 && ds == 1) {
        memmove(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 8:
        for (i = 0; i < n; i++) {
            ((uint64_t *)dst)[i * ds] = ((const uint64_t *)src)[i * ss];
        }
        break;
    case 4:
        for (i = 0; i < n; i++) {
            ((uint32_t *)dst)[i * ds] = ((const uint32_t *)src)[i * ss];
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            ((uint16_t *)dst)[i * ds] = ((const uint16_t *)src)[i * ss];
        }
        break;
    }
}

/* Every pair of dtypes.  int64 <-> bool stay integer; every other pair goes
 * through float32, which holds every float16/bfloat16 value exactly, so
 * int64 -> float16 rounds via float32 as specified. */
static AMPC_ALWAYS_INLINE void
ampc_cast_loop(const ampc_converters *cv, int64_t n, ampc_dtype sdt,
               const void *src, int64_t ss, ampc_dtype ddt, void *dst,
               int64_t ds)
{
    size_t ses = ampc_dtype_size[sdt], des = ampc_dtype_size[ddt];
    int64_t i;

    if (n <= 0) {
        return;
    }
    if (sdt == ddt) {
        ampc_copy_loop(n, sdt, src, ss, dst, ds);
        return;
    }
    if (!ampc_dtype_is_float(sdt) && !ampc_dtype_is_float(ddt)) {
        for (i = 0; i < n; i++) {
            const void *p = ampc_at(src, i, ss, ses);
            int nz = sdt == AMPC_INT64 ? *(const int64_t *)p != 0
                                       : *(const uint8_t *)p != 0;
            if (ddt == AMPC_INT64) {
                ((int64_t *)dst)[i * ds] = nz;
            }
            else {
                ((uint8_t *)dst)[i * ds] = (uint8_t)nz;
            }
        }
        return;
    }

    float buf[AMPC_BLOCK];
    uint16_t tmp[AMPC_BLOCK];
    for (i = 0; i < n; i += AMPC_BLOCK) {
        int64_t m = ampc_block_len(n, i);
        /* widen straight into a contiguous float32 destination */
        float *fb = (ddt == AMPC_FLOAT32 && ds == 1) ? (float *)dst + i : buf;
        const float *f = ampc_load_block_f32(
            cv, sdt, ampc_at(src, i, ss, ses), ss, m, fb, tmp);
        ampc_store_block_f32(cv, ddt, f, m, (char *)ampc_at(dst, i, ds, des),
                             ds, tmp);
    }
}

#endif /* AMPC_CPU_LOOPS_H */
