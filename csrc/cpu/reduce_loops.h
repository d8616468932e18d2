/* reduce_loops.h - the bodies of the reductions (each level's
 * ampc_reduce_parts: a contiguous run, or columns reduced over rows) and
 * the lane sums they are built from, which the NN loops use too.  Written
 * once and compiled per level, as cpu/loops.h explains.
 */
#ifndef AMPC_CPU_REDUCE_LOOPS_H
#define AMPC_CPU_REDUCE_LOOPS_H

#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// reduction parts (the bodies of each level's ampc_reduce_parts)

_Static_assert(AMPC_RED_LANES == 64, "ampc_sum_lanes_f32 folds 64 lanes");

/* Sum of n <= AMPC_RED_BLOCK floats: AMPC_RED_LANES independent partial sums
 * (a vectorisable element-wise update), then a fixed pairwise tree, so every
 * level adds in the same order. */
static AMPC_ALWAYS_INLINE float
ampc_sum_lanes_f32(const float *x, int64_t n)
{
    float acc[AMPC_RED_LANES] = {0.0f};
    int64_t i = 0;
    int l;
    for (; i + AMPC_RED_LANES <= n; i += AMPC_RED_LANES) {
        for (l = 0; l < AMPC_RED_LANES; l++) {
            acc[l] += x[i + l];
        }
    }
    for (l = 0; i < n; i++, l++) {
        acc[l] += x[i];
    }
    /* the halving tree spelled out: a loop over the widths leaves gcc a
     * scalar chain */
    for (l = 0; l < 32; l++) {
        acc[l] += acc[l + 32];
    }
    for (l = 0; l < 16; l++) {
        acc[l] += acc[l + 16];
    }
    for (l = 0; l < 8; l++) {
        acc[l] += acc[l + 8];
    }
    for (l = 0; l < 4; l++) {
        acc[l] += acc[l + 4];
    }
    return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

/* NaN-propagating max (or min) of x[0:n], n >= 1: a NaN lane stays NaN. */
static AMPC_ALWAYS_INLINE float
ampc_extreme_lanes_f32(int is_max, const float *x, int64_t n)
{
    float m[AMPC_RED_LANES];
    int64_t i = 0;
    int l;
    for (l = 0; l < AMPC_RED_LANES; l++) {
        m[l] = x[0];
    }
    if (is_max) {
        for (; i + AMPC_RED_LANES <= n; i += AMPC_RED_LANES) {
            for (l = 0; l < AMPC_RED_LANES; l++) {
                float v = x[i + l];
                m[l] = (v > m[l] || v != v) ? v : m[l];
            }
        }
    }
    else {
        for (; i + AMPC_RED_LANES <= n; i += AMPC_RED_LANES) {
            for (l = 0; l < AMPC_RED_LANES; l++) {
                float v = x[i + l];
                m[l] = (v < m[l] || v != v) ? v : m[l];
            }
        }
    }
    for (l = 0; i < n; i++, l++) {
        float v = x[i];
        if ((is_max ? v > m[l] : v < m[l]) || v != v) {
            m[l] = v;
        }
    }
    float r = m[0];
    for (l = 1; l < AMPC_RED_LANES && r == r; l++) {
        if ((is_max ? m[l] > r : m[l] < r) || m[l] != m[l]) {
            r = m[l];
        }
    }
    return r;
}

/* First position of e in x[0:n] (of a NaN when e is NaN); e is there.  Each
 * run of AMPC_RED_LANES is first tested as a whole (an OR that vectorises),
 * since an early-exit loop does not, and ascending data searches every
 * block. */
static AMPC_ALWAYS_INLINE int64_t
ampc_find_f32(const float *x, int64_t n, float e)
{
    int is_nan = e != e;
    int64_t i0 = 0;
    for (; i0 + AMPC_RED_LANES <= n; i0 += AMPC_RED_LANES) {
        int hit = 0;
        for (int l = 0; l < AMPC_RED_LANES; l++) {
            float v = x[i0 + l];
            hit |= is_nan ? v != v : v == e;
        }
        if (hit) {
            break;
        }
    }
    for (int64_t i = i0; i < n; i++) {
        if (is_nan ? x[i] != x[i] : x[i] == e) {
            return i;
        }
    }
    return 0;
}

/* Lanes of a product: doubles, so that no partial product of float32
 * values overflows or underflows before the one rounding at the end. */
#define AMPC_RED_PROD_LANES 16

/* Product of x[0:n] in double: independent lane products (a vectorisable
 * element-wise update), then a fixed pairwise tree. */
static AMPC_ALWAYS_INLINE double
ampc_prod_lanes_f32(const float *x, int64_t n)
{
    double acc[AMPC_RED_PROD_LANES];
    int64_t i = 0;
    int l;
    for (l = 0; l < AMPC_RED_PROD_LANES; l++) {
        acc[l] = 1.0;
    }
    for (; i + AMPC_RED_PROD_LANES <= n; i += AMPC_RED_PROD_LANES) {
        for (l = 0; l < AMPC_RED_PROD_LANES; l++) {
            acc[l] *= (double)x[i + l];
        }
    }
    for (l = 0; i < n; i++, l++) {
        acc[l] *= (double)x[i];
    }
    for (int w = AMPC_RED_PROD_LANES / 2; w > 0; w /= 2) {
        for (l = 0; l < w; l++) {
            acc[l] *= acc[l + w];
        }
    }
    return acc[0];
}

/* Wrapping int64 product of x[0:n] (as PyTorch's). */
static AMPC_ALWAYS_INLINE uint64_t
ampc_prod_lanes_i64(const int64_t *x, int64_t n)
{
    uint64_t acc[AMPC_RED_LANES / 8];
    int64_t i = 0;
    int l;
    for (l = 0; l < AMPC_RED_LANES / 8; l++) {
        acc[l] = 1;
    }
    for (; i + AMPC_RED_LANES / 8 <= n; i += AMPC_RED_LANES / 8) {
        for (l = 0; l < AMPC_RED_LANES / 8; l++) {
            acc[l] *= (uint64_t)x[i + l];
        }
    }
    uint64_t s = 1;
    for (; i < n; i++) {
        s *= (uint64_t)x[i];
    }
    for (l = 0; l < AMPC_RED_LANES / 8; l++) {
        s *= acc[l];
    }
    return s;
}

static AMPC_ALWAYS_INLINE uint64_t
ampc_sum_lanes_i64(const int64_t *x, int64_t n)
{
    uint64_t acc[AMPC_RED_LANES / 8] = {0};
    int64_t i = 0;
    int l;
    for (; i + AMPC_RED_LANES / 8 <= n; i += AMPC_RED_LANES / 8) {
        for (l = 0; l < AMPC_RED_LANES / 8; l++) {
            acc[l] += (uint64_t)x[i + l];
        }
    }
    uint64_t s = 0;
    for (; i < n; i++) {
        s += (uint64_t)x[i];
    }
    for (l = 0; l < AMPC_RED_LANES / 8; l++) {
        s += acc[l];
    }
    return s;
}

static AMPC_ALWAYS_INLINE int64_t
ampc_extreme_lanes_i64(int is_max, const int64_t *x, int64_t n)
{
    int64_t m[AMPC_RED_LANES / 8];
    int64_t i = 0;
    int l;
    for (l = 0; l < AMPC_RED_LANES / 8; l++) {
        m[l] = x[0];
    }
    for (; i + AMPC_RED_LANES / 8 <= n; i += AMPC_RED_LANES / 8) {
        for (l = 0; l < AMPC_RED_LANES / 8; l++) {
            int64_t v = x[i + l];
            m[l] = (is_max ? v > m[l] : v < m[l]) ? v : m[l];
        }
    }
    int64_t r = m[0];
    for (l = 1; l < AMPC_RED_LANES / 8; l++) {
        r = (is_max ? m[l] > r : m[l] < r) ? m[l] : r;
    }
    for (; i < n; i++) {
        r = (is_max ? x[i] > r : x[i] < r) ? x[i] : r;
    }
    return r;
}

static AMPC_ALWAYS_INLINE int64_t
ampc_find_i64(const int64_t *x, int64_t n, int64_t e)
{
    int64_t i0 = 0;
    for (; i0 + AMPC_RED_LANES <= n; i0 += AMPC_RED_LANES) {
        int hit = 0;
        for (int l = 0; l < AMPC_RED_LANES; l++) {
            hit |= x[i0 + l] == e;
        }
        if (hit) {
            break;
        }
    }
    for (int64_t i = i0; i < n; i++) {
        if (x[i] == e) {
            return i;
        }
    }
    return 0;
}

static inline int
ampc_red_is_max(ampc_reduce_op op)
{
    return op == AMPC_RED_MAX || op == AMPC_RED_ARGMAX;
}

/* The partial result of nothing: 0 for sums, 1 for products. */
static inline ampc_red_partial
ampc_red_start(ampc_reduce_op op)
{
    int one = op == AMPC_RED_PROD;
    ampc_red_partial p = {one ? 1.0 : 0.0, (uint64_t)one, 0};
    return p;
}

/* ampc_reduce_parts.run: x[0:n] contiguous -> *p.  Works in blocks of
 * AMPC_RED_BLOCK; for MAX/MIN a block is searched for the position of its
 * extreme only when it beats the best so far, and a NaN ends the search. */
static AMPC_ALWAYS_INLINE void
ampc_reduce_run_loop(const ampc_converters *cv, ampc_reduce_op op,
                     ampc_dtype dt, const void *x, int64_t n,
                     ampc_red_partial *p)
{
    size_t es = ampc_dtype_size[dt];
    int is_sum = op == AMPC_RED_SUM || op == AMPC_RED_MEAN;
    int is_max = ampc_red_is_max(op);
    int is_prod = op == AMPC_RED_PROD;
    int64_t i;

    *p = ampc_red_start(op);
    if (!ampc_dtype_is_float(dt)) {
        int64_t buf[AMPC_RED_BLOCK];
        int64_t best = 0;
        for (i = 0; i < n; i += AMPC_RED_BLOCK) {
            int64_t m = n - i < AMPC_RED_BLOCK ? n - i : AMPC_RED_BLOCK;
            const int64_t *v = ampc_load_block_i64(dt, ampc_at(x, i, 1, es),
                                                   1, m, buf);
            if (is_sum) {
                p->isum += ampc_sum_lanes_i64(v, m);
                continue;
            }
            if (is_prod) {
                p->isum *= ampc_prod_lanes_i64(v, m);
                continue;
            }
            int64_t e = ampc_extreme_lanes_i64(is_max, v, m);
            if (i == 0 || (is_max ? e > best : e < best)) {
                best = e;
                p->idx = i + ampc_find_i64(v, m, e);
            }
        }
        return;
    }

    float buf[AMPC_RED_BLOCK];
    float best = 0.0f;
    for (i = 0; i < n; i += AMPC_RED_BLOCK) {
        int64_t m = n - i < AMPC_RED_BLOCK ? n - i : AMPC_RED_BLOCK;
        const float *v = ampc_load_block_f32(cv, dt, ampc_at(x, i, 1, es), 1,
                                             m, buf, NULL);
        if (is_sum) {
            p->sum += ampc_sum_lanes_f32(v, m);
            continue;
        }
        if (is_prod) {
            p->sum *= ampc_prod_lanes_f32(v, m);
            continue;
        }
        float e = ampc_extreme_lanes_f32(is_max, v, m);
        if (e != e) {
            p->idx = i + ampc_find_f32(v, m, e);
            return;
        }
        if (i == 0 || (is_max ? e > best : e < best)) {
            best = e;
            p->idx = i + ampc_find_f32(v, m, e);
        }
    }
}

/* Copies the element x[k] of a run to out (bool as 0/1): MAX/MIN return an
 * element of x itself, NaN payloads included. */
static inline void
ampc_copy_elem(ampc_dtype dt, const void *x, int64_t k, void *out)
{
    size_t es = ampc_dtype_size[dt];
    if (dt == AMPC_BOOL) {
        *(uint8_t *)out = ((const uint8_t *)x)[k] != 0;
    }
    else {
        memcpy(out, ampc_at(x, k, 1, es), es);
    }
}

/* The product of each of ncols columns of x (r, inner) over r: in double
 * for the float dtypes (rounded once), wrapping int64 for the others. */
static AMPC_ALWAYS_INLINE void
ampc_reduce_cols_prod(const ampc_converters *cv, ampc_dtype dt,
                      const void *x, int64_t r, int64_t inner,
                      int64_t ncols, void *out)
{
    size_t es = ampc_dtype_size[dt];
    int64_t k, j;
    if (!ampc_dtype_is_float(dt)) {
        int64_t buf[AMPC_RED_TILE];
        uint64_t acc[AMPC_RED_TILE];
        for (j = 0; j < ncols; j++) {
            acc[j] = 1;
        }
        for (k = 0; k < r; k++) {
            const int64_t *v = ampc_load_block_i64(
                dt, ampc_at(x, k, inner, es), 1, ncols, buf);
            for (j = 0; j < ncols; j++) {
                acc[j] *= (uint64_t)v[j];
            }
        }
        for (j = 0; j < ncols; j++) {
            ((int64_t *)out)[j] = (int64_t)acc[j];
        }
        return;
    }
    float buf[AMPC_RED_TILE];
    double acc[AMPC_RED_TILE];
    uint16_t tmp[AMPC_RED_TILE];
    for (j = 0; j < ncols; j++) {
        acc[j] = 1.0;
    }
    for (k = 0; k < r; k++) {
        const float *v = ampc_load_block_f32(
            cv, dt, ampc_at(x, k, inner, es), 1, ncols, buf, tmp);
        for (j = 0; j < ncols; j++) {
            acc[j] *= (double)v[j];
        }
    }
    for (j = 0; j < ncols; j++) {
        ampc_store_f64(dt, (char *)out + j * es, acc[j]);
    }
}

/* ampc_reduce_parts.cols: columns of x (r, inner) reduced over r.  Column
 * sums keep AMPC_RED_LANES rows in float32 before folding into doubles, the
 * same bound as a run's lanes. */
static AMPC_ALWAYS_INLINE void
ampc_reduce_cols_loop(const ampc_converters *cv, ampc_reduce_op op,
                      ampc_dtype dt, const void *x, int64_t r, int64_t inner,
                      int64_t ncols, void *out, int64_t *idx)
{
    size_t es = ampc_dtype_size[dt];
    int is_sum = op == AMPC_RED_SUM || op == AMPC_RED_MEAN;
    int is_max = ampc_red_is_max(op);
    int64_t bidx[AMPC_RED_TILE];
    int64_t k, j;

    if (op == AMPC_RED_PROD) {
        ampc_reduce_cols_prod(cv, dt, x, r, inner, ncols, out);
        return;
    }
    if (!ampc_dtype_is_float(dt)) {
        int64_t buf[AMPC_RED_TILE], best[AMPC_RED_TILE];
        uint64_t acc[AMPC_RED_TILE];
        for (j = 0; j < ncols; j++) {
            acc[j] = 0;
            bidx[j] = 0;
        }
        for (k = 0; k < r; k++) {
            const int64_t *v = ampc_load_block_i64(
                dt, ampc_at(x, k, inner, es), 1, ncols, buf);
            if (is_sum) {
                for (j = 0; j < ncols; j++) {
                    acc[j] += (uint64_t)v[j];
                }
            }
            else if (k == 0) {
                memcpy(best, v, (size_t)ncols * sizeof(int64_t));
            }
            else {
                for (j = 0; j < ncols; j++) {
                    int better = is_max ? v[j] > best[j] : v[j] < best[j];
                    best[j] = better ? v[j] : best[j];
                    bidx[j] = better ? k : bidx[j];
                }
            }
        }
        if (is_sum) {
            for (j = 0; j < ncols; j++) {
                if (op == AMPC_RED_MEAN) {
                    ((int64_t *)out)[j] = ampc_f64_to_i64(
                        (double)(int64_t)acc[j] / (double)r);
                }
                else {
                    ((int64_t *)out)[j] = (int64_t)acc[j];
                }
            }
            return;
        }
    }
    else if (is_sum) {
        float buf[AMPC_RED_TILE], acc[AMPC_RED_TILE];
        double dacc[AMPC_RED_TILE];
        uint16_t tmp[AMPC_RED_TILE];
        for (j = 0; j < ncols; j++) {
            dacc[j] = 0.0;
        }
        for (int64_t k0 = 0; k0 < r; k0 += AMPC_RED_LANES) {
            int64_t k1 = r - k0 < AMPC_RED_LANES ? r : k0 + AMPC_RED_LANES;
            for (j = 0; j < ncols; j++) {
                acc[j] = 0.0f;
            }
            for (k = k0; k < k1; k++) {
                const float *v = ampc_load_block_f32(
                    cv, dt, ampc_at(x, k, inner, es), 1, ncols, buf, tmp);
                for (j = 0; j < ncols; j++) {
                    acc[j] += v[j];
                }
            }
            for (j = 0; j < ncols; j++) {
                dacc[j] += acc[j];
            }
        }
        for (j = 0; j < ncols; j++) {
            double s = dacc[j];
            if (op == AMPC_RED_MEAN) {
                s /= (double)r;
            }
            ampc_store_f64(dt, (char *)out + j * es, s);
        }
        return;
    }
    else {
        float buf[AMPC_RED_TILE], best[AMPC_RED_TILE];
        uint16_t tmp[AMPC_RED_TILE];
        for (j = 0; j < ncols; j++) {
            bidx[j] = 0;
        }
        for (k = 0; k < r; k++) {
            const float *v = ampc_load_block_f32(
                cv, dt, ampc_at(x, k, inner, es), 1, ncols, buf, tmp);
            if (k == 0) {
                memcpy(best, v, (size_t)ncols * sizeof(float));
                continue;
            }
            /* a NaN replaces a number; nothing replaces a NaN */
            for (j = 0; j < ncols; j++) {
                float b = best[j], e = v[j];
                int better = (is_max ? e > b : e < b) || (e != e && b == b);
                best[j] = better ? e : b;
                bidx[j] = better ? k : bidx[j];
            }
        }
    }

    /* MAX/MIN and the ARG ops: the first best position of each column */
    for (j = 0; j < ncols; j++) {
        if (op == AMPC_RED_MAX || op == AMPC_RED_MIN) {
            ampc_copy_elem(dt, ampc_at(x, bidx[j] * inner + j, 1, es), 0,
                           (char *)out + j * es);
        }
        if (idx != NULL) {
            idx[j] = bidx[j];
        }
    }
}

#endif /* AMPC_CPU_REDUCE_LOOPS_H */
