/* lerp_loops.h - the loop of torch.lerp (start, end and a weight tensor or
 * number, strided or broadcast), written once in portable C and compiled
 * per level as cpu/loops.h explains: blocks of AMPC_BLOCK elements widened
 * to float32 (used in place when contiguous float32), the float32 rule of
 * elementwise_math.h ampc_lerp_f32, one rounding at store.
 */
#ifndef AMPC_CPU_LERP_LOOPS_H
#define AMPC_CPU_LERP_LOOPS_H

#include <math.h>
#include <stdint.h>

#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// compute loops on contiguous blocks (the part that vectorises)

/* NOTE: in place (o == s, lerp_) the loop reads o itself: gcc's run-time
 * overlap test of o against s fails when they are equal, and the loop
 * would then run unvectorised. */
static AMPC_ALWAYS_INLINE void
ampc_lerp_f32_block(int64_t n, const float *s, const float *e,
                    const float *w, float *o)
{
    int64_t i;
    if (s == o) {
        for (i = 0; i < n; i++) {
            o[i] = ampc_lerp_f32(o[i], e[i], w[i]);
        }
        return;
    }
    for (i = 0; i < n; i++) {
        o[i] = ampc_lerp_f32(s[i], e[i], w[i]);
    }
}

/* One weight for the block: its side of the rule is chosen once (the
 * same values as ampc_lerp_f32). */
static AMPC_ALWAYS_INLINE void
ampc_lerp_scalar_block(int64_t n, const float *s, const float *e, float w,
                       float *o)
{
    float wc = 1.0f - w;
    int64_t i;
    if (fabsf(w) < 0.5f) {
        for (i = 0; i < n; i++) {
            o[i] = ampc_adam_lerp(s[i], e[i], w, wc, 1);
        }
    }
    else {
        for (i = 0; i < n; i++) {
            o[i] = ampc_adam_lerp(s[i], e[i], w, wc, 0);
        }
    }
}

// ----------------------------------------------------------------------------
// the kernel body (kernels.h ampc_lerp_fn)
//
// Called from inside the iterator's OpenMP region, so no OpenMP here.  An
// input of stride 0 is read once and spread over its whole buffer.

static AMPC_ALWAYS_INLINE void
ampc_lerp_loop(const ampc_converters *cv, ampc_dtype dt, int64_t n,
               const void *s, int64_t ss, const void *e, int64_t se,
               const void *w, int64_t sw, float scalar, void *out,
               int64_t so)
{
    size_t es = ampc_dtype_size[dt];
    float sbuf[AMPC_BLOCK], ebuf[AMPC_BLOCK], wbuf[AMPC_BLOCK];
    float obuf[AMPC_BLOCK];
    uint16_t tmp[AMPC_BLOCK];
    int64_t first = n < AMPC_BLOCK ? n : AMPC_BLOCK;
    int64_t i, j;
    if (n <= 0) {
        return;
    }
    if (ss == 0) {
        float v = ampc_load_f32(dt, s);
        for (j = 0; j < first; j++) {
            sbuf[j] = v;
        }
    }
    if (se == 0) {
        float v = ampc_load_f32(dt, e);
        for (j = 0; j < first; j++) {
            ebuf[j] = v;
        }
    }
    if (w != NULL && sw == 0) {
        float v = ampc_load_f32(dt, w);
        for (j = 0; j < first; j++) {
            wbuf[j] = v;
        }
    }
    for (i = 0; i < n; i += AMPC_BLOCK) {
        int64_t m = ampc_block_len(n, i);
        const float *ps = ss == 0 ? sbuf : ampc_load_block_f32(
            cv, dt, ampc_at(s, i, ss, es), ss, m, sbuf, tmp);
        const float *pe = se == 0 ? ebuf : ampc_load_block_f32(
            cv, dt, ampc_at(e, i, se, es), se, m, ebuf, tmp);
        float *po = (dt == AMPC_FLOAT32 && so == 1) ? (float *)out + i : obuf;
        if (w == NULL) {
            ampc_lerp_scalar_block(m, ps, pe, scalar, po);
        }
        else {
            const float *pw = sw == 0 ? wbuf : ampc_load_block_f32(
                cv, dt, ampc_at(w, i, sw, es), sw, m, wbuf, tmp);
            ampc_lerp_f32_block(m, ps, pe, pw, po);
        }
        if (po == obuf) {
            ampc_store_block_f32(cv, dt, obuf, m,
                                 (char *)ampc_at(out, i, so, es), so, tmp);
        }
    }
}

#endif /* AMPC_CPU_LERP_LOOPS_H */
