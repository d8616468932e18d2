/* ops_scan.c - _C.cumsum and _C.cumprod, the kernel calls under
 * Tensor.cumsum / cumprod and their in-place forms (ampc/_tensor_sort.py
 * adds autograd, autocast and the in-place write): the output dtype chosen
 * as PyTorch's (dtype= if given, int64 for bool and int64 input, else the
 * input's), the input cast to it first and made contiguous (outer, n,
 * inner), then the CPU loop (cpu/ref/scan.c) or the CUDA kernels
 * (cuda/scan.cu).
 */
#include "nn_ops.h"

/* The scan of x along dim in out_dt: a new contiguous tensor of x's
 * shape; NULL with an exception. */
static AmpcTensorObject *
scan(const char *fn, ampc_scan_op op, AmpcTensorObject *x, int dim,
     ampc_dtype out_dt)
{
    AmpcTensorObject *xc = ampc_nn_contiguous_as(x, out_dt);
    if (xc == NULL) {
        return NULL;
    }
    AmpcTensorObject *out = ampc_tensor_empty(x->ndim, x->shape, out_dt,
                                              x->device);
    if (out == NULL) {
        Py_DECREF(xc);
        return NULL;
    }
    int64_t outer = 1, n = 1, inner = 1;
    if (x->ndim > 0) {
        n = x->shape[dim];
        for (int d = 0; d < dim; d++) {
            outer *= x->shape[d];
        }
        for (int d = dim + 1; d < x->ndim; d++) {
            inner *= x->shape[d];
        }
    }
    int64_t numel = outer * n * inner;
    int rc = 0;
    if (numel > 0) {
        if (ampc_is_cuda(x)) {
            rc = ampc_cuda.scan(op, out_dt, outer, n, inner, xc->data,
                                out->data);
        }
        else {
            RUN_KERNEL(numel, ampc_cpu.scan(op, out_dt, outer, n, inner,
                                            xc->data, out->data));
        }
    }
    Py_DECREF(xc);
    if (rc != 0) {
        Py_DECREF(out);
        return ampc_cuda_raise(fn, rc);
    }
    return out;
}

static PyObject *
scan_op(const char *fn, ampc_scan_op op, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "dim", "dtype", NULL};
    PyObject *x_obj, *dt_obj = Py_None;
    long dim;
    char format[32];
    PyOS_snprintf(format, sizeof(format), "Ol|O:%s", fn);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, format, kwlist, &x_obj,
                                     &dim, &dt_obj)) {
        return NULL;
    }
    AmpcTensorObject *x = ampc_arg_tensor(fn, "input", x_obj);
    if (x == NULL || ampc_nn_cuda_prologue(fn, 1, &x) < 0) {
        return NULL;
    }
    int d = ampc_wrap_dim(fn, dim, x->ndim > 0 ? x->ndim : 1);
    if (d < 0) {
        return NULL;
    }
    ampc_dtype out_dt = ampc_dtype_is_float(x->dtype) ? x->dtype
                                                      : AMPC_INT64;
    if (dt_obj != Py_None) {
        if (ampc_dtype_from_object(dt_obj, &out_dt, fn, "dtype") < 0) {
            return NULL;
        }
        if (out_dt == AMPC_BOOL) {
            /* PyTorch has no bool scan either */
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): dtype bool is not supported (a running sum "
                         "or product of bools is an int64)",
                         fn);
            return NULL;
        }
    }
    return (PyObject *)scan(fn, op, x, d, out_dt);
}

static PyObject *
op_cumsum(PyObject *module, PyObject *args, PyObject *kwds)
{
    return scan_op("cumsum", AMPC_SCAN_SUM, args, kwds);
}

static PyObject *
op_cumprod(PyObject *module, PyObject *args, PyObject *kwds)
{
    return scan_op("cumprod", AMPC_SCAN_PROD, args, kwds);
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_scan_methods[] = {
    {"cumsum", KW(op_cumsum),
     "cumsum(input, dim, dtype=None) -> the running sum along dim (a new "
     "contiguous tensor): dtype if given (input cast to it first), int64 "
     "for bool and int64 input, else input's dtype; float16/bfloat16 summed "
     "in float32 and rounded once per output"},
    {"cumprod", KW(op_cumprod),
     "cumprod(input, dim, dtype=None) -> the running product along dim, "
     "dtypes as cumsum's"},
    {NULL},
};
