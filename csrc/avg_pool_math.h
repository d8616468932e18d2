/* avg_pool_math.h - the window rules of avg_pool2d and adaptive_avg_pool2d,
 * shared by the CPU loops (cpu/avg_pool_loops.h) and the CUDA kernels
 * (cuda/avg_pool.cu), so the CPU tests cover the exact code the GPU runs.
 *
 * Along one axis, output o averages input [lo, hi); the divisor of output
 * (i, j) is the product of one factor per axis (kernels.h
 * ampc_avg_pool2d_shape), so both passes factor by axis.  The backward
 * needs the inverse: the outputs [first, last] whose windows hold input r.
 */
#ifndef AMPC_AVG_POOL_MATH_H
#define AMPC_AVG_POOL_MATH_H

#include <stdint.h>

#include "amp_math.h"
#include "kernels.h"

/* One axis of the pooling: input size n, output size on; kernel k, stride
 * s, padding p (unused when adaptive). */
typedef struct {
    int64_t n, on, k, s, p;
} ampc_avg_axis;

AMPC_HOST_DEVICE ampc_avg_axis
ampc_avg_axis_h(const ampc_avg_pool2d_shape *sh)
{
    ampc_avg_axis a = {sh->h, sh->oh, sh->kh, sh->sh, sh->ph};
    return a;
}

AMPC_HOST_DEVICE ampc_avg_axis
ampc_avg_axis_w(const ampc_avg_pool2d_shape *sh)
{
    ampc_avg_axis a = {sh->w, sh->ow, sh->kw, sh->sw, sh->pw};
    return a;
}

AMPC_HOST_DEVICE int64_t
ampc_avg_min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

AMPC_HOST_DEVICE int64_t
ampc_avg_max(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Output o's window [*lo, *hi) of the input, and its divisor factor:
 * adaptive, torch's start floor(o n / on) and end ceil((o + 1) n / on),
 * factor hi - lo; else start o s - p, end min(start + k, n + p), the factor
 * end - start (padding counted) or, without count_include_pad, the
 * clamped size. */
AMPC_HOST_DEVICE int64_t
ampc_avg_window(const ampc_avg_axis *a, int adaptive, int count_include_pad,
                int64_t o, int64_t *lo, int64_t *hi)
{
    if (adaptive) {
        *lo = o * a->n / a->on;
        *hi = ((o + 1) * a->n + a->on - 1) / a->on;
        return *hi - *lo;
    }
    int64_t start = o * a->s - a->p;
    int64_t end = ampc_avg_min(start + a->k, a->n + a->p);
    int64_t padded = end - start;
    *lo = ampc_avg_max(start, 0);
    *hi = ampc_avg_min(end, a->n);
    return count_include_pad ? padded : *hi - *lo;
}

/* The outputs [*first, *last] whose windows hold input r (none when
 * *first > *last): adaptive, floor(r on / n) to floor(((r + 1) on - 1) /
 * n); else those with o s - p <= r < o s - p + k. */
AMPC_HOST_DEVICE void
ampc_avg_cover(const ampc_avg_axis *a, int adaptive, int64_t r,
               int64_t *first, int64_t *last)
{
    if (adaptive) {
        *first = r * a->on / a->n;
        *last = ((r + 1) * a->on - 1) / a->n;
    }
    else {
        int64_t top = r + a->p;             /* o s <= top */
        int64_t bottom = top - a->k + 1;    /* o s >= bottom */
        *first = bottom <= 0 ? 0 : (bottom + a->s - 1) / a->s;
        *last = top / a->s;
    }
    *last = ampc_avg_min(*last, a->on - 1);
}

/* The divisor of an output whose axes' factors are fh and fw. */
AMPC_HOST_DEVICE float
ampc_avg_divisor(const ampc_avg_pool2d_shape *s, int64_t fh, int64_t fw)
{
    return (float)(s->divisor_override != 0 ? s->divisor_override
                                            : fh * fw);
}

#endif /* AMPC_AVG_POOL_MATH_H */
