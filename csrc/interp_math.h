/* interp_math.h - the taps of interpolate's separable modes (interp.h):
 * which inputs each output reads along an axis and with which weights,
 * shared by the CPU loops (cpu/interp_loops.h) and the CUDA kernels
 * (cuda/interp.cu), so the CPU tests cover the exact code the GPU runs.
 *
 * The formulas are PyTorch's CPU kernels' (aten/src/ATen/native/UpSample.h
 * and cpu/UpSampleKernel.cpp) evaluated as they are, in float32 with the
 * same double steps: the source index (area_pixel_compute_source_index),
 * the linear lambdas (guard_index_and_lambda), the cubic convolution
 * coefficients with A = -0.75, and the antialias filters (the triangle,
 * and the cubic with A = -0.5) over torch's support, normalised.  A tap
 * clamped at a border (bicubic) is folded onto the edge pixel, so every
 * output reads consecutive inputs [first, first + count) and the inputs an
 * output reads move forward with it: first and first + count never
 * decrease with o, which the backward's gather (ampc_interp_cover) needs.
 *
 * NOTE: products that feed a sum go through nn_math.h's AMPC_MUL / AMPC_ADD
 * / AMPC_SUB, which nvcc never contracts into an FMA (gcc in -std=c11 does
 * not either), so both sides round every operation alike.
 */
#ifndef AMPC_INTERP_MATH_H
#define AMPC_INTERP_MATH_H

#include <math.h>
#include <stdint.h>

#include "kernels.h"
#include "nn_math.h"

#define AMPC_INTERP_CUBIC_A (-0.75f)        /* torch's bicubic */
#define AMPC_INTERP_AA_CUBIC_A (-0.5f)      /* torch's antialiased bicubic */

// ----------------------------------------------------------------------------
// the axis

/* torch's area_pixel_compute_scale<float>: align_corners (n - 1) / (on -
 * 1) (0 for one output), else 1 / scale_factor when one is used (> 0),
 * else n / on. */
AMPC_HOST_DEVICE float
ampc_interp_scale(int64_t n, int64_t on, int align_corners,
                  double scale_factor)
{
    if (align_corners) {
        return on > 1 ? (float)(n - 1) / (float)(on - 1) : 0.0f;
    }
    if (scale_factor > 0.0) {
        return (float)(1.0 / scale_factor);
    }
    return (float)n / (float)on;
}

AMPC_HOST_DEVICE int
ampc_interp_is_aa(ampc_interp_kind kind)
{
    return kind == AMPC_INTERP_AA_LINEAR || kind == AMPC_INTERP_AA_CUBIC;
}

/* The antialias filter's half-width in input pixels: torch's support,
 * interp_size / 2 widened by the scale when downsampling. */
AMPC_HOST_DEVICE float
ampc_interp_support(const ampc_interp_axis *a, ampc_interp_kind kind)
{
    float half = kind == AMPC_INTERP_AA_CUBIC ? 2.0f : 1.0f;
    return a->scale >= 1.0f ? AMPC_MUL(half, a->scale) : half;
}

/* The most inputs an output of axis a reads (a->copy unset). */
AMPC_HOST_DEVICE int
ampc_interp_max_taps(const ampc_interp_axis *a, ampc_interp_kind kind)
{
    if (kind == AMPC_INTERP_LINEAR) {
        return 2;
    }
    if (kind == AMPC_INTERP_CUBIC) {
        return 4;
    }
    return (int)ceilf(ampc_interp_support(a, kind)) * 2 + 1;
}

// ----------------------------------------------------------------------------
// filters

/* The cubic convolution kernel on |x| <= 1 and on 1 < |x| < 2 */
AMPC_HOST_DEVICE float
ampc_cubic_near(float x, float a)
{
    float p = AMPC_SUB(AMPC_MUL(a + 2.0f, x), a + 3.0f);
    return AMPC_ADD(AMPC_MUL(AMPC_MUL(p, x), x), 1.0f);
}

AMPC_HOST_DEVICE float
ampc_cubic_far(float x, float a)
{
    float p = AMPC_ADD(AMPC_MUL(AMPC_SUB(AMPC_MUL(a, x), 5.0f * a), x),
                       8.0f * a);
    return AMPC_SUB(AMPC_MUL(p, x), 4.0f * a);
}

/* The antialias filters at distance x (in output pixels) */
AMPC_HOST_DEVICE float
ampc_interp_aa_filter(ampc_interp_kind kind, float x)
{
    x = fabsf(x);
    if (kind == AMPC_INTERP_AA_LINEAR) {
        return x < 1.0f ? 1.0f - x : 0.0f;
    }
    if (x < 1.0f) {
        return ampc_cubic_near(x, AMPC_INTERP_AA_CUBIC_A);
    }
    return x < 2.0f ? ampc_cubic_far(x, AMPC_INTERP_AA_CUBIC_A) : 0.0f;
}

// ----------------------------------------------------------------------------
// the taps of one output

AMPC_HOST_DEVICE int64_t
ampc_interp_clamp(int64_t i, int64_t n)
{
    return i < 0 ? 0 : (i > n - 1 ? n - 1 : i);
}

/* torch's area_pixel_compute_source_index<float> (cubic: not clamped at
 * 0), then guard_index_and_lambda: the source index floor, at most n - 1,
 * and the fraction past it clamped to [0, 1]. */
AMPC_HOST_DEVICE int64_t
ampc_interp_source(const ampc_interp_axis *a, int64_t o, int cubic,
                   float *lambda)
{
    float real;
    if (a->align_corners) {
        real = AMPC_MUL(a->scale, (float)o);
    }
    else {
        real = AMPC_SUB(AMPC_MUL(a->scale, (float)o + 0.5f), 0.5f);
        if (!cubic && real < 0.0f) {
            real = 0.0f;
        }
    }
    int64_t i0 = (int64_t)floorf(real);
    i0 = i0 < a->n - 1 ? i0 : a->n - 1;
    float t = real - (float)i0;
    *lambda = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
    return i0;
}

AMPC_HOST_DEVICE int
ampc_interp_linear_span(const ampc_interp_axis *a, int64_t o,
                        int64_t *first, float *w)
{
    float lam;
    int64_t i0 = ampc_interp_source(a, o, 0, &lam);
    *first = i0;
    if (i0 < a->n - 1) {
        w[0] = 1.0f - lam;
        w[1] = lam;
        return 2;
    }
    w[0] = AMPC_ADD(1.0f - lam, lam);   /* both taps on the last pixel */
    return 1;
}

AMPC_HOST_DEVICE int
ampc_interp_cubic_span(const ampc_interp_axis *a, int64_t o, int64_t *first,
                       float *w)
{
    float t;
    int64_t i0 = ampc_interp_source(a, o, 1, &t);
    float x2 = 1.0f - t;
    float c[4] = {ampc_cubic_far(t + 1.0f, AMPC_INTERP_CUBIC_A),
                  ampc_cubic_near(t, AMPC_INTERP_CUBIC_A),
                  ampc_cubic_near(x2, AMPC_INTERP_CUBIC_A),
                  ampc_cubic_far(x2 + 1.0f, AMPC_INTERP_CUBIC_A)};
    int64_t lo = ampc_interp_clamp(i0 - 1, a->n);
    int count = (int)(ampc_interp_clamp(i0 + 2, a->n) - lo + 1);
    for (int j = 0; j < count; j++) {
        w[j] = 0.0f;
    }
    for (int k = 0; k < 4; k++) {
        int j = (int)(ampc_interp_clamp(i0 - 1 + k, a->n) - lo);
        w[j] = AMPC_ADD(w[j], c[k]);
    }
    *first = lo;
    return count;
}

/* torch's _compute_weights_aa (align_corners changes only the scale): the
 * filter centred on scale * (o + 0.5) over [center - support, center +
 * support], each weight divided by their sum. */
AMPC_HOST_DEVICE int
ampc_interp_aa_span(const ampc_interp_axis *a, ampc_interp_kind kind,
                    int64_t o, int64_t *first, float *w)
{
    float support = ampc_interp_support(a, kind);
    float center = (float)((double)a->scale * ((double)o + 0.5));
    float invscale = a->scale >= 1.0f ? (float)(1.0 / (double)a->scale)
                                      : 1.0f;
    int64_t lo = (int64_t)((double)(center - support) + 0.5);
    int64_t hi = (int64_t)((double)(center + support) + 0.5);
    lo = lo > 0 ? lo : 0;
    hi = hi < a->n ? hi : a->n;
    int64_t count = hi - lo;
    count = count < 0 ? 0 : (count > a->taps ? a->taps : count);
    float total = 0.0f;
    for (int64_t j = 0; j < count; j++) {
        float d = (float)(j + lo) - center;
        w[j] = ampc_interp_aa_filter(
            kind, (float)(((double)d + 0.5) * (double)invscale));
        total += w[j];
    }
    if (total != 0.0f) {
        for (int64_t j = 0; j < count; j++) {
            w[j] = w[j] / total;
        }
    }
    *first = lo;
    return (int)count;
}

/* Output o of axis a reads inputs [*first, *first + count) with weights
 * w[0:count] (room for a->taps); returns count. */
AMPC_HOST_DEVICE int
ampc_interp_span(const ampc_interp_axis *a, ampc_interp_kind kind, int64_t o,
                 int64_t *first, float *w)
{
    if (a->copy) {
        *first = o;
        w[0] = 1.0f;
        return 1;
    }
    if (kind == AMPC_INTERP_LINEAR) {
        return ampc_interp_linear_span(a, o, first, w);
    }
    if (kind == AMPC_INTERP_CUBIC) {
        return ampc_interp_cubic_span(a, o, first, w);
    }
    return ampc_interp_aa_span(a, kind, o, first, w);
}

// ----------------------------------------------------------------------------
// tables: every output's taps of one axis

/* Where axis a's table lives in a block of per-axis tables: first (on
 * int64s), count (on int64s), then on * taps weights (zero past count). */
typedef struct {
    int64_t *first, *count;
    float *w;
} ampc_interp_table;

/* Row o of axis a's table. */
AMPC_HOST_DEVICE void
ampc_interp_table_row(const ampc_interp_axis *a, ampc_interp_kind kind,
                      int64_t o, const ampc_interp_table *t)
{
    float *w = t->w + o * a->taps;
    int c = ampc_interp_span(a, kind, o, &t->first[o], w);
    t->count[o] = c;
    for (int j = c; j < a->taps; j++) {
        w[j] = 0.0f;
    }
}

/* The outputs [*lo, *hi] that read input i (none when *lo > *hi): those
 * with first <= i < first + count, found by bisection (both bounds are
 * nondecreasing in the output). */
AMPC_HOST_DEVICE void
ampc_interp_cover(const ampc_interp_table *t, int64_t on, int64_t i,
                  int64_t *lo, int64_t *hi)
{
    int64_t a = 0, b = on;          /* the first o with first + count > i */
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (t->first[m] + t->count[m] > i) {
            b = m;
        }
        else {
            a = m + 1;
        }
    }
    *lo = a;
    a = 0;
    b = on;                         /* the first o with first > i */
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (t->first[m] > i) {
            b = m;
        }
        else {
            a = m + 1;
        }
    }
    *hi = a - 1;
}

#endif /* AMPC_INTERP_MATH_H */
