/* ops_sort.c - _C.sort, _C.argsort and _C.topk, the kernel calls under
 * Tensor.sort / argsort / topk (ampc/_tensor_sort.py adds the named
 * tuples and autograd): the input made contiguous (outer, n, inner), the
 * outputs allocated, then the CPU kernels (cpu/ref/sort.c) or the CUDA ones
 * (cuda/sort.cu, which take lines that are contiguous: a dim other than the
 * last goes through a transposed copy there).  The order is sort_math.h's
 * on both devices.
 */
#include "nn_ops.h"

/* outer, n, inner of x (contiguous) around dim; a 0-d x is one element */
static void
split_dims(const AmpcTensorObject *x, int dim, int64_t *outer, int64_t *n,
           int64_t *inner)
{
    *outer = *n = *inner = 1;
    if (x->ndim == 0) {
        return;
    }
    *n = x->shape[dim];
    for (int d = 0; d < dim; d++) {
        *outer *= x->shape[d];
    }
    for (int d = dim + 1; d < x->ndim; d++) {
        *inner *= x->shape[d];
    }
}

/* t with dims a and b swapped, as a contiguous tensor (NULL on error) */
static AmpcTensorObject *
swapped_copy(AmpcTensorObject *t, int a, int b)
{
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        shape[d] = t->shape[d];
        strides[d] = t->strides[d];
    }
    shape[a] = t->shape[b];
    shape[b] = t->shape[a];
    strides[a] = t->strides[b];
    strides[b] = t->strides[a];
    AmpcTensorObject *v = ampc_tensor_view(t, t->ndim, shape, strides,
                                           t->data);
    if (v == NULL) {
        return NULL;
    }
    AmpcTensorObject *c = ampc_contiguous(v);
    Py_DECREF(v);
    return c;
}

/* The CUDA path: lines made contiguous (dim swapped with the last dim when
 * it is not last), sorted, and the outputs swapped back.  0, or -1 with an
 * exception. */
static int
run_cuda(const char *fn, AmpcTensorObject *x, int dim, int descending,
         int64_t k, int want_values, AmpcTensorObject **values,
         AmpcTensorObject **indices)
{
    int last = x->ndim > 0 ? x->ndim - 1 : 0;
    int swap = x->ndim > 0 && dim != last;
    AmpcTensorObject *xs = swap ? swapped_copy(x, dim, last)
                                : ampc_contiguous(x);
    if (xs == NULL) {
        return -1;
    }
    int64_t shape[AMPC_MAX_DIMS];
    for (int d = 0; d < xs->ndim; d++) {
        shape[d] = xs->shape[d];
    }
    int64_t n = xs->ndim > 0 ? xs->shape[last] : 1;
    int64_t rows = n > 0 ? ampc_numel(xs) / n : 0;
    if (xs->ndim > 0) {
        shape[last] = k;
    }
    AmpcTensorObject *v = NULL, *ix = NULL;
    int rc = 0;
    if (want_values && (v = ampc_tensor_empty(xs->ndim, shape, xs->dtype,
                                              xs->device)) == NULL) {
        goto error;
    }
    if ((ix = ampc_tensor_empty(xs->ndim, shape, AMPC_INT64,
                                xs->device)) == NULL) {
        goto error;
    }
    if (rows > 0 && k > 0) {
        rc = ampc_cuda.sort(xs->dtype, descending, rows, n, k, xs->data,
                            v != NULL ? v->data : NULL,
                            (int64_t *)ix->data);
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto error;
        }
    }
    Py_DECREF(xs);
    xs = NULL;
    if (swap) {
        AmpcTensorObject *t;
        if (v != NULL) {
            if ((t = swapped_copy(v, dim, last)) == NULL) {
                goto error;
            }
            Py_SETREF(v, t);
        }
        if ((t = swapped_copy(ix, dim, last)) == NULL) {
            goto error;
        }
        Py_SETREF(ix, t);
    }
    *values = v;
    *indices = ix;
    return 0;
error:
    Py_XDECREF(xs);
    Py_XDECREF(v);
    Py_XDECREF(ix);
    return -1;
}

/* New references to the values (when want_values; else NULL: argsort) and
 * indices of the first k of each line of x along dim in the order asked;
 * topk: partial selection.  0, or -1 with an exception. */
static int
run(const char *fn, AmpcTensorObject *x, int dim, int descending, int64_t k,
    int topk, int want_values, AmpcTensorObject **values,
    AmpcTensorObject **indices)
{
    *values = *indices = NULL;
    if (ampc_is_cuda(x)) {
        return run_cuda(fn, x, dim, descending, k, want_values, values,
                        indices);
    }
    int64_t outer, n, inner;
    split_dims(x, dim, &outer, &n, &inner);
    if (x->dtype != AMPC_INT64 && n > (int64_t)UINT32_MAX) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): dimension %d has %lld elements; at most 2^32 - "
                     "1 can be sorted",
                     fn, dim, (long long)n);
        return -1;
    }
    AmpcTensorObject *xc = ampc_contiguous(x);
    if (xc == NULL) {
        return -1;
    }
    int64_t shape[AMPC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        shape[d] = d == dim ? k : x->shape[d];
    }
    AmpcTensorObject *v = NULL, *ix = NULL;
    if (want_values && (v = ampc_tensor_empty(x->ndim, shape, x->dtype,
                                                  x->device)) == NULL) {
        goto error;
    }
    if ((ix = ampc_tensor_empty(x->ndim, shape, AMPC_INT64,
                                x->device)) == NULL) {
        goto error;
    }
    int rc = 0;
    void *vd = v != NULL ? v->data : NULL;
    int64_t *id = (int64_t *)ix->data;
    RUN_KERNEL(outer * n * inner,
               rc = topk ? ampc_cpu.topk(x->dtype, descending, outer, n,
                                         inner, k, xc->data, vd, id)
                         : ampc_cpu.sort(x->dtype, descending, outer, n,
                                         inner, xc->data, vd, id));
    if (rc != 0) {
        PyErr_Format(PyExc_MemoryError, "%s(): out of memory for the "
                     "sort's scratch buffers", fn);
        goto error;
    }
    Py_DECREF(xc);
    *values = v;
    *indices = ix;
    return 0;
error:
    Py_DECREF(xc);
    Py_XDECREF(v);
    Py_XDECREF(ix);
    return -1;
}

/* The tensor argument, on a usable device; NULL with an exception. */
static AmpcTensorObject *
input_arg(const char *fn, PyObject *obj)
{
    AmpcTensorObject *x = ampc_arg_tensor(fn, "input", obj);
    if (x == NULL || ampc_nn_cuda_prologue(fn, 1, &x) < 0) {
        return NULL;
    }
    return x;
}

// ----------------------------------------------------------------------------

/* sort(input, dim=-1, descending=False) -> (values, indices) */
static PyObject *
op_sort(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "dim", "descending", NULL};
    PyObject *x_obj;
    long dim = -1;
    int descending = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|lp:sort", kwlist,
                                     &x_obj, &dim, &descending)) {
        return NULL;
    }
    AmpcTensorObject *x = input_arg("sort", x_obj);
    int d = x == NULL ? -1 : ampc_wrap_dim("sort", dim,
                                           x->ndim > 0 ? x->ndim : 1);
    if (d < 0) {
        return NULL;
    }
    int64_t k = x->ndim > 0 ? x->shape[d] : 1;
    AmpcTensorObject *values, *indices;
    if (run("sort", x, d, descending, k, 0, 1, &values, &indices) < 0) {
        return NULL;
    }
    PyObject *res = PyTuple_Pack(2, values, indices);
    Py_DECREF(values);
    Py_DECREF(indices);
    return res;
}

/* argsort(input, dim=-1, descending=False) -> indices */
static PyObject *
op_argsort(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "dim", "descending", NULL};
    PyObject *x_obj;
    long dim = -1;
    int descending = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|lp:argsort", kwlist,
                                     &x_obj, &dim, &descending)) {
        return NULL;
    }
    AmpcTensorObject *x = input_arg("argsort", x_obj);
    int d = x == NULL ? -1 : ampc_wrap_dim("argsort", dim,
                                           x->ndim > 0 ? x->ndim : 1);
    if (d < 0) {
        return NULL;
    }
    int64_t k = x->ndim > 0 ? x->shape[d] : 1;
    AmpcTensorObject *values, *indices;
    if (run("argsort", x, d, descending, k, 0, 0, &values, &indices) < 0) {
        return NULL;
    }
    return (PyObject *)indices;
}

/* topk(input, k, dim=-1, largest=True) -> (values, indices), sorted */
static PyObject *
op_topk(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "k", "dim", "largest", NULL};
    PyObject *x_obj;
    long long k;
    long dim = -1;
    int largest = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OL|lp:topk", kwlist,
                                     &x_obj, &k, &dim, &largest)) {
        return NULL;
    }
    AmpcTensorObject *x = input_arg("topk", x_obj);
    int d = x == NULL ? -1 : ampc_wrap_dim("topk", dim,
                                           x->ndim > 0 ? x->ndim : 1);
    if (d < 0) {
        return NULL;
    }
    int64_t n = x->ndim > 0 ? x->shape[d] : 1;
    if (k < 0 || k > n) {
        PyErr_Format(PyExc_RuntimeError,
                     "topk(): selected index k out of range: k is %lld but "
                     "dimension %d has size %lld",
                     k, d, (long long)n);
        return NULL;
    }
    if (x->ndim == 0) {
        k = 1;              /* PyTorch: a 0-d input comes back, even k = 0 */
    }
    AmpcTensorObject *values, *indices;
    if (run("topk", x, d, largest, (int64_t)k, 1, 1, &values, &indices) <
        0) {
        return NULL;
    }
    PyObject *res = PyTuple_Pack(2, values, indices);
    Py_DECREF(values);
    Py_DECREF(indices);
    return res;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_sort_methods[] = {
    {"sort", KW(op_sort),
     "sort(input, dim=-1, descending=False) -> (values, indices): each line "
     "along dim sorted stably (NaN largest, -0.0 equal to 0.0)"},
    {"argsort", KW(op_argsort),
     "argsort(input, dim=-1, descending=False) -> the indices sort gives"},
    {"topk", KW(op_topk),
     "topk(input, k, dim=-1, largest=True) -> (values, indices): the k "
     "largest (smallest) of each line along dim, sorted, ties in input "
     "order"},
    {NULL},
};
