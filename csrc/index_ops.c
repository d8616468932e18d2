/* index_ops.c - the kernels of advanced indexing as _C functions:
 * index_gather (a tensor read at rows of int64 indices into a strided
 * output), index_put_ (written there, or added) and nonzero.  Python's side,
 * ampc/_indexing.py, turns an index such as x[mask] or x[:, [0, 2]] into
 * these calls: the indexed dims moved first (a view) and the index tensors
 * broadcast into the rows.
 */
#include "nn_ops.h"

/* indices as (k, n) int64 rows for t, 1 <= k <= t's ndim; a new reference
 * to a contiguous tensor, or NULL with RuntimeError. */
static AmpcTensorObject *
index_rows(const char *fn, AmpcTensorObject *ix, AmpcTensorObject *t)
{
    if (ix->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected indices to have dtype int64, got %s", fn,
                     ampc_dtype_name(ix->dtype));
        return NULL;
    }
    if (ix->ndim != 2 || ix->shape[0] < 1 || ix->shape[0] > t->ndim) {
        char a[256];
        ampc_format_shape(a, sizeof(a), ix->ndim, ix->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected indices of shape (k, n) with 1 <= k <= "
                     "%d (the input's dims), got %s",
                     fn, t->ndim, a);
        return NULL;
    }
    return ampc_contiguous(ix);
}

/* dims: None or k ints, the user's numbers of the indexed dims (only for
 * messages) -> out[0, k); -1 with TypeError. */
static int
parse_dims(const char *fn, PyObject *dims, int k, long *out)
{
    if (dims == NULL || dims == Py_None) {
        for (int d = 0; d < k; d++) {
            out[d] = d;
        }
        return 0;
    }
    PyObject *seq = PySequence_Fast(dims, "dims must be a tuple of ints");
    if (seq == NULL) {
        return -1;
    }
    int rc = 0;
    if (PySequence_Fast_GET_SIZE(seq) != k) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): expected dims to hold %d ints, one per row of "
                     "indices",
                     fn, k);
        rc = -1;
    }
    for (int d = 0; rc == 0 && d < k; d++) {
        out[d] = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, d));
        if (out[d] == -1 && PyErr_Occurred()) {
            rc = -1;
        }
    }
    Py_DECREF(seq);
    return rc;
}

/* Every CPU index in [-size, size) of its dim of t ([0, size) without
 * wrap); IndexError (PyTorch's wording) naming the first one that is
 * not. */
static int
check_rows_cpu(const char *fn, const AmpcTensorObject *rows,
               const AmpcTensorObject *t, const long *dims, int wrap)
{
    int64_t k = rows->shape[0], n = rows->shape[1];
    const int64_t *ix = (const int64_t *)rows->data;
    for (int64_t d = 0; d < k; d++) {
        int64_t size = t->shape[d];
        for (int64_t j = 0; j < n; j++) {
            int64_t i = ix[d * n + j];
            if (i < (wrap ? -size : 0) || i >= size) {
                PyErr_Format(PyExc_IndexError,
                             "%s(): index %lld is out of bounds for "
                             "dimension %ld with size %lld",
                             fn, (long long)i, dims[d], (long long)size);
                return -1;
            }
        }
    }
    return 0;
}

/* v (the gathered or put values) has shape (n, t.shape[k:]) and t's
 * dtype; RuntimeError otherwise. */
static int
check_values(const char *fn, const char *arg, const AmpcTensorObject *v,
             const AmpcTensorObject *t, int k, int64_t n)
{
    int ok = v->ndim == 1 + t->ndim - k && v->shape[0] == n;
    for (int d = k; ok && d < t->ndim; d++) {
        ok = v->shape[1 + d - k] == t->shape[d];
    }
    if (!ok) {
        char a[256], b[256];
        ampc_format_shape(a, sizeof(a), v->ndim, v->shape);
        ampc_format_shape(b, sizeof(b), t->ndim - k, t->shape + k);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s of shape (%lld, *%s) (the index "
                     "count, then the input's dims that are not indexed), "
                     "got %s",
                     fn, arg, (long long)n, b, a);
        return -1;
    }
    if (v->dtype != t->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have dtype %s (the input's), got "
                     "%s",
                     fn, arg, ampc_dtype_name(t->dtype),
                     ampc_dtype_name(v->dtype));
        return -1;
    }
    return 0;
}

/* The geometry of t (k indexed dims first) and v: size-1 rest dims
 * dropped, neighbours merged where both t and v are contiguous across
 * them. */
static void
make_geom(ampc_index_geom *g, const AmpcTensorObject *t,
          const AmpcTensorObject *v, int k, int64_t n)
{
    memset(g, 0, sizeof(*g));
    g->k = k;
    g->n = n;
    for (int d = 0; d < k; d++) {
        g->size[d] = t->shape[d];
        g->stride[d] = t->strides[d];
    }
    g->v_stride = v->strides[0];
    g->rest_numel = 1;
    for (int d = k; d < t->ndim; d++) {
        int64_t size = t->shape[d], ts = t->strides[d];
        int64_t vs = v->strides[1 + d - k];
        g->rest_numel *= size;
        if (size == 1) {
            continue;
        }
        int p = g->nrest - 1;
        if (p >= 0 && g->t_rest_stride[p] == ts * size &&
            g->v_rest_stride[p] == vs * size) {
            g->rest[p] *= size;
            g->t_rest_stride[p] = ts;
            g->v_rest_stride[p] = vs;
            continue;
        }
        g->rest[g->nrest] = size;
        g->t_rest_stride[g->nrest] = ts;
        g->v_rest_stride[g->nrest] = vs;
        g->nrest++;
    }
}

/* The checks that index_gather and index_put_ share: every argument, the
 * rows (contiguous, in *rows), the geometry, and the overlap rules: the
 * written tensor (v for a gather, t for a put) may not have two elements
 * at one address, and the read one is copied when it shares memory with
 * it (so x[idx] = x reads x as it was).  *t_out and *v_out are new
 * references (the read one perhaps a copy).  1 when there is work, 0 when
 * none, -1 with an exception. */
static int
prepare(const char *fn, PyObject *t_obj, PyObject *i_obj, PyObject *v_obj,
        const char *v_arg, PyObject *dims_obj, int wrap, int writes_t,
        AmpcTensorObject **t_out, AmpcTensorObject **v_out,
        AmpcTensorObject **rows, ampc_index_geom *g)
{
    AmpcTensorObject *t, *ix, *v;
    long dims[AMPC_MAX_DIMS];
    if ((t = ampc_arg_tensor(fn, "input", t_obj)) == NULL ||
        (ix = ampc_arg_tensor(fn, "indices", i_obj)) == NULL ||
        (v = ampc_arg_tensor(fn, v_arg, v_obj)) == NULL ||
        ampc_nn_cuda_prologue(fn, 3, (AmpcTensorObject *[]){t, ix, v}) < 0 ||
        (*rows = index_rows(fn, ix, t)) == NULL) {
        return -1;
    }
    int k = (int)(*rows)->shape[0];
    int64_t n = (*rows)->shape[1];
    if (check_values(fn, v_arg, v, t, k, n) < 0 ||
        parse_dims(fn, dims_obj, k, dims) < 0 ||
        (!ampc_is_cuda(t) && check_rows_cpu(fn, *rows, t, dims, wrap) < 0) ||
        ampc_has_internal_overlap(writes_t ? t : v)) {
        Py_CLEAR(*rows);
        return -1;
    }
    if (writes_t) {
        *t_out = (AmpcTensorObject *)Py_NewRef(t);
        *v_out = ampc_copy_if_shared(v, t);
    }
    else {
        *t_out = ampc_copy_if_shared(t, v);
        *v_out = (AmpcTensorObject *)Py_NewRef(v);
    }
    if (*t_out == NULL || *v_out == NULL) {
        Py_CLEAR(*t_out);
        Py_CLEAR(*v_out);
        Py_CLEAR(*rows);
        return -1;
    }
    make_geom(g, *t_out, *v_out, k, n);
    g->wrap = wrap;
    return n > 0 && g->rest_numel > 0;
}

/* After a kernel: releases what prepare() made, bumps the version of the
 * written tensor, and turns the kernel's status into None or an
 * exception. */
static PyObject *
finish(const char *fn, int cuda_rc, int cpu_rc, AmpcTensorObject *written,
       AmpcTensorObject *t, AmpcTensorObject *v, AmpcTensorObject *rows)
{
    PyObject *result = NULL;
    if (cuda_rc != 0) {
        ampc_cuda_raise(fn, cuda_rc);
    }
    else if (cpu_rc != 0) {
        PyErr_NoMemory();
    }
    else {
        written->storage->version++;
        result = Py_NewRef(Py_None);
    }
    Py_DECREF(t);
    Py_DECREF(v);
    Py_DECREF(rows);
    return result;
}

// ----------------------------------------------------------------------------

/* index_gather(input, indices, out, *, dims=None): out[j, ...] =
 * input[indices[:, j], ...], input's first k dims indexed by the k rows of
 * indices (a negative index counts from the end). */
static PyObject *
op_index_gather(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "indices", "out", "dims", "name",
                             "wrap", NULL};
    const char *fn = "index_gather";
    PyObject *t_obj, *i_obj, *v_obj, *dims = NULL;
    AmpcTensorObject *t, *v, *rows = NULL;
    int wrap = 1;
    ampc_index_geom g;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|$Ozp:index_gather",
                                     kwlist, &t_obj, &i_obj, &v_obj, &dims,
                                     &fn, &wrap)) {
        return NULL;
    }
    fn = fn != NULL ? fn : "index_gather";
    int work = prepare(fn, t_obj, i_obj, v_obj, "out", dims, wrap, 0, &t,
                       &v, &rows, &g);
    if (work < 0) {
        return NULL;
    }
    const int64_t *ix = (const int64_t *)rows->data;
    size_t es = ampc_dtype_size[t->dtype];
    int rc = 0, cpu_rc = 0;
    if (work && ampc_is_cuda(t)) {
        rc = ampc_cuda.index_gather(&g, es, t->data, ix, v->data);
    }
    else if (work) {
        RUN_KERNEL(g.n * g.rest_numel,
                   cpu_rc = ampc_cpu.index_gather(&g, es, t->data, ix,
                                                  v->data));
    }
    return finish(fn, rc, cpu_rc, v, t, v, rows);
}

/* index_put_(input, indices, values, accumulate=False, *, dims=None):
 * input[indices[:, j], ...] = values[j, ...] (or += when accumulate: then
 * float32 or int64, and a repeated index adds each of its values). */
static PyObject *
op_index_put_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "indices", "values", "accumulate",
                             "dims", "name", "wrap", NULL};
    const char *fn = "index_put_";
    PyObject *t_obj, *i_obj, *v_obj, *dims = NULL;
    AmpcTensorObject *t, *v, *rows = NULL;
    int accumulate = 0, wrap = 1;
    ampc_index_geom g;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|p$Ozp:index_put_",
                                     kwlist, &t_obj, &i_obj, &v_obj,
                                     &accumulate, &dims, &fn, &wrap)) {
        return NULL;
    }
    fn = fn != NULL ? fn : "index_put_";
    int work = prepare(fn, t_obj, i_obj, v_obj, "values", dims, wrap, 1, &t,
                       &v, &rows, &g);
    if (work < 0) {
        return NULL;
    }
    if (accumulate && t->dtype != AMPC_FLOAT32 && t->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): accumulate=True needs an input of dtype float32 "
                     "or int64 (add 16-bit values in a float32 copy), got %s",
                     fn, ampc_dtype_name(t->dtype));
        Py_DECREF(t);
        Py_DECREF(v);
        Py_DECREF(rows);
        return NULL;
    }
    const int64_t *ix = (const int64_t *)rows->data;
    int rc = 0, cpu_rc = 0;
    /* use_deterministic_algorithms: a repeated index's writes land in
     * order (the CPU's order; on CUDA sorted by destination), and CUDA's
     * float32 accumulation adds in that order too (int64 adds commute) */
    g.ordered = ampc_deterministic_algorithms();
    if (work && ampc_is_cuda(t) && g.ordered &&
        (!accumulate || t->dtype == AMPC_FLOAT32)) {
        rc = ampc_cuda.index_put_sorted(&g, t->dtype, accumulate, t->data,
                                        ix, v->data);
    }
    else if (work && ampc_is_cuda(t)) {
        rc = ampc_cuda.index_put(&g, t->dtype, accumulate, t->data, ix,
                                 v->data);
    }
    else if (work) {
        RUN_KERNEL(g.n * g.rest_numel,
                   cpu_rc = ampc_cpu.index_put(&g, t->dtype, accumulate,
                                               t->data, ix, v->data));
    }
    return finish(fn, rc, cpu_rc, t, t, v, rows);
}

/* The CUDA half of nonzero: offsets, the count (the one host read), the
 * coordinates.  A new reference, or NULL with an exception. */
static AmpcTensorObject *
nonzero_cuda(const char *fn, AmpcTensorObject *m)
{
    int64_t n = ampc_numel(m);
    int64_t tiles = (n + AMPC_NONZERO_TILE - 1) / AMPC_NONZERO_TILE;
    int64_t len = tiles + 1, count, one = 1;
    AmpcTensorObject *offsets = ampc_tensor_empty(1, &len, AMPC_INT64,
                                                  m->device);
    AmpcTensorObject *last = NULL, *out = NULL;
    if (offsets == NULL) {
        return NULL;
    }
    int rc = ampc_cuda.nonzero_count(n, (const uint8_t *)m->data,
                                     (int64_t *)offsets->data);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        goto done;
    }
    last = ampc_tensor_view(offsets, 1, &one, &one,
                            offsets->data + tiles * sizeof(int64_t));
    if (last == NULL ||
        ampc_read_to_host(fn, last, &count, sizeof(count)) < 0) {
        goto done;
    }
    out = ampc_tensor_empty(2, (int64_t[]){count, m->ndim}, AMPC_INT64,
                            m->device);
    if (out == NULL) {
        goto done;
    }
    rc = ampc_cuda.nonzero(m->ndim, m->shape, n, (const uint8_t *)m->data,
                           (const int64_t *)offsets->data,
                           (int64_t *)out->data);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        Py_CLEAR(out);
    }
done:
    Py_XDECREF(last);
    Py_DECREF(offsets);
    return out;
}

/* nonzero(input): the (count, ndim) int64 coordinates of the true elements
 * of a bool tensor, in order (one host read of the count on CUDA). */
static PyObject *
op_nonzero(PyObject *module, PyObject *arg)
{
    static const char *fn = "nonzero";
    AmpcTensorObject *m = ampc_arg_tensor(fn, "input", arg);
    if (m == NULL ||
        ampc_nn_cuda_prologue(fn, 1, (AmpcTensorObject *[]){m}) < 0) {
        return NULL;
    }
    if (m->dtype != AMPC_BOOL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected input to have dtype bool, got %s", fn,
                     ampc_dtype_name(m->dtype));
        return NULL;
    }
    AmpcTensorObject *mc = ampc_contiguous(m), *out = NULL;
    if (mc == NULL) {
        return NULL;
    }
    int64_t n = ampc_numel(mc);
    const uint8_t *mask = (const uint8_t *)mc->data;
    if (ampc_is_cuda(mc)) {
        out = nonzero_cuda(fn, mc);
    }
    else {
        int64_t count;
        RUN_KERNEL(n, count = ampc_cpu.count_true(n, mask));
        out = ampc_tensor_empty(2, (int64_t[]){count, mc->ndim}, AMPC_INT64,
                                mc->device);
        int rc = 0;
        if (out != NULL) {
            RUN_KERNEL(n, rc = ampc_cpu.nonzero(mc->ndim, mc->shape, n, mask,
                                                (int64_t *)out->data));
        }
        if (rc != 0) {
            Py_CLEAR(out);
            PyErr_NoMemory();
        }
    }
    Py_DECREF(mc);
    return (PyObject *)out;
}

// ----------------------------------------------------------------------------

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_index_methods[] = {
    {"index_gather", KW(op_index_gather),
     "index_gather(input, indices, out, *, dims=None, name=None, wrap=True): "
     "out[j, ...] = input[indices[:, j], ...], the first k dims of input "
     "indexed by the k rows of int64 indices (a negative one counts from the "
     "end unless not wrap); dims and name (the user's op) are for errors"},
    {"index_put_", KW(op_index_put_),
     "index_put_(input, indices, values, accumulate=False, *, dims=None, "
     "name=None, wrap=True): input[indices[:, j], ...] = values[j, ...] (+= "
     "when accumulate)"},
    {"nonzero", (PyCFunction)op_nonzero, METH_O,
     "nonzero(input) -> the (count, ndim) int64 coordinates of the true "
     "elements of a bool tensor"},
    {NULL},
};
