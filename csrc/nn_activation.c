/* nn_activation.c - the Python-facing activation and dropout ops of
 * ampc._C, each with its backward: relu_backward (element-wise),
 * softmax and log_softmax (over one dim) and dropout (a Bernoulli mask from
 * the generator random_() uses).  Each op parses and checks its arguments,
 * makes its inputs contiguous, allocates its outputs and runs a kernel
 * slot.  No autograd here: ampc/nn/functional.py wraps these.
 */
#include "ampc.h"

#include <math.h>

#include "cpu/loops.h"
#include "nn_ops.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// relu_backward

static PyObject *
op_relu_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "output", NULL};
    static const char *fn = "relu_backward";
    PyObject *g_obj, *o_obj;
    AmpcTensorObject *g, *o;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:relu_backward", kwlist,
                                     &g_obj, &o_obj) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        (o = ampc_arg_tensor(fn, "output", o_obj)) == NULL ||
        ampc_arg_float(fn, "output", o) < 0 ||
        ampc_arg_dtype(fn, "grad_output", g, o->dtype, "output") < 0 ||
        ampc_arg_shape(fn, "grad_output", g, o->ndim, o->shape,
                       "output") < 0 ||
        ampc_nn_cuda_prologue(fn, 2, (AmpcTensorObject *[]){o, g}) < 0) {
        return NULL;
    }
    AmpcTensorObject *gc = ampc_contiguous(g);
    AmpcTensorObject *oc = gc == NULL ? NULL : ampc_contiguous(o);
    AmpcTensorObject *gi = oc == NULL ? NULL
                                      : ampc_tensor_empty(o->ndim, o->shape,
                                                          o->dtype,
                                                          o->device);
    if (gi != NULL) {
        int64_t n = ampc_numel(gi);
        if (ampc_is_cuda(o)) {
            int rc = ampc_cuda.relu_bwd(o->dtype, n, gc->data, oc->data,
                                        gi->data);
            if (rc != 0) {
                Py_CLEAR(gi);
                ampc_cuda_raise(fn, rc);
            }
        }
        else {
            RUN_KERNEL(n, ampc_cpu.relu_bwd(o->dtype, n, gc->data, oc->data,
                                            gi->data));
        }
    }
    Py_XDECREF(gc);
    Py_XDECREF(oc);
    return (PyObject *)gi;
}

// ----------------------------------------------------------------------------
// softmax and log_softmax

/* (outer, R, inner) of t around dim d; a 0-d tensor is one row of one. */
static void
split_dim(AmpcTensorObject *t, int d, int64_t *outer, int64_t *r,
          int64_t *inner)
{
    *outer = *r = *inner = 1;
    for (int k = 0; k < t->ndim; k++) {
        if (k < d) {
            *outer *= t->shape[k];
        }
        else if (k == d) {
            *r = t->shape[k];
        }
        else {
            *inner *= t->shape[k];
        }
    }
}

static int
parse_dim(const char *fn, PyObject *obj, int ndim)
{
    if (!PyIndex_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'dim' must be an int, not %.100s", fn,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t dim = PyNumber_AsSsize_t(obj, PyExc_OverflowError);
    if (dim == -1 && PyErr_Occurred()) {
        return -1;
    }
    return ampc_wrap_dim(fn, (long)dim, ndim);
}

static PyObject *
softmax_common(PyObject *args, PyObject *kwds, int log)
{
    static char *kwlist[] = {"input", "dim", "dtype", NULL};
    const char *fn = log ? "log_softmax" : "softmax";
    PyObject *x_obj, *dim_obj, *dt_obj = Py_None;
    AmpcTensorObject *x;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O", kwlist, &x_obj,
                                     &dim_obj, &dt_obj) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0) {
        return NULL;
    }
    ampc_dtype ydt = x->dtype;
    if (dt_obj != Py_None) {
        if (ampc_dtype_from_object(dt_obj, &ydt, fn, "dtype") < 0) {
            return NULL;
        }
        if (!ampc_dtype_is_float(ydt)) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): dtype must be a floating-point dtype "
                         "(float32, float16 or bfloat16), got %s",
                         fn, ampc_dtype_name(ydt));
            return NULL;
        }
    }
    else if (ampc_arg_float(fn, "input", x) < 0) {
        return NULL;
    }
    int d = parse_dim(fn, dim_obj, x->ndim);
    if (d < 0) {
        return NULL;
    }
    /* a non-float input is converted to dtype first, as torch does */
    ampc_dtype xdt = ampc_dtype_is_float(x->dtype) ? x->dtype : ydt;
    AmpcTensorObject *xc = ampc_nn_contiguous_as(x, xdt);
    AmpcTensorObject *y = xc == NULL ? NULL
                                     : ampc_tensor_empty(x->ndim, x->shape,
                                                         ydt, x->device);
    if (y != NULL && ampc_numel(y) > 0) {
        int64_t outer, r, inner;
        split_dim(x, d, &outer, &r, &inner);
        if (ampc_is_cuda(x)) {
            int rc = ampc_cuda.softmax_fwd(log, xdt, ydt, outer, r, inner,
                                           xc->data, y->data);
            if (rc != 0) {
                Py_CLEAR(y);
                ampc_cuda_raise(fn, rc);
            }
        }
        else {
            RUN_KERNEL(ampc_numel(y),
                       ampc_cpu.softmax_fwd(log, xdt, ydt, outer, r, inner,
                                            xc->data, y->data));
        }
    }
    Py_XDECREF(xc);
    return (PyObject *)y;
}

static PyObject *
op_softmax(PyObject *module, PyObject *args, PyObject *kwds)
{
    return softmax_common(args, kwds, 0);
}

static PyObject *
op_log_softmax(PyObject *module, PyObject *args, PyObject *kwds)
{
    return softmax_common(args, kwds, 1);
}

static PyObject *
softmax_backward_common(PyObject *args, PyObject *kwds, int log)
{
    static char *kwlist[] = {"grad_output", "output", "dim", NULL};
    const char *fn = log ? "log_softmax_backward" : "softmax_backward";
    PyObject *g_obj, *y_obj, *dim_obj;
    AmpcTensorObject *g, *y;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO", kwlist, &g_obj,
                                     &y_obj, &dim_obj) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        (y = ampc_arg_tensor(fn, "output", y_obj)) == NULL ||
        ampc_arg_float(fn, "output", y) < 0 ||
        ampc_arg_dtype(fn, "grad_output", g, y->dtype, "output") < 0 ||
        ampc_arg_shape(fn, "grad_output", g, y->ndim, y->shape,
                       "output") < 0 ||
        ampc_nn_cuda_prologue(fn, 2, (AmpcTensorObject *[]){y, g}) < 0) {
        return NULL;
    }
    int d = parse_dim(fn, dim_obj, y->ndim);
    if (d < 0) {
        return NULL;
    }
    AmpcTensorObject *gc = ampc_contiguous(g);
    AmpcTensorObject *yc = gc == NULL ? NULL : ampc_contiguous(y);
    AmpcTensorObject *gx = yc == NULL ? NULL
                                      : ampc_tensor_empty(y->ndim, y->shape,
                                                          y->dtype,
                                                          y->device);
    if (gx != NULL && ampc_numel(gx) > 0) {
        int64_t outer, r, inner;
        split_dim(y, d, &outer, &r, &inner);
        if (ampc_is_cuda(y)) {
            int rc = ampc_cuda.softmax_bwd(log, y->dtype, outer, r, inner,
                                           gc->data, yc->data, gx->data);
            if (rc != 0) {
                Py_CLEAR(gx);
                ampc_cuda_raise(fn, rc);
            }
        }
        else {
            RUN_KERNEL(ampc_numel(gx),
                       ampc_cpu.softmax_bwd(log, y->dtype, outer, r, inner,
                                            gc->data, yc->data, gx->data));
        }
    }
    Py_XDECREF(gc);
    Py_XDECREF(yc);
    return (PyObject *)gx;
}

static PyObject *
op_softmax_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    return softmax_backward_common(args, kwds, 0);
}

static PyObject *
op_log_softmax_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    return softmax_backward_common(args, kwds, 1);
}

// ----------------------------------------------------------------------------
// dropout

static int
check_p(const char *fn, double p)
{
    if (!(p >= 0.0 && p <= 1.0)) {
        ampc_nn_raise_number(PyExc_ValueError,
                     "%s(): dropout probability has to be between 0 and 1, "
                     "but got %R",
                     fn, p);
        return -1;
    }
    return 0;
}

/* 1 / (1 - p), and 0 for p == 1 (every element dropped), as torch */
static float
dropout_scale(double p)
{
    return p == 1.0 ? 0.0f : (float)(1.0 / (1.0 - p));
}

static PyObject *
op_dropout(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "p", "training", NULL};
    static const char *fn = "dropout";
    PyObject *x_obj;
    double p;
    int training = 1;
    AmpcTensorObject *x;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Od|p:dropout", kwlist,
                                     &x_obj, &p, &training) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 || check_p(fn, p) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    int64_t n = ampc_numel(x);
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *y = NULL, *mask = NULL;
    if (xc == NULL ||
        (y = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)) ==
            NULL ||
        (mask = ampc_tensor_empty(x->ndim, x->shape, AMPC_BOOL,
                                  x->device)) == NULL) {
        goto done;
    }
    if (!training) {
        /* evaluation: y is a copy, every element kept */
        if (ampc_is_cuda(x)) {
            if (ampc_fill_value(mask, Py_True, fn) < 0) {
                goto done;
            }
        }
        else {
            memset(mask->data, 1, (size_t)n);
        }
        if (ampc_copy_into(y, xc) < 0) {
            goto done;
        }
    }
    else if (ampc_is_cuda(x)) {
        /* the CPU's mask bits: the same generator state, advanced alike */
        ampc_state *st = ampc_get_state();
        uint64_t offset;
        const uint64_t *base;
        ampc_rng_claim(n, x->device, &offset, &base);
        int rc = ampc_cuda.random(AMPC_RAND_BERNOULLI, AMPC_BOOL, n,
                                  mask->data, st->seed, offset, base,
                                  1.0 - p, 0.0);
        if (rc == 0) {
            rc = ampc_cuda.masked_scale(x->dtype, n, xc->data,
                                        (const uint8_t *)mask->data,
                                        dropout_scale(p), y->data);
        }
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto done;
        }
    }
    else {
        /* keep with probability 1 - p, from the generator random_() uses:
         * the same state, advanced the same way */
        ampc_state *st = ampc_get_state();
        uint64_t offset = st->offset;
        st->offset += ((uint64_t)n + 3) & ~(uint64_t)3;
        RUN_KERNEL(n, (ampc_cpu.random(AMPC_RAND_BERNOULLI, AMPC_BOOL, n,
                                       mask->data, st->seed, offset, 1.0 - p,
                                       0.0),
                       ampc_cpu.masked_scale(x->dtype, n, xc->data,
                                             (const uint8_t *)mask->data,
                                             dropout_scale(p), y->data)));
    }
    result = PyTuple_Pack(2, y, mask);
done:
    Py_XDECREF(xc);
    Py_XDECREF(y);
    Py_XDECREF(mask);
    return result;
}

static PyObject *
op_dropout_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "mask", "p", NULL};
    static const char *fn = "dropout_backward";
    PyObject *g_obj, *m_obj;
    double p;
    AmpcTensorObject *g, *m;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOd:dropout_backward",
                                     kwlist, &g_obj, &m_obj, &p) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        (m = ampc_arg_tensor(fn, "mask", m_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 || check_p(fn, p) < 0 ||
        ampc_nn_cuda_prologue(fn, 2, (AmpcTensorObject *[]){g, m}) < 0) {
        return NULL;
    }
    if (m->dtype != AMPC_BOOL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected mask to have dtype bool, got %s", fn,
                     ampc_dtype_name(m->dtype));
        return NULL;
    }
    if (ampc_arg_shape(fn, "mask", m, g->ndim, g->shape, "grad_output") < 0) {
        return NULL;
    }
    int64_t n = ampc_numel(g);
    AmpcTensorObject *gc = ampc_contiguous(g);
    AmpcTensorObject *mc = gc == NULL ? NULL : ampc_contiguous(m);
    AmpcTensorObject *gx = mc == NULL ? NULL
                                      : ampc_tensor_empty(g->ndim, g->shape,
                                                          g->dtype,
                                                          g->device);
    if (gx != NULL && ampc_is_cuda(g)) {
        int rc = ampc_cuda.masked_scale(g->dtype, n, gc->data,
                                        (const uint8_t *)mc->data,
                                        dropout_scale(p), gx->data);
        if (rc != 0) {
            Py_CLEAR(gx);
            ampc_cuda_raise(fn, rc);
        }
    }
    else if (gx != NULL) {
        RUN_KERNEL(n, ampc_cpu.masked_scale(g->dtype, n, gc->data,
                                            (const uint8_t *)mc->data,
                                            dropout_scale(p), gx->data));
    }
    Py_XDECREF(gc);
    Py_XDECREF(mc);
    return (PyObject *)gx;
}

// ----------------------------------------------------------------------------

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_nn_activation_methods[] = {
    {"relu_backward", KW(op_relu_backward),
     "relu_backward(grad_output, output) -> grad where output > 0, else 0"},
    {"softmax", KW(op_softmax), "softmax(input, dim, dtype=None)"},
    {"log_softmax", KW(op_log_softmax),
     "log_softmax(input, dim, dtype=None)"},
    {"softmax_backward", KW(op_softmax_backward),
     "softmax_backward(grad_output, output, dim) -> grad_input"},
    {"log_softmax_backward", KW(op_log_softmax_backward),
     "log_softmax_backward(grad_output, output, dim) -> grad_input"},
    {"dropout", KW(op_dropout),
     "dropout(input, p, training=True) -> (output, mask)"},
    {"dropout_backward", KW(op_dropout_backward),
     "dropout_backward(grad_output, mask, p) -> grad_input"},
    {NULL},
};
