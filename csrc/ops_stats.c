/* ops_stats.c - _C.cummax, _C.cummin and _C.histc, the kernel calls under
 * Tensor.cummax / cummin / histc (ampc/_tensor_select.py adds the named
 * tuples, autograd and histc's range from the data): the input made
 * contiguous, the outputs allocated, then the CPU kernels
 * (cpu/ref/scan_minmax.c, cpu/ref/histc.c) or the CUDA ones (cuda/scan.cu,
 * cuda/histc.cu).  The rules are stats_math.h's on both devices.
 */
#include "nn_ops.h"

#include <math.h>

#include "elementwise_math.h"

static PyObject *
minmax_op(const char *fn, int is_min, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "dim", NULL};
    PyObject *x_obj;
    long dim;
    char format[32];
    PyOS_snprintf(format, sizeof(format), "Ol:%s", fn);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, format, kwlist, &x_obj,
                                     &dim)) {
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
    int64_t outer = 1, n = 1, inner = 1;
    if (x->ndim > 0) {
        n = x->shape[d];
        for (int k = 0; k < d; k++) {
            outer *= x->shape[k];
        }
        for (int k = d + 1; k < x->ndim; k++) {
            inner *= x->shape[k];
        }
    }
    PyObject *result = NULL;
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *values = NULL, *indices = NULL;
    if (xc == NULL ||
        (values = ampc_tensor_empty(x->ndim, x->shape, x->dtype,
                                    x->device)) == NULL ||
        (indices = ampc_tensor_empty(x->ndim, x->shape, AMPC_INT64,
                                     x->device)) == NULL) {
        goto done;
    }
    if (outer * n * inner > 0) {
        if (ampc_is_cuda(x)) {
            int rc = ampc_cuda.scan_minmax(is_min, x->dtype, outer, n, inner,
                                           xc->data, values->data,
                                           (int64_t *)indices->data);
            if (rc != 0) {
                ampc_cuda_raise(fn, rc);
                goto done;
            }
        }
        else {
            RUN_KERNEL(outer * n * inner,
                       ampc_cpu.scan_minmax(is_min, x->dtype, outer, n,
                                            inner, xc->data, values->data,
                                            (int64_t *)indices->data));
        }
    }
    result = PyTuple_Pack(2, values, indices);
done:
    Py_XDECREF(xc);
    Py_XDECREF(values);
    Py_XDECREF(indices);
    return result;
}

static PyObject *
op_cummax(PyObject *module, PyObject *args, PyObject *kwds)
{
    return minmax_op("cummax", 0, args, kwds);
}

static PyObject *
op_cummin(PyObject *module, PyObject *args, PyObject *kwds)
{
    return minmax_op("cummin", 1, args, kwds);
}

/* v rounded to dt, as a float (the edges of histc's range) */
static float
round_to(ampc_dtype dt, double v)
{
    uint16_t bits;
    float f = (float)v;
    if (dt == AMPC_FLOAT16) {
        ampc_store_f64(dt, &bits, v);
        f = ampc_f16_to_f32(bits);
    }
    else if (dt == AMPC_BFLOAT16) {
        ampc_store_f64(dt, &bits, v);
        f = ampc_bf16_to_f32(bits);
    }
    return f;
}

static PyObject *
op_histc(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "bins", "min", "max", NULL};
    static const char *fn = "histc";
    PyObject *x_obj;
    long long bins;
    double lo, hi;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLdd:histc", kwlist,
                                     &x_obj, &bins, &lo, &hi)) {
        return NULL;
    }
    AmpcTensorObject *x = ampc_arg_tensor(fn, "input", x_obj);
    if (x == NULL || ampc_arg_float(fn, "input", x) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0) {
        return NULL;
    }
    if (bins <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): bins must be > 0, but got %lld", fn, bins);
        return NULL;
    }
    ampc_histc_shape s = {ampc_numel(x), bins, round_to(x->dtype, lo),
                          round_to(x->dtype, hi)};
    if (!isfinite(s.lo) || !isfinite(s.hi)) {
        char text[128];
        PyOS_snprintf(text, sizeof(text), "range of [%g, %g] is not finite",
                      (double)s.lo, (double)s.hi);
        PyErr_Format(PyExc_RuntimeError, "%s(): %s", fn, text);
        return NULL;
    }
    if (!(s.lo < s.hi)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): max must be larger than min (after rounding to "
                     "the input's dtype %s)",
                     fn, ampc_dtype_name(x->dtype));
        return NULL;
    }
    int64_t shape[1] = {bins};
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *out = xc == NULL ? NULL
                                       : ampc_tensor_empty(1, shape,
                                                           x->dtype,
                                                           x->device);
    if (out == NULL) {
        Py_XDECREF(xc);
        return NULL;
    }
    int rc = 0;
    if (ampc_is_cuda(x)) {
        rc = ampc_cuda.histc(&s, x->dtype, xc->data, out->data);
    }
    else {
        RUN_KERNEL(s.n, rc = ampc_cpu.histc(&s, x->dtype, xc->data,
                                            out->data));
    }
    Py_DECREF(xc);
    if (rc != 0) {
        Py_DECREF(out);
        return ampc_is_cuda(x) ? ampc_cuda_raise(fn, rc) : PyErr_NoMemory();
    }
    return (PyObject *)out;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_stats_methods[] = {
    {"cummax", KW(op_cummax),
     "cummax(input, dim) -> (values, indices): the running max along dim "
     "and where it came from (a later tie and any NaN take over, as torch)"},
    {"cummin", KW(op_cummin),
     "cummin(input, dim) -> (values, indices): the running min, likewise"},
    {"histc", KW(op_histc),
     "histc(input, bins, min, max) -> the counts of input's elements in "
     "bins equal bins over [min, max] (min < max, both finite, rounded to "
     "input's dtype first), in input's dtype"},
    {NULL},
};
