/* avg_pool_loops.h - the bodies of avg_pool2d and adaptive_avg_pool2d,
 * forward and backward, written once and compiled per level as
 * cpu/nn_loops.h explains; the window rules are avg_pool_math.h's, shared
 * with cuda/avg_pool.cu, which sums in the same order (kernels.h).
 *
 * Both passes factor by axis.  Forward, per output row: the column sums
 * of its window's rows (a vector add over the row), then each output the
 * sum of its window's column sums.  Backward, per output row i: q = the
 * row's gradients over their divisors, T_i[c] = the sum of q over the
 * outputs whose windows hold column c; then each input row, once, the sum
 * in float32 of the T_i of the output rows holding it, rounded once (a row
 * held by the same output rows as the row above is a copy of it).
 */
#ifndef AMPC_CPU_AVG_POOL_LOOPS_H
#define AMPC_CPU_AVG_POOL_LOOPS_H

#include "avg_pool_math.h"
#include "cpu/nn_loops.h"

typedef struct {
    const ampc_avg_pool2d_shape *s;
    ampc_dtype dt;
    const void *in;             /* x, or grad_out */
    void *out;                  /* y, or grad_in */
    int status;                 /* an ampc_nn_status */
} ampc_avg_pool_ctx;

/* Scratch for one range call: nf floats, then ni int64s; NULL (with
 * c->status set) when the memory cannot be had. */
static inline float *
ampc_avg_scratch(ampc_avg_pool_ctx *c, int64_t nf, int64_t ni, int64_t **ints)
{
    /* nf rounded up to even keeps the int64s 8-byte aligned */
    int64_t nf2 = (nf + 1) & ~(int64_t)1;
    float *p = malloc((size_t)nf2 * sizeof(float) +
                      (size_t)ni * sizeof(int64_t));
    if (p == NULL) {
#pragma omp atomic update
        c->status |= AMPC_NN_NO_MEMORY;
        return NULL;
    }
    *ints = (int64_t *)(p + nf2);
    return p;
}

/* The column windows of every output column: win[3 j .. 3 j + 2] = lo, hi
 * and the divisor factor (computed once per range call, not per row). */
static inline void
ampc_avg_column_windows(const ampc_avg_pool2d_shape *s, int64_t *win)
{
    ampc_avg_axis aw = ampc_avg_axis_w(s);
    for (int64_t j = 0; j < s->ow; j++) {
        win[3 * j + 2] = ampc_avg_window(&aw, s->adaptive,
                                         s->count_include_pad, j,
                                         &win[3 * j], &win[3 * j + 1]);
    }
}

/* cols[0:w] = the sum of rows [lo, hi) of the plane x (from 0, in order) */
static AMPC_ALWAYS_INLINE void
ampc_avg_column_sums(const ampc_converters *cv, ampc_dtype dt, const char *x,
                     int64_t w, int64_t lo, int64_t hi, float *cols)
{
    size_t es = ampc_dtype_size[dt];
    float buf[AMPC_NN_ROW];
    for (int64_t c0 = 0; c0 < w; c0 += AMPC_NN_ROW) {
        int64_t m = ampc_nn_min(AMPC_NN_ROW, w - c0);
        float *acc = cols + c0;
        for (int64_t c = 0; c < m; c++) {
            acc[c] = 0.0f;
        }
        for (int64_t r = lo; r < hi; r++) {
            const float *v = ampc_load_block_f32(
                cv, dt, x + (size_t)(r * w + c0) * es, 1, m, buf, NULL);
            for (int64_t c = 0; c < m; c++) {
                acc[c] += v[c];
            }
        }
    }
}

/* planes [b, e): x -> y */
static AMPC_ALWAYS_INLINE void
ampc_avg_pool2d_fwd_range(const ampc_converters *cv,
                          ampc_avg_pool_ctx *c, int64_t b, int64_t e)
{
    const ampc_avg_pool2d_shape *s = c->s;
    ampc_avg_axis ah = ampc_avg_axis_h(s);
    size_t es = ampc_dtype_size[c->dt];
    int64_t *win;
    float *cols = ampc_avg_scratch(c, s->w + s->ow, 3 * s->ow, &win);
    if (cols == NULL) {
        return;
    }
    float *row = cols + s->w;
    ampc_avg_column_windows(s, win);
    for (int64_t p = b; p < e; p++) {
        const char *x = (const char *)c->in + (size_t)(p * s->h * s->w) * es;
        char *y = (char *)c->out + (size_t)(p * s->oh * s->ow) * es;
        for (int64_t i = 0; i < s->oh; i++) {
            int64_t lo, hi;
            int64_t fh = ampc_avg_window(&ah, s->adaptive,
                                         s->count_include_pad, i, &lo, &hi);
            ampc_avg_column_sums(cv, c->dt, x, s->w, lo, hi, cols);
            for (int64_t j = 0; j < s->ow; j++) {
                float acc = 0.0f;
                for (int64_t k = win[3 * j]; k < win[3 * j + 1]; k++) {
                    acc += cols[k];
                }
                row[j] = acc / ampc_avg_divisor(s, fh, win[3 * j + 2]);
            }
            ampc_store_block_f32(cv, c->dt, row, s->ow,
                                 y + (size_t)(i * s->ow) * es, 1, NULL);
        }
    }
    free(cols);
}

/* planes [b, e): grad_out -> grad_in.  Per plane: t[i] (a row of W) for
 * every output row i, then each input row r written once, the sum (from
 * 0, in order) of t[i] over the output rows i that hold r. */
static AMPC_ALWAYS_INLINE void
ampc_avg_pool2d_bwd_range(const ampc_converters *cv,
                          ampc_avg_pool_ctx *c, int64_t b, int64_t e)
{
    const ampc_avg_pool2d_shape *s = c->s;
    ampc_avg_axis ah = ampc_avg_axis_h(s), aw = ampc_avg_axis_w(s);
    size_t es = ampc_dtype_size[c->dt];
    int64_t *win;
    float *t = ampc_avg_scratch(c, s->oh * s->w + s->w + 2 * s->ow,
                                3 * s->ow + 2 * s->w + 2 * s->h, &win);
    if (t == NULL) {
        return;
    }
    float *row = t + s->oh * s->w, *q = row + s->w, *gbuf = q + s->ow;
    /* cover_w[2 col], cover_w[2 col + 1]: the output columns holding col;
     * cover_h likewise the output rows holding each input row */
    int64_t *cover_w = win + 3 * s->ow, *cover_h = cover_w + 2 * s->w;
    ampc_avg_column_windows(s, win);
    for (int64_t col = 0; col < s->w; col++) {
        ampc_avg_cover(&aw, s->adaptive, col, &cover_w[2 * col],
                       &cover_w[2 * col + 1]);
    }
    for (int64_t r = 0; r < s->h; r++) {
        ampc_avg_cover(&ah, s->adaptive, r, &cover_h[2 * r],
                       &cover_h[2 * r + 1]);
    }
    for (int64_t p = b; p < e; p++) {
        const char *gy = (const char *)c->in +
                         (size_t)(p * s->oh * s->ow) * es;
        for (int64_t i = 0; i < s->oh; i++) {
            int64_t lo, hi;
            int64_t fh = ampc_avg_window(&ah, s->adaptive,
                                         s->count_include_pad, i, &lo, &hi);
            const float *g = ampc_load_block_f32(
                cv, c->dt, gy + (size_t)(i * s->ow) * es, 1, s->ow, gbuf,
                NULL);
            for (int64_t j = 0; j < s->ow; j++) {
                q[j] = g[j] / ampc_avg_divisor(s, fh, win[3 * j + 2]);
            }
            float *ti = t + i * s->w;
            for (int64_t col = 0; col < s->w; col++) {
                float sum = 0.0f;
                for (int64_t j = cover_w[2 * col];
                     j <= cover_w[2 * col + 1]; j++) {
                    sum += q[j];
                }
                ti[col] = sum;
            }
        }
        char *gx = (char *)c->out + (size_t)(p * s->h * s->w) * es;
        for (int64_t r = 0; r < s->h; r++) {
            char *at = gx + (size_t)(r * s->w) * es;
            if (r > 0 && cover_h[2 * r] == cover_h[2 * r - 2] &&
                cover_h[2 * r + 1] == cover_h[2 * r - 1]) {
                /* the rows of one window get the same sums: the row above
                 * again (every row of a global pool; half of a 2 x 2) */
                memcpy(at, at - (size_t)s->w * es, (size_t)s->w * es);
                continue;
            }
            /* a float32 row is summed where it is stored */
            float *a = c->dt == AMPC_FLOAT32 ? (float *)at : row;
            for (int64_t col = 0; col < s->w; col++) {
                a[col] = 0.0f;
            }
            for (int64_t i = cover_h[2 * r]; i <= cover_h[2 * r + 1]; i++) {
                const float *ti = t + i * s->w;
                for (int64_t col = 0; col < s->w; col++) {
                    a[col] += ti[col];
                }
            }
            ampc_store_block_f32(cv, c->dt, a, s->w, at, 1, NULL);
        }
    }
    free(t);
}

/* Runs range (a level's wrapper of a body above) over the planes; returns
 * an ampc_nn_status. */
static inline int
ampc_avg_pool2d_launch(ampc_range_fn range, const ampc_avg_pool2d_shape *s,
                       ampc_dtype dt, const void *in, void *out)
{
    ampc_avg_pool_ctx c = {s, dt, in, out, AMPC_NN_OK};
    ampc_parallel_for(s->planes, ampc_nn_grain(2 * s->h * s->w), range, &c);
    return c.status;
}

#endif /* AMPC_CPU_AVG_POOL_LOOPS_H */
