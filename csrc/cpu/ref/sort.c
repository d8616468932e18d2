/* sort.c - sort, argsort and topk on the CPU (kernels.h ampc_sort_fn,
 * ampc_topk_fn): each line along the dim of a contiguous (outer, n, inner)
 * array, in sort_math.h's order (NaN largest, -0.0 equal to 0.0).
 *
 * A line becomes an array of items.  For the dtypes whose key fits in 32
 * bits (float32, float16, bfloat16, bool) an item is one uint64_t, the key
 * above the element's position: items are then all distinct and their
 * unsigned order is the stable order, so a least-significant-digit radix
 * sort over the key's bytes only (a digit that every item shares is
 * skipped) sorts a line stably.  int64 keys need all 64 bits: their items
 * are (key, position) pairs, radix-sorted the same way.  Short lines take
 * an insertion sort.  Values are then read from the input at the sorted
 * positions, so they keep their exact bits (NaN payloads, -0.0).
 *
 * topk never sorts a whole long line: for a small k one pass keeps the k
 * smallest items seen in a sorted buffer; for a larger k a radix select
 * (a histogram of one key byte at a time) picks the k smallest, and only
 * those k are sorted.  int64 lines are sorted whole.
 *
 * Threads take whole lines (ampc_parallel_for); each line's result is the
 * same on any thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "sort_math.h"

// ----------------------------------------------------------------------------
// CPU reference

/* lines up to this long: insertion sort */
#define SORT_SHORT 24
/* topk with k up to this: the one-pass buffer */
#define TOPK_BUFFER 32
/* elements of work worth a thread */
#define SORT_GRAIN 16384

typedef struct {
    uint64_t key;
    int64_t idx;
} sort_pair;

typedef struct {
    ampc_dtype dt;
    int descending;
    int64_t n, inner, k;        /* k: the output's length along the dim */
    const char *x;
    char *values;               /* NULL: indices only */
    int64_t *indices;
    int topk;
    int failed;
} sort_ctx;

// ----------------------------------------------------------------------------
// items

/* items[j] = key(row[j]) << 32 | j for a contiguous line of n elements */
static void
build_items(ampc_dtype dt, int desc, const void *row, int64_t n,
            uint64_t *items)
{
    switch (dt) {
    case AMPC_FLOAT32: {
        const float *p = row;
        for (int64_t j = 0; j < n; j++) {
            items[j] = (uint64_t)ampc_sort_key_f32(p[j], desc) << 32 |
                       (uint64_t)j;
        }
        break;
    }
    case AMPC_FLOAT16:
    case AMPC_BFLOAT16: {
        const uint16_t *p = row;
        uint32_t nan_above = dt == AMPC_FLOAT16 ? 0x7c00u : 0x7f80u;
        for (int64_t j = 0; j < n; j++) {
            items[j] = (uint64_t)ampc_sort_key_16(p[j], nan_above, desc)
                           << 32 |
                       (uint64_t)j;
        }
        break;
    }
    default: {
        const uint8_t *p = row;
        for (int64_t j = 0; j < n; j++) {
            items[j] = (uint64_t)ampc_sort_key_bool(p[j], desc) << 32 |
                       (uint64_t)j;
        }
        break;
    }
    }
}

static void
insertion_sort_u64(uint64_t *a, int64_t n)
{
    for (int64_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        int64_t j = i - 1;
        while (j >= 0 && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

/* Sorts a (n items) by the bytes [lo, lo + nbytes) of each item, least
 * significant first, through tmp; returns the buffer holding the result (a
 * or tmp). */
static uint64_t *
radix_sort_u64(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int nbytes)
{
    uint32_t hist[8][256];
    memset(hist, 0, sizeof(hist[0]) * (size_t)nbytes);
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = a[i] >> (8 * lo);
        for (int b = 0; b < nbytes; b++) {
            hist[b][(v >> (8 * b)) & 0xff]++;
        }
    }
    uint64_t *src = a, *dst = tmp;
    for (int b = 0; b < nbytes; b++) {
        int shift = 8 * (lo + b);
        if (hist[b][(src[0] >> shift) & 0xff] == (uint32_t)n) {
            continue;               /* every item has this digit */
        }
        uint32_t start[256], sum = 0;
        for (int d = 0; d < 256; d++) {
            start[d] = sum;
            sum += hist[b][d];
        }
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = src[i];
            dst[start[(v >> shift) & 0xff]++] = v;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

static sort_pair *
radix_sort_pairs(sort_pair *a, sort_pair *tmp, int64_t n)
{
    uint32_t hist[8][256];
    memset(hist, 0, sizeof(hist));
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = a[i].key;
        for (int b = 0; b < 8; b++) {
            hist[b][(v >> (8 * b)) & 0xff]++;
        }
    }
    sort_pair *src = a, *dst = tmp;
    for (int b = 0; b < 8; b++) {
        int shift = 8 * b;
        if (hist[b][(src[0].key >> shift) & 0xff] == (uint32_t)n) {
            continue;
        }
        uint32_t start[256], sum = 0;
        for (int d = 0; d < 256; d++) {
            start[d] = sum;
            sum += hist[b][d];
        }
        for (int64_t i = 0; i < n; i++) {
            sort_pair v = src[i];
            dst[start[(v.key >> shift) & 0xff]++] = v;
        }
        sort_pair *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* Radix select: the k smallest of the n items of src (1 <= k < n, items in
 * position order) copied to out[0, k), in position order, through cand (n
 * free items).  A histogram of the key's highest byte finds the digit d of
 * the k-th smallest: items with a smaller digit are all in, those with
 * digit d are candidates, and the candidates go on to the next byte.  When
 * the key bytes run out the candidates are equal, and the first ones (in
 * position order, which every pass keeps) are taken.  Each pass writes
 * every item to both outputs and advances one count (no branch to
 * mispredict). */
static void
radix_select(const uint64_t *src, uint64_t *cand, uint64_t *out, int64_t n,
             int64_t k, int kbytes)
{
    int64_t taken = 0;
    for (int b = kbytes - 1; b >= 0 && k > 0; b--) {
        int shift = 32 + 8 * b;
        uint32_t hist[256] = {0};
        for (int64_t i = 0; i < n; i++) {
            hist[(src[i] >> shift) & 0xff]++;
        }
        int d = 0;
        int64_t below = 0;
        while (below + hist[d] < k) {
            below += hist[d++];
        }
        int64_t c_out = taken, c_cand = 0;
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = src[i];
            int digit = (int)((v >> shift) & 0xff);
            out[c_out] = v;
            c_out += digit < d;
            cand[c_cand] = v;
            c_cand += digit == d;
        }
        taken = c_out;
        k -= below;
        n = c_cand;
        src = cand;
        if (k == n) {
            break;
        }
    }
    memcpy(out + taken, src, (size_t)k * sizeof(uint64_t));
}

/* The k smallest of n items (in position order), sorted, in a buffer
 * among items, tmp and spare (each n items) that this returns. */
static uint64_t *
smallest_sorted(uint64_t *items, uint64_t *tmp, uint64_t *spare, int64_t n,
                int64_t k, int kbytes)
{
    if (k <= TOPK_BUFFER && k < n) {
        /* one pass: buf = tmp[0, k) holds the k smallest seen, sorted */
        uint64_t *buf = tmp;
        memcpy(buf, items, (size_t)k * sizeof(uint64_t));
        insertion_sort_u64(buf, k);
        uint64_t worst = buf[k - 1];
        for (int64_t j = k; j < n; j++) {
            uint64_t v = items[j];
            if (v < worst) {
                int64_t i = k - 2;
                while (i >= 0 && buf[i] > v) {
                    buf[i + 1] = buf[i];
                    i--;
                }
                buf[i + 1] = v;
                worst = buf[k - 1];
            }
        }
        return buf;
    }
    if (k < n) {
        /* the k, in position order, then sorted by key (stable) */
        radix_select(items, tmp, spare, n, k, kbytes);
        tmp = items;
        items = spare;
        n = k;
    }
    if (n <= SORT_SHORT) {
        insertion_sort_u64(items, n);
        return items;
    }
    return radix_sort_u64(items, tmp, n, 4, kbytes);
}

// ----------------------------------------------------------------------------
// lines

/* out[j * st] = row[pos[j]] for j < m, es-byte elements */
static void
gather_values(size_t es, const char *row, const int64_t *pos,
              int64_t st, int64_t m, char *out)
{
    switch (es) {
    case 4:
        for (int64_t j = 0; j < m; j++) {
            ((uint32_t *)out)[j * st] = ((const uint32_t *)row)[pos[j]];
        }
        break;
    case 2:
        for (int64_t j = 0; j < m; j++) {
            ((uint16_t *)out)[j * st] = ((const uint16_t *)row)[pos[j]];
        }
        break;
    case 8:
        for (int64_t j = 0; j < m; j++) {
            ((uint64_t *)out)[j * st] = ((const uint64_t *)row)[pos[j]];
        }
        break;
    default:
        for (int64_t j = 0; j < m; j++) {
            out[j * st] = row[pos[j]];
        }
        break;
    }
}

/* The scratch of one thread: items, their radix buffer, the line (when it
 * is strided) and the sorted positions. */
typedef struct {
    void *items, *tmp;
    char *row;
    int64_t *pos;
} sort_scratch;

static int
scratch_alloc(sort_scratch *s, const sort_ctx *c)
{
    size_t item = c->dt == AMPC_INT64 ? sizeof(sort_pair) : sizeof(uint64_t);
    size_t n = (size_t)c->n;
    s->items = malloc(n * item);
    s->tmp = malloc(n * item);
    s->pos = malloc(n * sizeof(int64_t));
    s->row = c->inner > 1 ? malloc(n * ampc_dtype_size[c->dt]) : NULL;
    return s->items == NULL || s->tmp == NULL || s->pos == NULL ||
           (c->inner > 1 && s->row == NULL);
}

static void
scratch_free(sort_scratch *s)
{
    free(s->items);
    free(s->tmp);
    free(s->pos);
    free(s->row);
}

/* The contiguous line at line index r (outer * inner of them). */
static const char *
line_of(const sort_ctx *c, sort_scratch *s, int64_t r)
{
    size_t es = ampc_dtype_size[c->dt];
    int64_t o = r / c->inner, i = r % c->inner;
    const char *p = c->x + (size_t)(o * c->n * c->inner + i) * es;
    if (c->inner == 1) {
        return p;
    }
    int64_t st = c->inner;
    for (int64_t j = 0; j < c->n; j++) {
        memcpy(s->row + (size_t)j * es, p + (size_t)(j * st) * es, es);
    }
    return s->row;
}

/* The first m sorted positions of line r into s->pos. */
static void
sort_line(const sort_ctx *c, sort_scratch *s, const char *row, int64_t m)
{
    int64_t n = c->n;
    if (c->dt == AMPC_INT64) {
        const int64_t *p = (const int64_t *)row;
        sort_pair *a = s->items;
        for (int64_t j = 0; j < n; j++) {
            a[j].key = ampc_sort_key_i64(p[j], c->descending);
            a[j].idx = j;
        }
        sort_pair *r;
        if (n <= SORT_SHORT) {
            for (int64_t i = 1; i < n; i++) {
                sort_pair v = a[i];
                int64_t j = i - 1;
                while (j >= 0 && a[j].key > v.key) {
                    a[j + 1] = a[j];
                    j--;
                }
                a[j + 1] = v;
            }
            r = a;
        }
        else {
            r = radix_sort_pairs(a, s->tmp, n);
        }
        for (int64_t j = 0; j < m; j++) {
            s->pos[j] = r[j].idx;
        }
        return;
    }
    uint64_t *items = s->items;
    build_items(c->dt, c->descending, row, n, items);
    int kbytes = ampc_sort_key_bits(c->dt) / 8;
    uint64_t *r;
    if (c->topk) {
        /* pos (int64_t, n of them) doubles as the third buffer */
        r = smallest_sorted(items, s->tmp, (uint64_t *)s->pos, n, m, kbytes);
    }
    else if (n <= SORT_SHORT) {
        insertion_sort_u64(items, n);
        r = items;
    }
    else {
        r = radix_sort_u64(items, s->tmp, n, 4, kbytes);
    }
    for (int64_t j = 0; j < m; j++) {
        s->pos[j] = (int64_t)(r[j] & 0xffffffffu);
    }
}

static void
sort_range(void *ctx, int64_t begin, int64_t end)
{
    sort_ctx *c = ctx;
    sort_scratch s;
    if (scratch_alloc(&s, c)) {
        scratch_free(&s);
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    size_t es = ampc_dtype_size[c->dt];
    int64_t m = c->k, st = c->inner;
    for (int64_t r = begin; r < end; r++) {
        const char *row = line_of(c, &s, r);
        sort_line(c, &s, row, m);
        int64_t o = r / c->inner, i = r % c->inner;
        int64_t out0 = o * m * c->inner + i;
        int64_t *ix = c->indices + out0;
        for (int64_t j = 0; j < m; j++) {
            ix[j * st] = s.pos[j];
        }
        if (c->values != NULL) {
            gather_values(es, row, s.pos, st, m,
                          c->values + (size_t)out0 * es);
        }
    }
    scratch_free(&s);
}

static int
run(sort_ctx *c, int64_t outer)
{
    int64_t lines = outer * c->inner;
    if (lines == 0 || c->n == 0 || c->k == 0) {
        return 0;
    }
    int64_t grain = SORT_GRAIN / c->n > 1 ? SORT_GRAIN / c->n : 1;
    ampc_parallel_for(lines, grain, sort_range, c);
    return c->failed ? -1 : 0;
}

int
ampc_sort_ref(ampc_dtype dt, int descending, int64_t outer, int64_t n,
              int64_t inner, const void *x, void *values, int64_t *indices)
{
    sort_ctx c = {dt, descending, n, inner, n, x, values, indices, 0, 0};
    return run(&c, outer);
}

int
ampc_topk_ref(ampc_dtype dt, int largest, int64_t outer, int64_t n,
              int64_t inner, int64_t k, const void *x, void *values,
              int64_t *indices)
{
    sort_ctx c = {dt, largest, n, inner, k, x, values, indices, 1, 0};
    return run(&c, outer);
}
