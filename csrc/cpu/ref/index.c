/* index.c - advanced indexing (gather and put at rows of int64 indices) and
 * nonzero, for any dtype: elements are moved by their byte size, and only
 * put's accumulation computes.  The shapes are kernels.h's ampc_index_geom.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/nn_loops.h"

#define NONZERO_CHUNK 65536         /* mask bytes per nonzero task */
/* Elements worth a thread: each may be a cache miss (a scattered read or
 * write), so far fewer than a streaming kernel's AMPC_NN_GRAIN. */
#define INDEX_GRAIN 2048

// ----------------------------------------------------------------------------
// CPU reference

/* ES_SWITCH(es, code): `code` (which uses ES) with ES a constant of the
 * element size, so that each memcpy of ES bytes becomes one move. */
#define ES_SWITCH(es, ...)                                                  \
    do {                                                                    \
        switch (es) {                                                       \
        case 1: { enum { ES = 1 }; __VA_ARGS__ break; }                     \
        case 2: { enum { ES = 2 }; __VA_ARGS__ break; }                     \
        case 4: { enum { ES = 4 }; __VA_ARGS__ break; }                     \
        default: { enum { ES = 8 }; __VA_ARGS__ break; }                    \
        }                                                                   \
    } while (0)

typedef struct {
    const ampc_index_geom *g;
    size_t es;
    ampc_dtype dt;
    int op;                         /* GATHER, PUT or ADD */
    char *t;
    char *v;
    const int64_t *off;             /* t's element offset of each tuple */
} index_ctx;

enum { GATHER, PUT, ADD };

/* The offsets in t and v of element r of the flattened rest dims. */
static inline void
rest_offsets(const ampc_index_geom *g, int64_t r, int64_t *to, int64_t *vo)
{
    int64_t a = 0, b = 0;
    for (int d = g->nrest - 1; d >= 0; d--) {
        int64_t c = r % g->rest[d];
        r /= g->rest[d];
        a += c * g->t_rest_stride[d];
        b += c * g->v_rest_stride[d];
    }
    *to = a;
    *vo = b;
}

/* The op on one element: t at to, v at vo (element offsets). */
static inline __attribute__((always_inline)) void
elem(const index_ctx *c, int64_t to, int64_t vo, size_t es)
{
    char *t = c->t + to * (int64_t)es, *v = c->v + vo * (int64_t)es;
    if (c->op == GATHER) {
        memcpy(v, t, es);
    }
    else if (c->op == PUT) {
        memcpy(t, v, es);
    }
    else if (c->dt == AMPC_FLOAT32) {
        *(float *)t += *(const float *)v;
    }
    else {
        /* int64 wraps, as in PyTorch: add as unsigned (no overflow UB) */
        *(uint64_t *)t += *(const uint64_t *)v;
    }
}

/* The op on rest elements [b, e) of tuple j, run by run. */
static inline __attribute__((always_inline)) void
rest_range(const index_ctx *c, int64_t j, int64_t b, int64_t e, size_t es)
{
    const ampc_index_geom *g = c->g;
    int64_t tj = c->off[j], vj = j * g->v_stride;
    if (g->nrest == 0) {
        elem(c, tj, vj, es);
        return;
    }
    int last = g->nrest - 1;
    int64_t ts = g->t_rest_stride[last], vs = g->v_rest_stride[last];
    for (int64_t r = b; r < e;) {
        int64_t to, vo, at = r % g->rest[last];
        int64_t len = ampc_nn_min(g->rest[last] - at, e - r);
        rest_offsets(g, r, &to, &vo);
        to += tj;
        vo += vj;
        if (c->op != ADD && ts == 1 && vs == 1) {
            char *t = c->t + to * (int64_t)es, *v = c->v + vo * (int64_t)es;
            memmove(c->op == GATHER ? v : t, c->op == GATHER ? t : v,
                    (size_t)len * es);
        }
        else {
            for (int64_t i = 0; i < len; i++) {
                elem(c, to + i * ts, vo + i * vs, es);
            }
        }
        r += len;
    }
}

/* Tuples [b, e), each with all of the rest (gather and put: a repeated
 * tuple's writes race, and which lands is unspecified, as in PyTorch). */
static void
by_tuple(void *ctx, int64_t b, int64_t e)
{
    const index_ctx *c = ctx;
    ES_SWITCH(c->es, for (int64_t j = b; j < e; j++) {
        rest_range(c, j, 0, c->g->rest_numel, ES);
    });
}

/* Rest elements [b, e), each with every tuple in order of j: tasks touch
 * disjoint elements of t, so adds need no atomics and keep their order. */
static void
by_rest_chunk(void *ctx, int64_t b, int64_t e)
{
    const index_ctx *c = ctx;
    ES_SWITCH(c->es, for (int64_t j = 0; j < c->g->n; j++) {
        rest_range(c, j, b, e, ES);
    });
}

/* Rest elements [b, e) one at a time, each with every tuple: for a rest
 * whose rows are strided in t (x[:, cols]), where a tuple at a time would
 * stride through all of t once per tuple. */
static void
by_rest_element(void *ctx, int64_t b, int64_t e)
{
    const index_ctx *c = ctx;
    const ampc_index_geom *g = c->g;
    ES_SWITCH(c->es, for (int64_t r = b; r < e; r++) {
        int64_t to, vo;
        rest_offsets(g, r, &to, &vo);
        for (int64_t j = 0; j < g->n; j++) {
            elem(c, to + c->off[j], vo + j * g->v_stride, ES);
        }
    });
}

static void
offsets_range(void *ctx, int64_t b, int64_t e)
{
    index_ctx *c = ctx;
    const ampc_index_geom *g = c->g;
    const int64_t *idx = (const int64_t *)c->v;     /* (see run) */
    int64_t *off = (int64_t *)c->off;
    for (int64_t j = b; j < e; j++) {
        int64_t o = 0;
        for (int d = 0; d < g->k; d++) {
            int64_t i = idx[d * g->n + j];
            o += (i < 0 ? i + g->size[d] : i) * g->stride[d];
        }
        off[j] = o;
    }
}

/* Items per task when each item moves `work` scattered elements. */
static int64_t
index_grain(int64_t work)
{
    return work >= INDEX_GRAIN ? 1 : INDEX_GRAIN / (work > 0 ? work : 1);
}

/* Computes each tuple's offset in t, then runs op in the order that suits
 * the layout.  0, or -1 when out of memory. */
static int
run(index_ctx *c, const int64_t *idx)
{
    const ampc_index_geom *g = c->g;
    int64_t *off = malloc((size_t)(g->n > 0 ? g->n : 1) * sizeof(int64_t));
    if (off == NULL) {
        return -1;
    }
    index_ctx oc = {.g = g, .v = (char *)idx, .off = off};
    ampc_parallel_for(g->n, AMPC_NN_GRAIN / 4, offsets_range, &oc);
    c->off = off;
    int64_t work = g->n * g->rest_numel;
    /* adds, and ordered puts, run every tuple in order per element */
    int in_order = c->op == ADD || (c->op == PUT && g->ordered);
    if (g->nrest > 0 && g->t_rest_stride[g->nrest - 1] != 1 &&
        g->n < g->rest_numel) {
        ampc_parallel_for(g->rest_numel, index_grain(g->n),
                          by_rest_element, c);
    }
    else if (in_order && g->nrest > 0 && work >= AMPC_NN_GRAIN) {
        ampc_parallel_for(g->rest_numel, ampc_nn_grain(g->n), by_rest_chunk,
                          c);
    }
    else if (in_order) {
        by_rest_chunk(c, 0, g->rest_numel);
    }
    else {
        ampc_parallel_for(g->n, index_grain(g->rest_numel), by_tuple, c);
    }
    free(off);
    return 0;
}

int
ampc_index_gather_ref(const ampc_index_geom *g, size_t es, const void *t,
                      const int64_t *idx, void *v)
{
    index_ctx c = {.g = g, .es = es, .op = GATHER, .t = (char *)t,
                   .v = v};
    return run(&c, idx);
}

int
ampc_index_put_ref(const ampc_index_geom *g, ampc_dtype dt, int accumulate,
                   void *t, const int64_t *idx, const void *v)
{
    index_ctx c = {.g = g, .es = ampc_dtype_size[dt], .dt = dt,
                   .op = accumulate ? ADD : PUT, .t = t, .v = (char *)v};
    return run(&c, idx);
}

// ----------------------------------------------------------------------------
// nonzero: chunk counts, their prefix sums, then each chunk writes its own

typedef struct {
    const uint8_t *mask;
    int64_t n;
    int64_t *counts;                /* per chunk; then the chunk's start */
    int ndim;
    const int64_t *shape;
    int64_t *out;
} nonzero_ctx;

static void
count_range(void *ctx, int64_t b, int64_t e)
{
    nonzero_ctx *c = ctx;
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * NONZERO_CHUNK;
        int64_t hi = ampc_nn_min(lo + NONZERO_CHUNK, c->n), s = 0;
        for (int64_t i = lo; i < hi; i++) {
            s += c->mask[i] != 0;
        }
        c->counts[k] = s;
    }
}

static int64_t
chunk_counts(nonzero_ctx *c, int64_t chunks)
{
    ampc_parallel_for(chunks, 1, count_range, c);
    int64_t total = 0;
    for (int64_t k = 0; k < chunks; k++) {
        int64_t s = c->counts[k];
        c->counts[k] = total;
        total += s;
    }
    return total;
}

int64_t
ampc_count_true_ref(int64_t n, const uint8_t *mask)
{
    int64_t chunks = (n + NONZERO_CHUNK - 1) / NONZERO_CHUNK, total;
    int64_t one;
    nonzero_ctx c = {.mask = mask, .n = n};
    c.counts = chunks <= 1 ? &one : malloc((size_t)chunks * sizeof(int64_t));
    if (c.counts == NULL) {
        /* no memory for the split: count in one pass */
        total = 0;
        for (int64_t i = 0; i < n; i++) {
            total += mask[i] != 0;
        }
        return total;
    }
    total = chunks == 0 ? 0 : chunk_counts(&c, chunks);
    if (c.counts != &one) {
        free(c.counts);
    }
    return total;
}

/* Chunks [b, e): each writes its true elements' coordinates from its
 * offset on, a row of the last dim at a time (the other coordinates are
 * fixed along a row). */
static void
write_range(void *ctx, int64_t b, int64_t e)
{
    nonzero_ctx *c = ctx;
    int nd = c->ndim;
    int64_t row = c->shape[nd - 1];
    size_t lead = (size_t)(nd - 1) * sizeof(int64_t);
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * NONZERO_CHUNK;
        int64_t hi = ampc_nn_min(lo + NONZERO_CHUNK, c->n);
        int64_t *o = c->out + c->counts[k] * nd;
        int64_t coord[AMPC_MAX_DIMS], f = lo;
        for (int d = nd - 1; d >= 0; d--) {
            coord[d] = f % c->shape[d];
            f /= c->shape[d];
        }
        for (int64_t i = lo; i < hi;) {
            int64_t end = ampc_nn_min(hi, i + row - coord[nd - 1]);
            int64_t to_last = coord[nd - 1] - i;
            for (; i < end; i++) {
                if (c->mask[i]) {
                    memcpy(o, coord, lead);
                    o[nd - 1] = i + to_last;
                    o += nd;
                }
            }
            coord[nd - 1] = 0;
            for (int d = nd - 2; d >= 0 && ++coord[d] == c->shape[d]; d--) {
                coord[d] = 0;
            }
        }
    }
}

int
ampc_nonzero_ref(int ndim, const int64_t *shape, int64_t n,
                 const uint8_t *mask, int64_t *out)
{
    int64_t chunks = (n + NONZERO_CHUNK - 1) / NONZERO_CHUNK;
    int64_t one;
    nonzero_ctx c = {.mask = mask, .n = n, .ndim = ndim, .shape = shape,
                     .out = out};
    if (chunks == 0 || ndim == 0) {
        return 0;                   /* nothing, or (count, 0) */
    }
    c.counts = chunks == 1 ? &one : malloc((size_t)chunks * sizeof(int64_t));
    if (c.counts == NULL) {
        return -1;
    }
    chunk_counts(&c, chunks);
    ampc_parallel_for(chunks, 1, write_range, &c);
    if (c.counts != &one) {
        free(c.counts);
    }
    return 0;
}
