/* amp.c - the AMP kernels in portable C: the multi-tensor unscale-and-check
 * (PyTorch's _amp_foreach_non_finite_check_and_unscale_, plus per-tensor
 * inf/NaN/zero/subnormal counts), the scale update, and the per-tensor
 * gradient-norm accumulators of clip_grad_norm_.  Also the OpenMP split
 * that every level shares: the levels only bring the per-run parts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif /* _OPENMP */

#include "amp_math.h"
#include "amp_reduce.h"
#include "cpu/cpu.h"

/* Fewer elements than this: one thread (a parallel region costs a few
 * microseconds, about what one core needs for 64K float32 elements). */
#define AMP_PARALLEL_MIN 65536
/* Thread boundaries fall on multiples of this many elements, so that no two
 * threads write the same cache line of a float32 tensor. */
#define AMP_ALIGN 64
/* The norm sums fixed pieces of this many elements and folds them in order,
 * so that the result does not depend on the thread count. */
#define AMP_NORM_PIECE 32768

// ----------------------------------------------------------------------------
// one element's telemetry

/* in_abs / out_abs: the input and output bit patterns with the sign cleared,
 * in a format whose infinity is `inf` and smallest normal `min_normal`. */
static inline void
count_one(ampc_amp_counts *c, uint32_t in_abs, uint32_t out_abs,
          uint32_t inf, uint32_t min_normal)
{
    /* amp_reduce.h's rule, which the CUDA kernel runs too */
    ampc_amp_count_one(c, in_abs, out_abs, inf, min_normal);
}

// ----------------------------------------------------------------------------
// CPU reference: the per-run parts (also the SIMD levels' tails)

/* x (n) of dt, in place.  Each element is read once and, unless inv_scale
 * is 1, written once. */
int
ampc_amp_unscale_scalar(ampc_dtype dt, void *x, int64_t n, float inv_scale,
                        ampc_amp_counts *c)
{
    int nonfinite = 0;
    int write = inv_scale != 1.0f;
    int64_t i;

    if (dt == AMPC_FLOAT32) {
        float *p = (float *)x;
        for (i = 0; i < n; i++) {
            float v = p[i];
            float o = ampc_amp_unscale_one(v, inv_scale, &nonfinite);
            if (write) {
                p[i] = o;
            }
            if (c != NULL) {
                count_one(c, ampc_f32_bits(v) & 0x7fffffffu,
                          ampc_f32_bits(o) & 0x7fffffffu, 0x7f800000u,
                          0x00800000u);
            }
        }
        return nonfinite;
    }

    /* 16-bit formats: widen, multiply in float, round once (RNE) */
    uint16_t *h = (uint16_t *)x;
    int is_f16 = dt == AMPC_FLOAT16;
    uint32_t inf = is_f16 ? 0x7c00u : 0x7f80u;
    uint32_t min_normal = is_f16 ? 0x0400u : 0x0080u;
    for (i = 0; i < n; i++) {
        uint16_t v = h[i];
        float f = is_f16 ? ampc_f16_to_f32(v) : ampc_bf16_to_f32(v);
        float o = ampc_amp_unscale_one(f, inv_scale, &nonfinite);
        uint16_t ob = v;
        if (write) {
            ob = is_f16 ? ampc_f32_to_f16(o) : ampc_f32_to_bf16(o);
            h[i] = ob;
        }
        if (c != NULL) {
            count_one(c, v & 0x7fffu, ob & 0x7fffu, inf, min_normal);
        }
    }
    return nonfinite;
}

static inline double
load_f64(ampc_dtype dt, const void *x, int64_t i)
{
    switch (dt) {
    case AMPC_FLOAT16:
        return ampc_f16_to_f32(((const uint16_t *)x)[i]);
    case AMPC_BFLOAT16:
        return ampc_bf16_to_f32(((const uint16_t *)x)[i]);
    default:
        return ((const float *)x)[i];
    }
}

/* x (n > 0) of dt -> the accumulator of norm p.  A NaN anywhere makes the
 * result NaN: for the sums by arithmetic, for max/min explicitly. */
double
ampc_norm_scalar(ampc_dtype dt, const void *x, int64_t n, double p)
{
    double acc = 0.0;
    int64_t i;
    if (p == 2.0) {
        for (i = 0; i < n; i++) {
            double v = load_f64(dt, x, i);
            acc += v * v;
        }
    }
    else if (p == 1.0) {
        for (i = 0; i < n; i++) {
            acc += fabs(load_f64(dt, x, i));
        }
    }
    else if (isinf(p)) {
        acc = p > 0 ? 0.0 : INFINITY;
        for (i = 0; i < n; i++) {
            double a = fabs(load_f64(dt, x, i));
            if (a != a) {
                return a;
            }
            acc = (p > 0) == (a > acc) ? a : acc;
        }
    }
    else if (p == 0.0) {
        for (i = 0; i < n; i++) {
            acc += load_f64(dt, x, i) != 0.0;
        }
    }
    else {
        for (i = 0; i < n; i++) {
            acc += pow(fabs(load_f64(dt, x, i)), p);
        }
    }
    return acc;
}

double
ampc_norm_fold(double p, double a, double b)
{
    if (!isinf(p)) {
        return a + b;
    }
    if (a != a || b != b) {
        return a != a ? a : b;
    }
    return (p > 0) == (b > a) ? b : a;
}

// ----------------------------------------------------------------------------
// the split over threads, shared by every level

/* The start of thread k's share of `total` elements among nt threads. */
static inline int64_t
share_start(int64_t total, int nt, int k)
{
    if (k >= nt) {
        return total;
    }
    int64_t s = (int64_t)((double)total * k / nt);
    return s & ~(int64_t)(AMP_ALIGN - 1);
}

/* Unscales the elements [lo, hi) of the list's combined range (tensor t
 * first, starting at start[t]); returns nonzero on an inf/NaN input. */
static int
unscale_range(const ampc_amp_parts *parts, const ampc_tensor_list *l,
              const int64_t *start, int64_t t, int64_t lo, int64_t hi,
              float inv_scale, ampc_amp_counts *counts)
{
    int nonfinite = 0;
    for (; t < l->n && lo < hi; t++) {
        int64_t end = start[t + 1] < hi ? start[t + 1] : hi;
        int64_t len = end - lo;
        if (len <= 0) {
            continue;
        }
        size_t es = ampc_dtype_size[l->dtype[t]];
        char *x = (char *)l->data[t] + (size_t)(lo - start[t]) * es;
        if (counts == NULL) {
            nonfinite |= parts->unscale(l->dtype[t], x, len, inv_scale,
                                        NULL);
        }
        else {
            ampc_amp_counts c = {0, 0, 0, 0};
            nonfinite |= parts->unscale(l->dtype[t], x, len, inv_scale, &c);
#pragma omp atomic
            counts[t].inf += c.inf;
#pragma omp atomic
            counts[t].nan += c.nan;
#pragma omp atomic
            counts[t].zero += c.zero;
#pragma omp atomic
            counts[t].subnormal += c.subnormal;
        }
        lo = end;
    }
    return nonfinite;
}

/* The combined element range of all tensors is cut into one equal share
 * per thread, so one big tensor is spread over every core as well as many
 * small ones are. */
void
ampc_amp_unscale_run(const ampc_amp_parts *parts, const ampc_tensor_list *l,
                     float inv_scale, float *found_inf,
                     ampc_amp_counts *counts)
{
    int64_t *start = malloc((size_t)(l->n + 1) * sizeof(int64_t));
    int64_t t;
    int nonfinite = 0;

    if (start == NULL) {
        /* no memory for the prefix sums: tensor by tensor, one thread */
        for (t = 0; t < l->n; t++) {
            nonfinite |= parts->unscale(l->dtype[t], l->data[t],
                                        l->numel[t], inv_scale,
                                        counts ? &counts[t] : NULL);
        }
    }
    else {
        start[0] = 0;
        for (t = 0; t < l->n; t++) {
            start[t + 1] = start[t] + l->numel[t];
        }
        int64_t total = start[l->n];
        int threads = 1;
#ifdef _OPENMP
        threads = omp_get_max_threads();
#endif /* _OPENMP */
        if (total < AMP_PARALLEL_MIN || threads == 1) {
            nonfinite = unscale_range(parts, l, start, 0, 0, total,
                                      inv_scale, counts);
        }
        else {
#pragma omp parallel reduction(| : nonfinite)
            {
                int nt = 1, id = 0;
#ifdef _OPENMP
                nt = omp_get_num_threads();
                id = omp_get_thread_num();
#endif /* _OPENMP */
                int64_t lo = share_start(total, nt, id);
                int64_t hi = share_start(total, nt, id + 1);
                /* the first tensor that ends after lo */
                int64_t a = 0, b = l->n;
                while (a < b) {
                    int64_t mid = (a + b) / 2;
                    if (start[mid + 1] <= lo) {
                        a = mid + 1;
                    }
                    else {
                        b = mid;
                    }
                }
                nonfinite |= unscale_range(parts, l, start, a, lo, hi,
                                           inv_scale, counts);
            }
        }
        free(start);
    }
    if (nonfinite) {
        *found_inf = 1.0f;
    }
}

/* The accumulator of the piece of tensor t that starts at element off. */
static double
piece_norm(const ampc_amp_parts *parts, const ampc_tensor_list *l, int64_t t,
           int64_t off, double p)
{
    int64_t left = l->numel[t] - off;
    int64_t len = left < AMP_NORM_PIECE ? left : AMP_NORM_PIECE;
    size_t es = ampc_dtype_size[l->dtype[t]];
    return parts->norm(l->dtype[t], (const char *)l->data[t] + off * es, len,
                       p);
}

/* Every tensor is cut into pieces of AMP_NORM_PIECE elements; the pieces
 * are summed in parallel and folded per tensor in order. */
void
ampc_grad_norm_run(const ampc_amp_parts *parts, const ampc_tensor_list *l,
                   double p, double *acc)
{
    double identity = (isinf(p) && p < 0) ? INFINITY : 0.0;
    int64_t npieces = 0, total = 0, t, k;
    for (t = 0; t < l->n; t++) {
        acc[t] = identity;
        npieces += (l->numel[t] + AMP_NORM_PIECE - 1) / AMP_NORM_PIECE;
        total += l->numel[t];
    }
    if (npieces == 0) {
        return;
    }

    /* piece k: tensor piece[2k], first element piece[2k + 1]; its sum in
     * part[k] */
    int64_t *piece = malloc((size_t)npieces * 2 * sizeof(int64_t));
    double *part = malloc((size_t)npieces * sizeof(double));
    if (piece == NULL || part == NULL) {
        /* no memory: the same pieces and folds on one thread */
        free(piece);
        free(part);
        for (t = 0; t < l->n; t++) {
            for (int64_t off = 0; off < l->numel[t]; off += AMP_NORM_PIECE) {
                acc[t] = ampc_norm_fold(p, acc[t],
                                        piece_norm(parts, l, t, off, p));
            }
        }
        return;
    }
    k = 0;
    for (t = 0; t < l->n; t++) {
        for (int64_t off = 0; off < l->numel[t]; off += AMP_NORM_PIECE) {
            piece[2 * k] = t;
            piece[2 * k + 1] = off;
            k++;
        }
    }

#pragma omp parallel for schedule(dynamic, 4) if (total >= AMP_PARALLEL_MIN)
    for (k = 0; k < npieces; k++) {
        part[k] = piece_norm(parts, l, piece[2 * k], piece[2 * k + 1], p);
    }

    for (k = 0; k < npieces; k++) {
        t = piece[2 * k];
        acc[t] = ampc_norm_fold(p, acc[t], part[k]);
    }
    free(piece);
    free(part);
}

// ----------------------------------------------------------------------------
// the reference slots

static const ampc_amp_parts amp_parts_ref = {
    ampc_amp_unscale_scalar, ampc_norm_scalar,
};

/* l: tensors of numel[t] elements, unscaled in place; found_inf: 1 float;
 * counts: l->n entries or NULL */
void
ampc_amp_unscale_ref(const ampc_tensor_list *l, float inv_scale,
                     float *found_inf, ampc_amp_counts *counts)
{
    ampc_amp_unscale_run(&amp_parts_ref, l, inv_scale, found_inf, counts);
}

/* l: tensors -> acc (l->n) */
void
ampc_grad_norm_ref(const ampc_tensor_list *l, double p, double *acc)
{
    ampc_grad_norm_run(&amp_parts_ref, l, p, acc);
}

/* scale, tracker, found_inf: one element each */
void
ampc_amp_update_scale_ref(float *scale, int64_t *tracker,
                          const float *found_inf, double growth_factor,
                          double backoff_factor, int64_t growth_interval)
{
    ampc_amp_update_scale_one(scale, tracker, *found_inf, growth_factor,
                              backoff_factor, growth_interval);
}
