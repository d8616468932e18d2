/* blocks.h - an operand's run of n elements as a block in a compute type
 * (float32, int64 or bool bytes) and back: the loads and stores that every
 * CPU loop (cpu/loops.h, nn_loops.h, ...) builds on, with the level's
 * float16/bfloat16 converters.
 */
#ifndef AMPC_CPU_BLOCKS_H
#define AMPC_CPU_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "elementwise_math.h"
#include "kernels.h"

#define AMPC_BLOCK 512              /* elements per element-wise block */

// ----------------------------------------------------------------------------
// blocks: one operand's run of n elements in a compute type (buffers hold n)

/* As float32: a pointer straight into a contiguous float32 operand, else
 * `buf` filled (strided 16-bit runs are gathered into `tmp` first). */
static AMPC_ALWAYS_INLINE const float *
ampc_load_block_f32(const ampc_converters *cv, ampc_dtype dt, const void *p,
                    int64_t s, int64_t n, float *buf, uint16_t *tmp)
{
    int64_t i;
    switch (dt) {
    case AMPC_FLOAT32:
        if (s == 1) {
            return (const float *)p;
        }
        for (i = 0; i < n; i++) {
            buf[i] = ((const float *)p)[i * s];
        }
        return buf;
    case AMPC_FLOAT16:
    case AMPC_BFLOAT16: {
        const uint16_t *h = (const uint16_t *)p;
        if (s != 1) {
            for (i = 0; i < n; i++) {
                tmp[i] = h[i * s];
            }
            h = tmp;
        }
        if (dt == AMPC_FLOAT16) {
            cv->f16_to_f32(n, h, buf);
        }
        else {
            cv->bf16_to_f32(n, h, buf);
        }
        return buf;
    }
    case AMPC_INT64:
        for (i = 0; i < n; i++) {
            buf[i] = (float)((const int64_t *)p)[i * s];
        }
        return buf;
    default:
        for (i = 0; i < n; i++) {
            buf[i] = ((const uint8_t *)p)[i * s] != 0;
        }
        return buf;
    }
}

/* Narrows float32 f[0:n] into dt at p (stride s), rounding once. */
static AMPC_ALWAYS_INLINE void
ampc_store_block_f32(const ampc_converters *cv, ampc_dtype dt,
                     const float *f, int64_t n, void *p, int64_t s,
                     uint16_t *tmp)
{
    int64_t i;
    switch (dt) {
    case AMPC_FLOAT32:
        if (s == 1) {
            if ((float *)p != f) {
                memmove(p, f, (size_t)n * sizeof(float));
            }
            return;
        }
        for (i = 0; i < n; i++) {
            ((float *)p)[i * s] = f[i];
        }
        return;
    case AMPC_FLOAT16:
    case AMPC_BFLOAT16: {
        uint16_t *h = s == 1 ? (uint16_t *)p : tmp;
        if (dt == AMPC_FLOAT16) {
            cv->f32_to_f16(n, f, h);
        }
        else {
            cv->f32_to_bf16(n, f, h);
        }
        if (s != 1) {
            for (i = 0; i < n; i++) {
                ((uint16_t *)p)[i * s] = tmp[i];
            }
        }
        return;
    }
    case AMPC_INT64:
        for (i = 0; i < n; i++) {
            ((int64_t *)p)[i * s] = ampc_f32_to_i64(f[i]);
        }
        return;
    default:
        for (i = 0; i < n; i++) {
            ((uint8_t *)p)[i * s] = f[i] != 0.0f;
        }
        return;
    }
}

/* As int64 (bool reads as 0/1): in place when contiguous int64. */
static AMPC_ALWAYS_INLINE const int64_t *
ampc_load_block_i64(ampc_dtype dt, const void *p, int64_t s, int64_t n,
                    int64_t *buf)
{
    int64_t i;
    if (dt == AMPC_INT64) {
        if (s == 1) {
            return (const int64_t *)p;
        }
        for (i = 0; i < n; i++) {
            buf[i] = ((const int64_t *)p)[i * s];
        }
        return buf;
    }
    for (i = 0; i < n; i++) {
        buf[i] = ((const uint8_t *)p)[i * s] != 0;
    }
    return buf;
}

/* Raw bool bytes (any nonzero byte is true): in place when contiguous. */
static AMPC_ALWAYS_INLINE const uint8_t *
ampc_load_block_u8(const void *p, int64_t s, int64_t n, uint8_t *buf)
{
    if (s == 1) {
        return (const uint8_t *)p;
    }
    for (int64_t i = 0; i < n; i++) {
        buf[i] = ((const uint8_t *)p)[i * s];
    }
    return buf;
}

/* Copies a computed block to a strided output (contiguous outputs are
 * computed in place and need no copy). */
static AMPC_ALWAYS_INLINE void
ampc_scatter_i64(const int64_t *src, int64_t n, void *p, int64_t s)
{
    for (int64_t i = 0; i < n; i++) {
        ((int64_t *)p)[i * s] = src[i];
    }
}

static AMPC_ALWAYS_INLINE void
ampc_scatter_u8(const uint8_t *src, int64_t n, void *p, int64_t s)
{
    for (int64_t i = 0; i < n; i++) {
        ((uint8_t *)p)[i * s] = src[i];
    }
}

static inline int64_t
ampc_block_len(int64_t n, int64_t i)
{
    return n - i < AMPC_BLOCK ? n - i : AMPC_BLOCK;
}

#endif /* AMPC_CPU_BLOCKS_H */
