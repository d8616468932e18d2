/* reduce.c - sum, mean, max, min, argmax, argmin and prod over the middle
 * axis of a contiguous (outer, r, inner) array: the split over threads that
 * every level shares (ampc_reduce_run), and the portable parts it drives.
 */
#include "cpu/reduce_loops.h"

/* A row (inner == 1) is reduced in chunks of AMPC_RED_CHUNK elements whose
 * partial results are folded in order.  The chunks are the same whether one
 * thread or many reduce them, so the result never depends on threads. */
#define AMPC_RED_CHUNK (16 * AMPC_RED_BLOCK)
#define AMPC_RED_ROUND 64           /* chunks reduced in parallel per fold */
#define AMPC_RED_PARALLEL 32768     /* fewer elements: one thread */

// ----------------------------------------------------------------------------
// folding partial results

/* Is x[a] a better MAX (or MIN) than x[b]?  A NaN beats any number and
 * nothing beats a NaN; on ties the earlier b stays. */
static int
red_better(int is_max, ampc_dtype dt, const void *x, int64_t a, int64_t b)
{
    size_t es = ampc_dtype_size[dt];
    if (!ampc_dtype_is_float(dt)) {
        int64_t va = ampc_load_i64(dt, ampc_at(x, a, 1, es));
        int64_t vb = ampc_load_i64(dt, ampc_at(x, b, 1, es));
        return is_max ? va > vb : va < vb;
    }
    float va = ampc_load_f32(dt, ampc_at(x, a, 1, es));
    float vb = ampc_load_f32(dt, ampc_at(x, b, 1, es));
    if (vb != vb) {
        return 0;
    }
    return va != va || (is_max ? va > vb : va < vb);
}

/* Folds the partial p of the run that starts at x[base] into acc. */
static void
red_fold(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t base,
         const ampc_red_partial *p, ampc_red_partial *acc)
{
    if (op == AMPC_RED_SUM || op == AMPC_RED_MEAN) {
        acc->sum += p->sum;
        acc->isum += p->isum;
        return;
    }
    if (op == AMPC_RED_PROD) {
        acc->sum *= p->sum;
        acc->isum *= p->isum;
        return;
    }
    int64_t cand = base + p->idx;
    if (base == 0 || red_better(ampc_red_is_max(op), dt, x, cand, acc->idx)) {
        acc->idx = cand;
    }
}

/* Writes the result of one row x (r) to out[0] and idx[0]. */
static void
red_finish(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t r,
           const ampc_red_partial *acc, void *out, int64_t *idx)
{
    switch (op) {
    case AMPC_RED_SUM:
    case AMPC_RED_MEAN:
    case AMPC_RED_PROD:
        if (ampc_dtype_is_float(dt)) {
            double s = acc->sum;
            if (op == AMPC_RED_MEAN) {
                s /= (double)r;
            }
            ampc_store_f64(dt, out, s);
        }
        else if (op == AMPC_RED_MEAN) {
            *(int64_t *)out = ampc_f64_to_i64((double)(int64_t)acc->isum /
                                              (double)r);
        }
        else {
            *(int64_t *)out = (int64_t)acc->isum;
        }
        break;
    case AMPC_RED_MAX:
    case AMPC_RED_MIN:
        ampc_copy_elem(dt, x, acc->idx, out);
        if (idx != NULL) {
            *idx = acc->idx;
        }
        break;
    default:
        *idx = acc->idx;
        break;
    }
}

// ----------------------------------------------------------------------------
// the split over threads, shared by every level

/* One row on this thread. */
static void
red_row(const ampc_reduce_parts *parts, ampc_reduce_op op, ampc_dtype dt,
        const void *x, int64_t r, ampc_red_partial *acc)
{
    size_t es = ampc_dtype_size[dt];
    for (int64_t c0 = 0; c0 < r; c0 += AMPC_RED_CHUNK) {
        ampc_red_partial p;
        int64_t len = r - c0 < AMPC_RED_CHUNK ? r - c0 : AMPC_RED_CHUNK;
        parts->run(op, dt, ampc_at(x, c0, 1, es), len, &p);
        red_fold(op, dt, x, c0, &p, acc);
    }
}

/* One long row, its chunks spread over the threads: the same runs and the
 * same folds, in the same order, as red_row. */
static void
red_row_parallel(const ampc_reduce_parts *parts, ampc_reduce_op op,
                 ampc_dtype dt, const void *x, int64_t r,
                 ampc_red_partial *acc)
{
    size_t es = ampc_dtype_size[dt];
    ampc_red_partial part[AMPC_RED_ROUND];
    const int64_t round = (int64_t)AMPC_RED_ROUND * AMPC_RED_CHUNK;
    for (int64_t r0 = 0; r0 < r; r0 += round) {
        int64_t left = r - r0 < round ? r - r0 : round;
        int64_t nc = (left + AMPC_RED_CHUNK - 1) / AMPC_RED_CHUNK;
        int64_t c;
#pragma omp parallel for schedule(static)
        for (c = 0; c < nc; c++) {
            int64_t c0 = r0 + c * AMPC_RED_CHUNK;
            int64_t len = r - c0 < AMPC_RED_CHUNK ? r - c0 : AMPC_RED_CHUNK;
            parts->run(op, dt, ampc_at(x, c0, 1, es), len, &part[c]);
        }
        for (c = 0; c < nc; c++) {
            red_fold(op, dt, x, r0 + c * AMPC_RED_CHUNK, &part[c], acc);
        }
    }
}

/* x (outer, r, inner) -> out (outer, inner), idx (outer, inner).  Rows
 * (inner == 1) go one per thread, or, when there are few long ones, chunk by
 * chunk; columns go in tiles of AMPC_RED_TILE per thread (a tall, narrow
 * slice is therefore not split over r). */
void
ampc_reduce_run(const ampc_reduce_parts *parts, ampc_reduce_op op,
                ampc_dtype dt, int64_t outer, int64_t r, int64_t inner,
                const void *x, void *out, int64_t *idx)
{
    size_t es = ampc_dtype_size[dt];
    int int_sum = !ampc_dtype_is_float(dt)
                  && (op == AMPC_RED_SUM || op == AMPC_RED_MEAN
                      || op == AMPC_RED_PROD);
    size_t oes = int_sum ? sizeof(int64_t) : es;
    int64_t total = outer * r * inner;
    int64_t o;

    if (outer <= 0 || r <= 0 || inner <= 0) {
        return;
    }
    if (inner == 1 && outer < 8 && r >= 4 * AMPC_RED_CHUNK) {
        for (o = 0; o < outer; o++) {
            const void *row = ampc_at(x, o * r, 1, es);
            ampc_red_partial acc = ampc_red_start(op);
            red_row_parallel(parts, op, dt, row, r, &acc);
            red_finish(op, dt, row, r, &acc,
                       out == NULL ? NULL : (char *)out + o * oes,
                       idx == NULL ? NULL : idx + o);
        }
        return;
    }
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (total >= AMPC_RED_PARALLEL)
        for (o = 0; o < outer; o++) {
            const void *row = ampc_at(x, o * r, 1, es);
            ampc_red_partial acc = ampc_red_start(op);
            red_row(parts, op, dt, row, r, &acc);
            red_finish(op, dt, row, r, &acc,
                       out == NULL ? NULL : (char *)out + o * oes,
                       idx == NULL ? NULL : idx + o);
        }
        return;
    }

    int64_t ntiles = (inner + AMPC_RED_TILE - 1) / AMPC_RED_TILE;
    int64_t w;
#pragma omp parallel for schedule(static) if (total >= AMPC_RED_PARALLEL)
    for (w = 0; w < outer * ntiles; w++) {
        int64_t ob = w / ntiles, j0 = (w % ntiles) * AMPC_RED_TILE;
        int64_t nc = inner - j0 < AMPC_RED_TILE ? inner - j0 : AMPC_RED_TILE;
        int64_t first = ob * inner + j0;
        parts->cols(op, dt, ampc_at(x, ob * r * inner + j0, 1, es), r, inner,
                    nc, out == NULL ? NULL : (char *)out + first * oes,
                    idx == NULL ? NULL : idx + first);
    }
}

// ----------------------------------------------------------------------------
// CPU reference

static void
reduce_run_ref(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t n,
               ampc_red_partial *p)
{
    ampc_reduce_run_loop(&ampc_cvt_ref, op, dt, x, n, p);
}

static void
reduce_cols_ref(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t r,
                int64_t inner, int64_t ncols, void *out, int64_t *idx)
{
    ampc_reduce_cols_loop(&ampc_cvt_ref, op, dt, x, r, inner, ncols, out,
                          idx);
}

static const ampc_reduce_parts reduce_parts_ref = {
    reduce_run_ref, reduce_cols_ref,
};

/* x (outer, r, inner) -> out (outer, inner), idx (outer, inner) */
void
ampc_reduce_ref(ampc_reduce_op op, ampc_dtype dt, int64_t outer, int64_t r,
                int64_t inner, const void *x, void *out, int64_t *idx)
{
    ampc_reduce_run(&reduce_parts_ref, op, dt, outer, r, inner, x, out, idx);
}
