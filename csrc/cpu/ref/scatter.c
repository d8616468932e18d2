/* scatter.c - scatter_reduce on the CPU (kernels.h ampc_scatter_reduce_fn):
 * each index element names the position along dim of the element of t
 * that its src value is combined into (scatter_math.h's rules).
 *
 * An element of t is reached only from the index positions that share its
 * coordinates outside dim (its slice), so threads take whole slices, or
 * pieces of them along another dim: no two threads write one element, and
 * each element receives its values in index order, as a single thread
 * would give them.  A single slice that cannot be cut (a 1-D scatter) runs
 * on one thread.
 *
 * NOTE: splitting a 1-D scatter by destination (a stable sort of its steps
 * into buckets of positions, one thread a bucket) was tried and measured
 * on 2 cores: its three passes cost more than the second core saved.
 */
#include <omp.h>

#include "cpu/cpu.h"
#include "scatter_math.h"

/* Updates worth a task: each may miss the cache, so fewer than a streaming
 * kernel's (as index.c's INDEX_GRAIN). */
#define SCATTER_GRAIN 2048
/* Elements of the run dim (below) per work item: at most SCATTER_RUN, and
 * at least SCATTER_LINE when runs are cut finer for the threads. */
#define SCATTER_RUN 512
#define SCATTER_LINE 16

/* The work is a list of items: an item is one value of the "outer" dims
 * (those other than dim and the run dim) and a chunk of the run dim.  The
 * run dim is the other dim along which t's elements lie closest; when it
 * is closer than dim, an item walks each index step along a run of it, so
 * that neighbouring elements of t are updated together (scatter along dim
 * 0 of a row-major tensor updates row after row); else an item is one
 * slice, walked along dim. */
typedef struct {
    const ampc_scatter_geom *g;
    char *t;
    const int64_t *idx;
    const char *src;
    int64_t *cnt;
    ampc_scatter_op op;
    int run;                        /* the run dim, or -1 */
    int nouter;
    int outer[AMPC_MAX_DIMS];
    int64_t run_len;                /* run elements per chunk */
    int64_t chunks;                 /* chunks per run */
} scatter_ctx;

/* Where item q starts in t, idx, src and cnt, and its run [x0, x1). */
typedef struct {
    int64_t t, i, s, c;
    int64_t x0, x1;
} item_span;

static inline AMPC_ALWAYS_INLINE item_span
span_of(const scatter_ctx *c, int64_t q)
{
    const ampc_scatter_geom *g = c->g;
    item_span sp = {0};
    int64_t chunk = q % c->chunks, o = q / c->chunks;
    for (int k = c->nouter - 1; k >= 0; k--) {
        int d = c->outer[k];
        int64_t x = o % g->size[d];
        o /= g->size[d];
        sp.t += x * g->t_stride[d];
        sp.i += x * g->i_stride[d];
        sp.s += x * g->s_stride[d];
        sp.c += x * g->c_stride[d];
    }
    sp.x0 = chunk * c->run_len;
    sp.x1 = c->run < 0 ? 1 : sp.x0 + c->run_len;
    if (c->run >= 0 && sp.x1 > g->size[c->run]) {
        sp.x1 = g->size[c->run];
    }
    return sp;
}

/* The passes over a run of n elements of one row of t (stride es) that
 * one index step reaches: n > 1 when the index is the same along the run
 * (an expanded index), so that the loop runs over whole rows (and
 * vectorises when they are dense); else one element.  t and src never
 * share memory (the op copies src first). */
#define DEFINE_ROWS(T, SFX)                                                 \
    static inline AMPC_ALWAYS_INLINE void                                   \
    fill_##SFX(T *restrict e, int64_t es, int64_t n, T first)               \
    {                                                                       \
        for (int64_t x = 0; x < n; x++) {                                   \
            e[x * es] = first;                                              \
        }                                                                   \
    }                                                                       \
                                                                            \
    static inline AMPC_ALWAYS_INLINE void                                   \
    combine_##SFX(T *restrict e, int64_t es, const T *restrict v,           \
                  int64_t vs, int64_t n, ampc_scatter_op OP)                \
    {                                                                       \
        if (es == 1 && vs == 1) {                                           \
            for (int64_t x = 0; x < n; x++) {                               \
                e[x] = ampc_scatter_combine_##SFX(OP, e[x], v[x]);          \
            }                                                               \
            return;                                                         \
        }                                                                   \
        for (int64_t x = 0; x < n; x++) {                                   \
            e[x * es] = ampc_scatter_combine_##SFX(OP, e[x * es],           \
                                                   v[x * vs]);              \
        }                                                                   \
    }                                                                       \
                                                                            \
    /* mean: each element with a count divided by it (plus one for self's  \
     * value), the count zeroed so that a repeat divides once */            \
    static inline AMPC_ALWAYS_INLINE void                                   \
    divide_##SFX(T *restrict e, int64_t es, int64_t *restrict cnt,          \
                 int64_t cs, int64_t n, int64_t self)                       \
    {                                                                       \
        for (int64_t x = 0; x < n; x++) {                                   \
            int64_t k = cnt[x * cs];                                        \
            if (k != 0) {                                                   \
                e[x * es] = ampc_scatter_mean_##SFX(e[x * es], k + self);   \
                cnt[x * cs] = 0;                                            \
            }                                                               \
        }                                                                   \
    }

static inline AMPC_ALWAYS_INLINE void
count_run(int64_t *restrict cnt, int64_t cs, int64_t n)
{
    for (int64_t x = 0; x < n; x++) {
        cnt[x * cs]++;
    }
}

DEFINE_ROWS(float, f32)
DEFINE_ROWS(int64_t, i64)

/* BODY for each run that the index steps of an item reach, with j (the
 * step), p (the position along dim), x (the run's first element) and n
 * (its length) set.  n is the constant 1 unless the index is the same
 * along the run, so that the one-element loops fold away: a random update
 * is then a handful of instructions, and many of them (each a likely cache
 * miss) fit in flight at once. */
#define FOR_RUNS(BODY)                                                      \
    if (run < 0) {                                                          \
        for (int64_t j = 0; j < len; j++) {                                 \
            const int64_t x = 0, n = 1, p = ix[j * id];                     \
            BODY                                                            \
        }                                                                   \
    }                                                                       \
    else if (ir == 0) {                                                     \
        for (int64_t j = 0; j < len; j++) {                                 \
            const int64_t x = sp.x0, n = sp.x1 - sp.x0, p = ix[j * id];     \
            BODY                                                            \
        }                                                                   \
    }                                                                       \
    else {                                                                  \
        for (int64_t j = 0; j < len; j++) {                                 \
            const int64_t n = 1;                                            \
            for (int64_t x = sp.x0; x < sp.x1; x++) {                       \
                const int64_t p = ix[j * id + x * ir];                      \
                BODY                                                        \
            }                                                               \
        }                                                                   \
    }

#define FILL_BODY(SFX) fill_##SFX(t + p * td + x * tr, tr, n, first);

#define COMBINE_BODY(SFX)                                                   \
    combine_##SFX(t + p * td + x * tr, tr, s + j * sd + x * sr, sr, n, OP); \
    if (OP == AMPC_SCATTER_MEAN) {                                          \
        count_run(cnt + p * cd + x * cr, cr, n);                            \
    }

#define DIVIDE_BODY(SFX)                                                    \
    divide_##SFX(t + p * td + x * tr, tr, cnt + p * cd + x * cr, cr, n,     \
                 g->include_self);

/* item_<T>(c, q, OP): the passes of item q for elements of type T; always
 * inlined with a constant OP, so each op gets its own loops.  The first
 * pass (include_self false) starts the scattered elements from the
 * identity, the second combines, the third (mean) divides. */
#define DEFINE_ITEM(T, SFX)                                                 \
    static inline AMPC_ALWAYS_INLINE void                                   \
    item_##SFX(const scatter_ctx *c, int64_t q, ampc_scatter_op OP)         \
    {                                                                       \
        const ampc_scatter_geom *g = c->g;                                  \
        item_span sp = span_of(c, q);                                       \
        T *t = (T *)c->t + sp.t;                                            \
        const T *s = (const T *)c->src + sp.s;                              \
        const int64_t *ix = c->idx + sp.i;                                  \
        int64_t *cnt = OP == AMPC_SCATTER_MEAN ? c->cnt + sp.c : NULL;      \
        int dim = g->dim, run = c->run;                                     \
        int64_t len = g->size[dim];                                         \
        int64_t td = g->t_stride[dim], id = g->i_stride[dim];               \
        int64_t sd = g->s_stride[dim], cd = g->c_stride[dim];               \
        int64_t tr = run < 0 ? 0 : g->t_stride[run];                        \
        int64_t ir = run < 0 ? 0 : g->i_stride[run];                        \
        int64_t sr = run < 0 ? 0 : g->s_stride[run];                        \
        int64_t cr = run < 0 ? 0 : g->c_stride[run];                        \
        if (!g->include_self) {                                             \
            T first = ampc_scatter_identity_##SFX(OP);                      \
            FOR_RUNS(FILL_BODY(SFX))                                        \
        }                                                                   \
        FOR_RUNS(COMBINE_BODY(SFX))                                         \
        if (OP == AMPC_SCATTER_MEAN) {                                      \
            FOR_RUNS(DIVIDE_BODY(SFX))                                      \
        }                                                                   \
    }

DEFINE_ITEM(float, f32)
DEFINE_ITEM(int64_t, i64)

/* SWITCH_OP(op, CALL, SFX): CALL(SFX, OP) with OP the constant of op, so
 * that each op's loops are compiled on their own. */
#define SWITCH_OP(op, CALL, SFX)                                            \
    switch (op) {                                                           \
    case AMPC_SCATTER_PROD: CALL(SFX, AMPC_SCATTER_PROD); break;            \
    case AMPC_SCATTER_MEAN: CALL(SFX, AMPC_SCATTER_MEAN); break;            \
    case AMPC_SCATTER_AMAX: CALL(SFX, AMPC_SCATTER_AMAX); break;            \
    case AMPC_SCATTER_AMIN: CALL(SFX, AMPC_SCATTER_AMIN); break;            \
    default: CALL(SFX, AMPC_SCATTER_SUM); break;                            \
    }

#define ITEMS(SFX, OP)                                                      \
    for (int64_t q = b; q < e; q++) {                                       \
        item_##SFX(c, q, OP);                                               \
    }

/* range_<T>: items [b, e) */
#define DEFINE_RANGE(SFX)                                                   \
    static void                                                             \
    range_##SFX(void *ctx, int64_t b, int64_t e)                            \
    {                                                                       \
        const scatter_ctx *c = ctx;                                         \
        SWITCH_OP(c->op, ITEMS, SFX)                                        \
    }

DEFINE_RANGE(f32)
DEFINE_RANGE(i64)

// ----------------------------------------------------------------------------

static int64_t
abs_i64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* Picks the run dim and lists the outer dims (kept in order, so that
 * consecutive items are neighbours in memory). */
static void
plan_dims(scatter_ctx *c)
{
    const ampc_scatter_geom *g = c->g;
    int run = -1;
    for (int d = 0; d < g->ndim; d++) {
        if (d != g->dim && g->size[d] > 1 &&
            (run < 0 ||
             abs_i64(g->t_stride[d]) <= abs_i64(g->t_stride[run]))) {
            run = d;
        }
    }
    if (run >= 0 && g->size[g->dim] > 1 &&
        abs_i64(g->t_stride[run]) >= abs_i64(g->t_stride[g->dim])) {
        run = -1;               /* dim is closer: walk each slice along it */
    }
    c->run = run;
    c->nouter = 0;
    for (int d = 0; d < g->ndim; d++) {
        if (d != g->dim && d != run) {
            c->outer[c->nouter++] = d;
        }
    }
}

void
ampc_scatter_reduce_ref(const ampc_scatter_geom *g, ampc_dtype dt,
                        ampc_scatter_op op, void *t, const int64_t *idx,
                        const void *src, int64_t *count)
{
    scatter_ctx c = {.g = g, .t = t, .idx = idx, .src = src, .cnt = count,
                     .op = op};
    plan_dims(&c);
    int64_t slices = 1;
    for (int k = 0; k < c.nouter; k++) {
        slices *= g->size[c.outer[k]];
    }
    int64_t run_size = c.run < 0 ? 1 : g->size[c.run];
    int64_t total = slices * run_size * g->size[g->dim];
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    c.run_len = run_size < SCATTER_RUN ? run_size : SCATTER_RUN;
    if (total >= 2 * SCATTER_GRAIN &&
        slices * ((run_size + c.run_len - 1) / c.run_len) < threads) {
        /* few slices: cut the runs finer (down to a cache line) */
        int64_t want = (threads + slices - 1) / slices;
        int64_t piece = (run_size + want - 1) / want;
        c.run_len = piece >= SCATTER_LINE ? piece
                    : (run_size < SCATTER_LINE ? run_size : SCATTER_LINE);
    }
    c.chunks = (run_size + c.run_len - 1) / c.run_len;
    /* updates per item (> 0: the caller skips an empty index) */
    int64_t work = g->size[g->dim] * c.run_len;
    int64_t grain = work >= SCATTER_GRAIN ? 1 : SCATTER_GRAIN / work;
    ampc_parallel_for(slices * c.chunks, grain,
                      dt == AMPC_INT64 ? range_i64 : range_f32, &c);
}
