/* ops_reduce.c - reductions (sum, mean, max, min, argmax, argmin, prod
 * over all dims, one dim or several) and cat, on the CPU or a GPU: the
 * reduced dims are brought to a contiguous (outer, r, inner) layout here,
 * and the device's reduce slot (csrc/cpu/ref/reduce.c, cuda/reduce.cu)
 * does the rest.
 */
#include "ampc.h"

#include <math.h>

#include "amp_math.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// reductions

static const char *const reduce_names[] = {
    "sum",    "mean",    "max",     "min", "argmax",
    "argmin", "max_dim", "min_dim", "prod"};
#define NUM_REDUCE_NAMES 9

/* Marks the reduced dims in `mask` from dim=None, an int or a sequence.
 * Returns the number of reduced dims or -1. */
static int
parse_reduce_dims(const char *fn, PyObject *dim, int ndim, int multi,
                  int *mask)
{
    memset(mask, 0, sizeof(int) * AMPC_MAX_DIMS);
    if (dim == Py_None) {
        for (int d = 0; d < ndim; d++) {
            mask[d] = 1;
        }
        return ndim;
    }
    PyObject *seq;
    if (PyLong_Check(dim)) {
        seq = PyTuple_Pack(1, dim);
    }
    else if (multi && (PyTuple_Check(dim) || PyList_Check(dim))) {
        seq = PySequence_Tuple(dim);
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'dim' must be %s, not %.100s", fn,
                     multi ? "an int, a tuple of ints or None"
                           : "an int or None",
                     Py_TYPE(dim)->tp_name);
        return -1;
    }
    if (seq == NULL) {
        return -1;
    }
    int count = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        int d = ampc_wrap_dim(fn, v, ndim);
        if (d < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (ndim == 0) {
            continue;
        }
        if (mask[d]) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): dim %d appears multiple times in the list of "
                         "dims",
                         fn, d);
            return -1;
        }
        mask[d] = 1;
        count++;
    }
    Py_DECREF(seq);
    return count;
}

typedef struct {
    ampc_reduce_op op;
    ampc_dtype dt;
    int64_t outer, r, inner;
    const void *x;
    void *out;
    int64_t *idx;
} reduce_call;

/* -1 with an exception (a CUDA error) or 0. */
static int
run_reduce(const char *fn, ampc_device dev, reduce_call *c)
{
    if (dev.type == AMPC_DEV_CUDA) {
        int code = ampc_cuda.reduce(c->op, c->dt, c->outer, c->r, c->inner,
                                    c->x, c->out, c->idx);
        if (code != 0) {
            ampc_cuda_raise(fn, code);
            return -1;
        }
        return 0;
    }
    if (c->outer * c->r * c->inner >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.reduce(c->op, c->dt, c->outer, c->r, c->inner, c->x, c->out,
                        c->idx);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.reduce(c->op, c->dt, c->outer, c->r, c->inner, c->x, c->out,
                        c->idx);
    }
    return 0;
}

static PyObject *
op_reduce(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"op", "a", "dim", "keepdim", NULL};
    PyObject *name, *a_obj, *dim = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|Op:reduce", kwlist,
                                     &name, &a_obj, &dim, &keepdim)) {
        return NULL;
    }
    int which = ampc_lookup_name(reduce_names, NUM_REDUCE_NAMES, name,
                                 "reduce");
    if (which < 0) {
        return NULL;
    }
    const char *fn = reduce_names[which];
    int with_indices = which == 6 || which == 7;
    if (with_indices) {
        fn = which == 6 ? "max" : "min";
    }
    if (ampc_check_tensor_any(fn, "self", a_obj) < 0 ||
        ampc_cuda_enter(fn, AMPC_TENSOR(a_obj)->device) < 0) {
        return NULL;
    }
    AmpcTensorObject *a = AMPC_TENSOR(a_obj);
    ampc_reduce_op op = which == 8         ? AMPC_RED_PROD
                        : with_indices ? (which == 6 ? AMPC_RED_MAX
                                                     : AMPC_RED_MIN)
                                       : (ampc_reduce_op)which;
    /* sum, mean and prod: several dims, an identity, int64 for ints */
    int is_sum = op == AMPC_RED_SUM || op == AMPC_RED_MEAN ||
                 op == AMPC_RED_PROD;
    if (with_indices && dim == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'dim' is required", fn);
        return NULL;
    }
    int mask[AMPC_MAX_DIMS];
    int nred = parse_reduce_dims(fn, dim, a->ndim, is_sum, mask);
    if (nred < 0) {
        return NULL;
    }
    if (op == AMPC_RED_MEAN && !ampc_dtype_is_float(a->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "mean(): could not infer output dtype. Input dtype must "
                     "be either a floating point or complex dtype. Got: %s",
                     ampc_dtype_name(a->dtype));
        return NULL;
    }
    /* argmax/argmin over all dims of a tensor return a flat index */
    int flat = dim == Py_None;
    int64_t r = 1;
    int64_t out_shape[AMPC_MAX_DIMS];
    int out_nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (mask[d]) {
            r *= a->shape[d];
            if (keepdim) {
                out_shape[out_nd++] = 1;
            }
        }
        else {
            out_shape[out_nd++] = a->shape[d];
        }
    }
    if (flat && !keepdim) {
        out_nd = 0;
    }
    if (r == 0 && !is_sum) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): Expected reduction dim to be specified for "
                     "input.numel() == 0 (or the reduced dim has size 0): "
                     "the operation has no identity",
                     fn);
        return NULL;
    }
    /* bring the reduced dims innermost, contiguous: (outer, r, 1); one
     * reduced dim of a contiguous tensor needs no copy: (outer, r, inner) */
    AmpcTensorObject *x = NULL;
    int64_t outer = 1, inner = 1;
    int single = -1;
    if (nred == 1 && ampc_is_contiguous(a)) {
        for (int d = 0; d < a->ndim; d++) {
            if (mask[d]) {
                single = d;
            }
        }
    }
    if (a->ndim == 0 || (nred == a->ndim && ampc_is_contiguous(a))) {
        x = (AmpcTensorObject *)Py_NewRef(a);
        outer = 1;
    }
    else if (single >= 0) {
        x = (AmpcTensorObject *)Py_NewRef(a);
        for (int d = 0; d < single; d++) {
            outer *= a->shape[d];
        }
        for (int d = single + 1; d < a->ndim; d++) {
            inner *= a->shape[d];
        }
    }
    else {
        int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
        int k = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int d = 0; d < a->ndim; d++) {
                if (mask[d] == pass) {
                    shape[k] = a->shape[d];
                    strides[k++] = a->strides[d];
                    outer *= pass ? 1 : a->shape[d];
                }
            }
        }
        AmpcTensorObject *perm = ampc_tensor_view(a, a->ndim, shape, strides,
                                                  a->data);
        if (perm == NULL) {
            return NULL;
        }
        x = ampc_contiguous(perm);
        Py_DECREF(perm);
        if (x == NULL) {
            return NULL;
        }
    }
    ampc_dtype out_dt = a->dtype;
    if (is_sum && !ampc_dtype_is_float(a->dtype)) {
        out_dt = AMPC_INT64;
    }
    int want_values = op != AMPC_RED_ARGMAX && op != AMPC_RED_ARGMIN;
    int want_idx = !want_values || with_indices;
    AmpcTensorObject *values = NULL, *indices = NULL;
    PyObject *result = NULL;
    if (want_values) {
        values = ampc_tensor_empty(out_nd, out_shape, out_dt, a->device);
        if (values == NULL) {
            goto done;
        }
    }
    if (want_idx) {
        indices = ampc_tensor_empty(out_nd, out_shape, AMPC_INT64,
                                    a->device);
        if (indices == NULL) {
            goto done;
        }
    }
    if (r == 0) {       /* empty sum is 0, empty mean NaN, empty prod 1 */
        PyObject *fillv = op == AMPC_RED_MEAN ? PyFloat_FromDouble(NAN)
                                              : PyLong_FromLong(
                                                    op == AMPC_RED_PROD);
        int rc = fillv == NULL ? -1 : ampc_fill_value(values, fillv, fn);
        Py_XDECREF(fillv);
        if (rc < 0) {
            goto done;
        }
    }
    else if (outer * inner > 0) {
        reduce_call c = {op, a->dtype, outer, r, inner, x->data,
                         values ? values->data : NULL,
                         indices ? (int64_t *)indices->data : NULL};
        if (run_reduce(fn, a->device, &c) < 0) {
            goto done;
        }
    }
    if (with_indices) {
        result = PyTuple_Pack(2, values, indices);
    }
    else {
        result = Py_NewRef(want_values ? (PyObject *)values
                                       : (PyObject *)indices);
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(values);
    Py_XDECREF(indices);
    return result;
}

// ----------------------------------------------------------------------------
// cat

static PyObject *
op_cat(PyObject *module, PyObject *args)
{
    PyObject *seq_obj;
    long dim = 0;
    if (!PyArg_ParseTuple(args, "O|l:cat", &seq_obj, &dim)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(seq_obj, "cat(): tensors");
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "cat(): argument 'tensors' must be a sequence of "
                     "Tensors, not %.100s",
                     Py_TYPE(seq_obj)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    AmpcTensorObject *out = NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cat(): expected a non-empty list of Tensors");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!ampc_tensor_check(items[i])) {
            PyErr_Format(PyExc_TypeError,
                         "cat(): expected Tensor as element %zd in argument "
                         "0, but got %.100s",
                         i, Py_TYPE(items[i])->tp_name);
            goto done;
        }
    }
    AmpcTensorObject *first = AMPC_TENSOR(items[0]);
    for (Py_ssize_t i = 1; i < n; i++) {
        if (ampc_check_same_device(first, AMPC_TENSOR(items[i])) < 0) {
            goto done;
        }
    }
    if (ampc_cuda_enter("cat", first->device) < 0) {
        goto done;
    }
    if (first->ndim == 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cat(): zero-dimensional tensor (at position 0) "
                        "cannot be concatenated");
        goto done;
    }
    int d = ampc_wrap_dim("cat", dim, first->ndim);
    if (d < 0) {
        goto done;
    }
    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, first->shape, sizeof(int64_t) * first->ndim);
    shape[d] = 0;
    ampc_dtype dt = first->dtype;
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = AMPC_TENSOR(items[i]);
        int ok = t->ndim == first->ndim;
        for (int k = 0; ok && k < t->ndim; k++) {
            ok = k == d || t->shape[k] == first->shape[k];
        }
        if (!ok) {
            char a[256], b[256];
            ampc_format_shape(a, sizeof(a), first->ndim, first->shape);
            ampc_format_shape(b, sizeof(b), t->ndim, t->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "cat(): Sizes of tensors must match except in "
                         "dimension %d. Expected %s (tensor 0), got %s for "
                         "tensor number %zd in the list.",
                         d, a, b, i);
            goto done;
        }
        shape[d] += t->shape[d];
        dt = ampc_promote(dt, t->dtype);
    }
    out = ampc_tensor_empty(first->ndim, shape, dt, first->device);
    if (out == NULL) {
        goto done;
    }
    int64_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = AMPC_TENSOR(items[i]);
        int64_t part[AMPC_MAX_DIMS];
        memcpy(part, out->shape, sizeof(int64_t) * out->ndim);
        part[d] = t->shape[d];
        AmpcTensorObject *slice = ampc_tensor_view(
            out, out->ndim, part, out->strides,
            out->data + at * out->strides[d] * (int64_t)ampc_dtype_size[dt]);
        if (slice == NULL || ampc_copy_into(slice, t) < 0) {
            Py_XDECREF(slice);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(slice);
        at += t->shape[d];
    }
done:
    Py_DECREF(seq);
    return (PyObject *)out;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_reduce_methods[] = {
    {"reduce", (PyCFunction)(void (*)(void))op_reduce,
     METH_VARARGS | METH_KEYWORDS,
     "reduce(op, a, dim=None, keepdim=False): sum mean max min argmax "
     "argmin max_dim min_dim prod"},
    {"cat", op_cat, METH_VARARGS, "cat(tensors, dim=0) -> tensor"},
    {NULL},
};
