/* depthwise.h - conv2d's direct path for depthwise convolutions (one input
 * channel per group, C/G = 1), whose GEMMs would be a single row deep and
 * run at a few GFLOP/s: portable loops over one float32 plane, inlined into
 * each level's target-tagged functions (cpu/<level>/gemm.c) so that they
 * vectorise for its ISA; cpu/ref/conv2d_depthwise.c drives them.
 *
 * Each product and each sum is rounded on its own, in an order fixed by
 * the code (taps in (kh, kw) order, fixed lanes; the build never contracts
 * to FMA), so every level gives the same bits.
 *
 * Planes: xp (Hp, Wp) = (H + 2ph, W + 2pw), one channel inside its zero
 * padding, followed by ampc_dw_slack(s) more zeros; dy (OH, OW); the taps
 * wk (KH*KW) of one filter, in (kh, kw) order.
 */
#ifndef AMPC_CPU_DEPTHWISE_H
#define AMPC_CPU_DEPTHWISE_H

#include <stdint.h>

#include "cpu/cpu.h"
#include "kernels.h"

/* The row stride of ampc_dw_fwd_loop's output.  At stride 1 every output
 * row is computed Wp wide (its last Wp - OW values are not outputs), which
 * makes each tap one run over the whole plane instead of OH short rows:
 * 5-7x faster on the 16- and 32-wide rows of small images. */
static inline int64_t
ampc_dw_row_stride(const ampc_conv2d_shape *s)
{
    return s->sh == 1 && s->sw == 1 ? s->w + 2 * s->pw : s->ow;
}

/* The zeros after xp that a tap's run over the whole plane reads. */
static inline int64_t
ampc_dw_slack(const ampc_conv2d_shape *s)
{
    return (s->kw - 1) * s->dw;
}

/* out (OH, ampc_dw_row_stride(s)) = the sum over the taps t of wk[t] times
 * the pixels tap t reads. */
static AMPC_ALWAYS_INLINE void
ampc_dw_fwd_loop(const ampc_conv2d_shape *s, const float *restrict xp,
                 const float *restrict wk, float *restrict out)
{
    const int64_t wp = s->w + 2 * s->pw, ldo = ampc_dw_row_stride(s);
    const int wide = s->sh == 1 && s->sw == 1;
    const int64_t runs = wide ? 1 : s->oh, len = wide ? s->oh * ldo : s->ow;
    const int64_t sw = s->sw, size = s->oh * ldo;
    for (int64_t i = 0; i < size; i++) {
        out[i] = 0.0f;
    }
    for (int64_t kh = 0; kh < s->kh; kh++) {
        for (int64_t kw = 0; kw < s->kw; kw++) {
            const float wv = wk[kh * s->kw + kw];
            for (int64_t r = 0; r < runs; r++) {
                const float *restrict x =
                    xp + (r * s->sh + kh * s->dh) * wp + kw * s->dw;
                float *restrict o = out + r * ldo;
                if (sw == 1) {
                    for (int64_t j = 0; j < len; j++) {
                        o[j] += wv * x[j];
                    }
                }
                else {
                    for (int64_t j = 0; j < len; j++) {
                        o[j] += wv * x[j * sw];
                    }
                }
            }
        }
    }
}

/* dxp (Hp, Wp) += wk[t] * dy[oh][ow] at the pixel that tap t read for
 * output (oh, ow), for every tap and output: only real connections, so a
 * non-finite weight reaches only the pixels it touched. */
static AMPC_ALWAYS_INLINE void
ampc_dw_bwd_input_loop(const ampc_conv2d_shape *s, const float *restrict dy,
                       const float *restrict wk, float *restrict dxp)
{
    const int64_t wp = s->w + 2 * s->pw, ow = s->ow, sw = s->sw;
    for (int64_t kh = 0; kh < s->kh; kh++) {
        for (int64_t kw = 0; kw < s->kw; kw++) {
            const float wv = wk[kh * s->kw + kw];
            for (int64_t oh = 0; oh < s->oh; oh++) {
                float *restrict d =
                    dxp + (oh * s->sh + kh * s->dh) * wp + kw * s->dw;
                const float *restrict g = dy + oh * ow;
                if (sw == 1) {
                    for (int64_t j = 0; j < ow; j++) {
                        d[j] += wv * g[j];
                    }
                }
                else {
                    for (int64_t j = 0; j < ow; j++) {
                        d[j * sw] += wv * g[j];
                    }
                }
            }
        }
    }
}

/* gw[t] += the sum over outputs (oh, ow) of dy[oh][ow] times the pixel tap
 * t read for it, summed in 16 lanes per tap (lanes: KH*KW*16 floats of
 * scratch) and folded pairwise at the end.  Rows outside, taps inside: each
 * row of dy is read once for every tap, and the taps' lanes are
 * independent sums, so no add waits on the one before it. */
static AMPC_ALWAYS_INLINE void
ampc_dw_bwd_weight_loop(const ampc_conv2d_shape *s, const float *restrict dy,
                        const float *restrict xp, float *restrict lanes,
                        float *restrict gw)
{
    const int64_t wp = s->w + 2 * s->pw, ow = s->ow, sw = s->sw;
    const int64_t taps = s->kh * s->kw;
    for (int64_t i = 0; i < taps * 16; i++) {
        lanes[i] = 0.0f;
    }
    for (int64_t oh = 0; oh < s->oh; oh++) {
        const float *restrict g = dy + oh * ow;
        float *restrict a = lanes;
        for (int64_t kh = 0; kh < s->kh; kh++) {
            const float *xr = xp + (oh * s->sh + kh * s->dh) * wp;
            for (int64_t kw = 0; kw < s->kw; kw++, a += 16) {
                const float *restrict x = xr + kw * s->dw;
                int64_t j = 0;
                if (sw == 1) {
                    for (; j + 16 <= ow; j += 16) {
                        for (int l = 0; l < 16; l++) {
                            a[l] += g[j + l] * x[j + l];
                        }
                    }
                }
                else {
                    for (; j + 16 <= ow; j += 16) {
                        for (int l = 0; l < 16; l++) {
                            a[l] += g[j + l] * x[(j + l) * sw];
                        }
                    }
                }
                for (int l = 0; j < ow; j++, l++) {
                    a[l] += g[j] * x[j * sw];
                }
            }
        }
    }
    for (int64_t t = 0; t < taps; t++) {
        float *a = lanes + t * 16;
        for (int half = 8; half > 0; half /= 2) {
            for (int l = 0; l < half; l++) {
                a[l] += a[l + half];
            }
        }
        gw[t] += a[0];
    }
}

#endif /* AMPC_CPU_DEPTHWISE_H */
