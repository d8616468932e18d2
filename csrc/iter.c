/* iter.c - element-wise iteration over broadcast, strided operands: the
 * dims are ordered by the output's strides, merged where every operand is
 * contiguous across them, and the innermost run is handed to a kernel's
 * 1-D loop.  Large iterations are split across cores with OpenMP; chunks
 * never depend on the thread count, so results are deterministic.
 */
#include "ampc.h"

/* Elements per chunk: big enough to amortise the call, small enough that a
 * chunk's operands stay in L2 and cores get balanced work. */
#define ITER_CHUNK 32768
/* Below this many elements one thread does all the work. */
#define ITER_PARALLEL_MIN 65536

int
ampc_broadcast_shapes(const char *fn, int nda, const int64_t *sa, int ndb,
                      const int64_t *sb, int *nd_out, int64_t *out)
{
    int nd = nda > ndb ? nda : ndb;
    for (int i = 0; i < nd; i++) {
        int64_t a = i < nd - nda ? 1 : sa[i - (nd - nda)];
        int64_t b = i < nd - ndb ? 1 : sb[i - (nd - ndb)];
        if (a != b && a != 1 && b != 1) {
            char x[256], y[256];
            ampc_format_shape(x, sizeof(x), nda, sa);
            ampc_format_shape(y, sizeof(y), ndb, sb);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): The size of tensor a (%lld) must match the "
                         "size of tensor b (%lld) at non-singleton dimension "
                         "%d (shapes %s and %s)",
                         fn, (long long)a, (long long)b, i, x, y);
            return -1;
        }
        out[i] = a == 1 ? b : a;
    }
    *nd_out = nd;
    return 0;
}

void
ampc_iter_init(ampc_iter *it, int nops, AmpcTensorObject **ops)
{
    AmpcTensorObject *out = ops[0];
    int nd = out->ndim;
    it->nops = nops;
    /* broadcast strides, in the output's dim order */
    int64_t strides[AMPC_ITER_MAX_OPS][AMPC_MAX_DIMS];
    for (int k = 0; k < nops; k++) {
        AmpcTensorObject *t = ops[k];
        it->data[k] = t->data;
        it->itemsize[k] = ampc_dtype_size[t->dtype];
        int lead = nd - t->ndim;
        for (int d = 0; d < nd; d++) {
            int td = d - lead;
            strides[k][d] = (td < 0 || t->shape[td] == 1) ? 0
                                                           : t->strides[td];
        }
    }
    /* order dims so the output's smallest stride is innermost (insertion
     * sort on |stride|; size-1 dims drop out) */
    int order[AMPC_MAX_DIMS], n = 0;
    for (int d = 0; d < nd; d++) {
        if (out->shape[d] == 1) {
            continue;
        }
        int j = n++;
        while (j > 0) {
            int64_t a = strides[0][order[j - 1]], b = strides[0][d];
            if ((a < 0 ? -a : a) >= (b < 0 ? -b : b)) {
                break;
            }
            order[j] = order[j - 1];
            j--;
        }
        order[j] = d;
    }
    /* order[] now runs outermost..innermost; merge neighbours that are
     * contiguous in every operand */
    int m = 0;
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (m > 0) {
            int mergeable = 1;
            for (int k = 0; k < nops && mergeable; k++) {
                mergeable = it->strides[k][m - 1] ==
                            strides[k][d] * out->shape[d];
            }
            if (mergeable) {
                it->shape[m - 1] *= out->shape[d];
                for (int k = 0; k < nops; k++) {
                    it->strides[k][m - 1] = strides[k][d];
                }
                continue;
            }
        }
        it->shape[m] = out->shape[d];
        for (int k = 0; k < nops; k++) {
            it->strides[k][m] = strides[k][d];
        }
        m++;
    }
    if (m == 0) {       /* a single element (or a 0-d tensor) */
        it->shape[0] = ampc_numel(out);
        for (int k = 0; k < nops; k++) {
            it->strides[k][0] = 0;
        }
        m = 1;
    }
    it->ndim = m;
}

/* Runs fn over elements [begin, begin + count) of the innermost dim at outer
 * position `outer` (a flat index over dims 0..ndim-2). */
static void
run_chunk(const ampc_iter *it, ampc_inner_fn fn, void *ctx, int64_t outer,
          int64_t begin, int64_t count)
{
    char *ptrs[AMPC_ITER_MAX_OPS];
    int64_t inner_strides[AMPC_ITER_MAX_OPS];
    int last = it->ndim - 1;
    for (int k = 0; k < it->nops; k++) {
        int64_t off = begin * it->strides[k][last];
        int64_t rem = outer;
        for (int d = last - 1; d >= 0; d--) {
            off += (rem % it->shape[d]) * it->strides[k][d];
            rem /= it->shape[d];
        }
        ptrs[k] = it->data[k] + off * (int64_t)it->itemsize[k];
        inner_strides[k] = it->strides[k][last];
    }
    fn(ctx, count, ptrs, inner_strides);
}

void
ampc_iter_run(const ampc_iter *it, ampc_inner_fn fn, void *ctx)
{
    int last = it->ndim - 1;
    int64_t inner = it->shape[last];
    int64_t outer = 1;
    for (int d = 0; d < last; d++) {
        outer *= it->shape[d];
    }
    if (inner == 0 || outer == 0) {
        return;
    }
    int64_t per_row = (inner + ITER_CHUNK - 1) / ITER_CHUNK;
    int64_t nchunks = outer * per_row;
    int64_t total = outer * inner;
    if (nchunks == 1) {
        run_chunk(it, fn, ctx, 0, 0, inner);
        return;
    }
    /* NOTE: kernels called here must not open parallel regions themselves */
    #pragma omp parallel for schedule(static) if (total >= ITER_PARALLEL_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t row = c / per_row;
        int64_t begin = (c % per_row) * ITER_CHUNK;
        int64_t count = inner - begin < ITER_CHUNK ? inner - begin
                                                   : ITER_CHUNK;
        run_chunk(it, fn, ctx, row, begin, count);
    }
}
