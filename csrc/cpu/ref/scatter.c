/* scatter.c - scatter_reduce on the CPU (kernels.h ampc_scatter_reduce_fn):
 * each index element names the position along dim of the element of t
 * that its src value is combined into (scatter_math.h's rules).
 *
 * An element of t is reached only from the index positions that share its
 * coordinates outside dim (its slice), so threads take whole slices; when
 * there are fewer slices than threads, each slice is also split into ranges
 * of positions along dim, every task scanning the slice's indices and
 * applying those in its range.  Either way no two threads write one
 * element, and each element receives its values in index order, as a
 * single thread would give them.
 */
#include <omp.h>

#include "cpu/cpu.h"
#include "scatter_math.h"

/* Updates worth a task: each may miss the cache, so fewer than a streaming
 * kernel's (as index.c's INDEX_GRAIN). */
#define SCATTER_GRAIN 2048
/* Elements of the run dim (below) per work item. */
#define SCATTER_RUN 512

/* The work is a list of items: an item is one value of the "outer" dims
 * (those other than dim and the run dim), a chunk of the run dim, and a
 * part (a range of positions along dim).  The run dim is the other dim
 * along which t's elements lie closest; when it is closer than dim, an
 * item walks each index step along a run of it, so that neighbouring
 * elements of t are updated together (scatter along dim 0 of a row-major
 * tensor updates row after row); else an item is one slice, walked along
 * dim. */
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
    int64_t parts;                  /* ranges along dim per slice */
} scatter_ctx;

/* Where item q starts in t, idx, src and cnt, its run [x0, x1) and its
 * range [lo, hi) of positions along dim. */
typedef struct {
    int64_t t, i, s, c;
    int64_t x0, x1, lo, hi;
} item_span;

static inline AMPC_ALWAYS_INLINE item_span
span_of(const scatter_ctx *c, int64_t q)
{
    const ampc_scatter_geom *g = c->g;
    item_span sp = {0};
    int64_t part = q % c->parts, r = q / c->parts;
    int64_t chunk = r % c->chunks, o = r / c->chunks;
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
    sp.lo = g->dim_size * part / c->parts;
    sp.hi = g->dim_size * (part + 1) / c->parts;
    return sp;
}

/* item_<T>(c, q, OP): the three passes of item q for elements of type T;
 * always inlined with a constant OP, so each op gets its own loops.  The
 * first pass (include_self false) starts the scattered elements from the
 * identity, the second combines, the third (mean) divides each scattered
 * element once (its count is zeroed after). */
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
            for (int64_t j = 0; j < len; j++) {                             \
                for (int64_t x = sp.x0; x < sp.x1; x++) {                   \
                    int64_t p = ix[j * id + x * ir];                        \
                    if (p >= sp.lo && p < sp.hi) {                          \
                        t[p * td + x * tr] = first;                         \
                    }                                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
        for (int64_t j = 0; j < len; j++) {                                 \
            for (int64_t x = sp.x0; x < sp.x1; x++) {                       \
                int64_t p = ix[j * id + x * ir];                            \
                if (p >= sp.lo && p < sp.hi) {                              \
                    T *e = t + p * td + x * tr;                             \
                    *e = ampc_scatter_combine_##SFX(OP, *e,                 \
                                                    s[j * sd + x * sr]);    \
                    if (OP == AMPC_SCATTER_MEAN) {                          \
                        cnt[p * cd + x * cr]++;                             \
                    }                                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
        if (OP != AMPC_SCATTER_MEAN) {                                      \
            return;                                                         \
        }                                                                   \
        for (int64_t j = 0; j < len; j++) {                                 \
            for (int64_t x = sp.x0; x < sp.x1; x++) {                       \
                int64_t p = ix[j * id + x * ir];                            \
                int64_t *n = p >= sp.lo && p < sp.hi                        \
                                 ? cnt + p * cd + x * cr : NULL;            \
                if (n != NULL && *n != 0) {                                 \
                    T *e = t + p * td + x * tr;                             \
                    *e = ampc_scatter_mean_##SFX(*e,                        \
                                                 *n + g->include_self);     \
                    *n = 0;                                                 \
                }                                                           \
            }                                                               \
        }                                                                   \
    }

DEFINE_ITEM(float, f32)
DEFINE_ITEM(int64_t, i64)

/* range_<T>: items [b, e), the op switched once per range */
#define DEFINE_RANGE(SFX)                                                   \
    static void                                                             \
    range_##SFX(void *ctx, int64_t b, int64_t e)                            \
    {                                                                       \
        const scatter_ctx *c = ctx;                                         \
        switch (c->op) {                                                    \
        case AMPC_SCATTER_PROD:                                             \
            for (int64_t q = b; q < e; q++) {                               \
                item_##SFX(c, q, AMPC_SCATTER_PROD);                        \
            }                                                               \
            break;                                                          \
        case AMPC_SCATTER_MEAN:                                             \
            for (int64_t q = b; q < e; q++) {                               \
                item_##SFX(c, q, AMPC_SCATTER_MEAN);                        \
            }                                                               \
            break;                                                          \
        case AMPC_SCATTER_AMAX:                                             \
            for (int64_t q = b; q < e; q++) {                               \
                item_##SFX(c, q, AMPC_SCATTER_AMAX);                        \
            }                                                               \
            break;                                                          \
        case AMPC_SCATTER_AMIN:                                             \
            for (int64_t q = b; q < e; q++) {                               \
                item_##SFX(c, q, AMPC_SCATTER_AMIN);                        \
            }                                                               \
            break;                                                          \
        default:                                                            \
            for (int64_t q = b; q < e; q++) {                               \
                item_##SFX(c, q, AMPC_SCATTER_SUM);                         \
            }                                                               \
            break;                                                          \
        }                                                                   \
    }

DEFINE_RANGE(f32)
DEFINE_RANGE(i64)

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
                     .op = op, .parts = 1};
    plan_dims(&c);
    int64_t slices = 1;
    for (int k = 0; k < c.nouter; k++) {
        slices *= g->size[c.outer[k]];
    }
    int64_t run_size = c.run < 0 ? 1 : g->size[c.run];
    c.run_len = run_size < SCATTER_RUN ? run_size : SCATTER_RUN;
    c.chunks = (run_size + c.run_len - 1) / c.run_len;
    int64_t items = slices * c.chunks;
    /* updates per item (> 0: the caller skips an empty index) */
    int64_t work = g->size[g->dim] * c.run_len;
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (items < threads && items * work >= 2 * SCATTER_GRAIN) {
        /* too few items for the threads: split each along dim too */
        c.parts = (threads + items - 1) / items;
        if (c.parts > g->dim_size) {
            c.parts = g->dim_size;
        }
    }
    int64_t grain = work >= SCATTER_GRAIN ? 1 : SCATTER_GRAIN / work;
    ampc_parallel_for(items * c.parts, grain,
                      dt == AMPC_INT64 ? range_i64 : range_f32, &c);
}
