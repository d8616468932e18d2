/* scatter_ops.c - _C.scatter_reduce_, the kernel call under
 * Tensor.scatter_reduce_, scatter_(..., reduce=) and scatter_add_
 * (ampc/_scatter.py makes PyTorch's checks and messages, widens float16,
 * bfloat16 and bool, and does autograd): the arguments checked, the
 * geometry made, then the CPU loops (cpu/ref/scatter.c) or the CUDA kernels
 * (cuda/scatter.cu).
 */
#include "nn_ops.h"

static const char *const reduce_names[AMPC_NUM_SCATTER_OPS] = {
    "sum", "prod", "mean", "amax", "amin",
};

/* The op named by `reduce`; -1 with RuntimeError (PyTorch's words). */
static int
parse_reduce(const char *fn, const char *reduce)
{
    for (int op = 0; op < AMPC_NUM_SCATTER_OPS; op++) {
        if (strcmp(reduce, reduce_names[op]) == 0) {
            return op;
        }
    }
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): reduce argument must be either sum, prod, mean, amax "
                 "or amin, got %s",
                 fn, reduce);
    return -1;
}

/* The dtypes, ranks and sizes the kernel needs (the Python side has made
 * PyTorch's checks already; these keep a direct call from crashing). */
static int
check_args(const char *fn, const AmpcTensorObject *t,
           const AmpcTensorObject *ix, const AmpcTensorObject *src, int dim)
{
    if (t->dtype != AMPC_FLOAT32 && t->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected input of dtype float32 or int64 "
                     "(float16 and bfloat16 are reduced in a float32 copy, "
                     "bool in an int64 one), got %s",
                     fn, ampc_dtype_name(t->dtype));
        return -1;
    }
    if (ampc_arg_dtype(fn, "src", (AmpcTensorObject *)src, t->dtype,
                       "input") < 0) {
        return -1;
    }
    if (ix->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected index to have dtype int64, got %s", fn,
                     ampc_dtype_name(ix->dtype));
        return -1;
    }
    if (t->ndim == 0 || ix->ndim != t->ndim || src->ndim != t->ndim) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected input, index and src of one rank >= 1, "
                     "got %d, %d and %d",
                     fn, t->ndim, ix->ndim, src->ndim);
        return -1;
    }
    for (int d = 0; d < t->ndim; d++) {
        if (ix->shape[d] > src->shape[d] ||
            (d != dim && ix->shape[d] > t->shape[d])) {
            char a[256], b[256], c[256];
            ampc_format_shape(a, sizeof(a), ix->ndim, ix->shape);
            ampc_format_shape(b, sizeof(b), t->ndim, t->shape);
            ampc_format_shape(c, sizeof(c), src->ndim, src->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): Expected index %s to be no larger than self "
                         "%s apart from dimension %d and to be no larger "
                         "size than src %s",
                         fn, a, b, dim, c);
            return -1;
        }
    }
    return 0;
}

static void
make_geom(ampc_scatter_geom *g, const AmpcTensorObject *t,
          const AmpcTensorObject *ix, const AmpcTensorObject *src, int dim,
          int include_self)
{
    memset(g, 0, sizeof(*g));
    g->ndim = t->ndim;
    g->dim = dim;
    g->include_self = include_self;
    g->dim_size = t->shape[dim];
    for (int d = 0; d < t->ndim; d++) {
        g->size[d] = ix->shape[d];
        g->t_stride[d] = t->strides[d];
        g->i_stride[d] = ix->strides[d];
        g->s_stride[d] = src->strides[d];
    }
}

/* The CPU check: every index in [0, dim_size); 1 and the first (in
 * row-major order) that is not in *bad, else 0.  Only the dims along which
 * the index changes are walked (an expanded index repeats its values). */
static int
first_bad_index(const ampc_scatter_geom *g, const int64_t *idx, int64_t *bad)
{
    int64_t size[AMPC_MAX_DIMS] = {1}, stride[AMPC_MAX_DIMS] = {0};
    int nd = 0;
    for (int d = 0; d < g->ndim; d++) {
        if (g->i_stride[d] != 0 && g->size[d] > 1) {
            size[nd] = g->size[d];
            stride[nd++] = g->i_stride[d];
        }
    }
    int last = nd > 0 ? nd - 1 : 0;
    int64_t coord[AMPC_MAX_DIMS] = {0};
    int64_t rows = 1, off = 0;
    for (int d = 0; d < last; d++) {
        rows *= size[d];
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t x = 0; x < size[last]; x++) {
            int64_t p = idx[off + x * stride[last]];
            if (p < 0 || p >= g->dim_size) {
                *bad = p;
                return 1;
            }
        }
        for (int d = last - 1; d >= 0; d--) {
            off += stride[d];
            if (++coord[d] < size[d]) {
                break;
            }
            off -= coord[d] * stride[d];
            coord[d] = 0;
        }
    }
    return 0;
}

/* MEAN's counts: int64 zeros of t's shape, contiguous (strides into g). */
static AmpcTensorObject *
mean_counts(const char *fn, const AmpcTensorObject *t, ampc_scatter_geom *g)
{
    AmpcTensorObject *cnt = ampc_tensor_empty(t->ndim, t->shape, AMPC_INT64,
                                              t->device);
    PyObject *zero = PyLong_FromLong(0);
    if (cnt == NULL || zero == NULL || ampc_fill_value(cnt, zero, fn) < 0) {
        Py_XDECREF(zero);
        Py_XDECREF(cnt);
        return NULL;
    }
    Py_DECREF(zero);
    int64_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        g->c_stride[d] = stride;
        stride *= t->shape[d];
    }
    return cnt;
}

/* Runs the kernel on checked arguments; 0, or -1 with an exception. */
static int
run(const char *fn, AmpcTensorObject *t, AmpcTensorObject *ix,
    AmpcTensorObject *src, int dim, ampc_scatter_op op, int include_self)
{
    ampc_scatter_geom g;
    make_geom(&g, t, ix, src, dim, include_self);
    int64_t n = ampc_numel(ix);
    int64_t bad;
    if (!ampc_is_cuda(t) && first_bad_index(&g, (const int64_t *)ix->data,
                                            &bad)) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): index %lld is out of bounds for dimension %d "
                     "with size %lld",
                     fn, (long long)bad, dim, (long long)g.dim_size);
        return -1;
    }
    AmpcTensorObject *cnt = NULL;
    if (op == AMPC_SCATTER_MEAN && (cnt = mean_counts(fn, t, &g)) == NULL) {
        return -1;
    }
    int64_t *counts = cnt != NULL ? (int64_t *)cnt->data : NULL;
    int rc = 0;
    /* use_deterministic_algorithms: CUDA's float sum, mean and prod
     * (atomics, in no set order) sorted by destination instead; amax, amin
     * and int64 results do not depend on the order */
    if (ampc_is_cuda(t) && ampc_deterministic_algorithms() &&
        t->dtype == AMPC_FLOAT32 && op != AMPC_SCATTER_AMAX &&
        op != AMPC_SCATTER_AMIN) {
        rc = ampc_cuda.scatter_reduce_sorted(&g, t->dtype, op, t->data,
                                             (const int64_t *)ix->data,
                                             src->data);
    }
    else if (ampc_is_cuda(t)) {
        rc = ampc_cuda.scatter_reduce(&g, t->dtype, op, t->data,
                                      (const int64_t *)ix->data, src->data,
                                      counts);
    }
    else {
        RUN_KERNEL(n, ampc_cpu.scatter_reduce(&g, t->dtype, op, t->data,
                                              (const int64_t *)ix->data,
                                              src->data, counts));
    }
    Py_XDECREF(cnt);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    t->storage->version++;
    return 0;
}

// ----------------------------------------------------------------------------

/* scatter_reduce_(input, dim, index, src, reduce, include_self=True, *,
 * name=None): input (float32 or int64) reduced in place. */
static PyObject *
op_scatter_reduce_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "dim", "index", "src", "reduce",
                             "include_self", "name", NULL};
    const char *fn = NULL, *reduce;
    PyObject *t_obj, *i_obj, *s_obj;
    int dim, include_self = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OiOOs|p$z:scatter_reduce_",
                                     kwlist, &t_obj, &dim, &i_obj, &s_obj,
                                     &reduce, &include_self, &fn)) {
        return NULL;
    }
    fn = fn != NULL ? fn : "scatter_reduce_";
    AmpcTensorObject *t, *ix0, *src0;
    if ((t = ampc_arg_tensor(fn, "input", t_obj)) == NULL ||
        (ix0 = ampc_arg_tensor(fn, "index", i_obj)) == NULL ||
        (src0 = ampc_arg_tensor(fn, "src", s_obj)) == NULL ||
        ampc_nn_cuda_prologue(fn, 3,
                              (AmpcTensorObject *[]){t, ix0, src0}) < 0) {
        return NULL;
    }
    int op = parse_reduce(fn, reduce);
    if (op < 0 || (dim = ampc_wrap_dim(fn, dim, t->ndim)) < 0 ||
        check_args(fn, t, ix0, src0, dim) < 0 ||
        ampc_has_internal_overlap(t)) {
        return NULL;
    }
    if (ampc_numel(ix0) == 0) {
        Py_RETURN_NONE;
    }
    AmpcTensorObject *ix = ampc_copy_if_shared(ix0, t);
    AmpcTensorObject *src = ix == NULL ? NULL
                                       : ampc_copy_if_shared(src0, t);
    int rc = src == NULL ? -1 : run(fn, t, ix, src, dim, op, include_self);
    Py_XDECREF(ix);
    Py_XDECREF(src);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_scatter_methods[] = {
    {"scatter_reduce_", KW(op_scatter_reduce_),
     "scatter_reduce_(input, dim, index, src, reduce, include_self=True, *, "
     "name=None): input[..., index[p], ...] (index[p] at dim) combined with "
     "src[p] for every position p of index, reduce 'sum', 'prod', 'mean', "
     "'amax' or 'amin'; input float32 or int64, src of its dtype, index "
     "int64, each of input's rank, index no larger than src, nor than input "
     "outside dim; name (the user's op) is for errors"},
    {NULL},
};
