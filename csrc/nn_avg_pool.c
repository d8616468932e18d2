/* nn_avg_pool.c - the Python-facing avg_pool2d and adaptive_avg_pool2d of
 * ampc._C and their backwards: torch's argument checks and output sizes,
 * the geometry (kernels.h ampc_avg_pool2d_shape), then a kernel slot.
 */
#include "ampc.h"

#include "nn_ops.h"

// ----------------------------------------------------------------------------
// geometry

/* The shape of a 3-D (C, H, W) or 4-D (N, C, H, W) input: planes, h, w. */
static int
input_planes(const char *fn, int nd, const int64_t *shape,
             ampc_avg_pool2d_shape *s)
{
    if (ampc_nn_pool_input_check(fn, nd, shape) < 0) {
        return -1;
    }
    s->h = shape[nd - 2];
    s->w = shape[nd - 1];
    s->planes = nd == 4 ? shape[0] * shape[1] : shape[0];
    return 0;
}

/* avg_pool2d's kernel_size, stride, padding, ceil_mode, count_include_pad
 * and divisor_override, checked as torch checks them, into s (whose h and
 * w are set), with the output size. */
static int
avg_geometry(const char *fn, PyObject *k_obj, PyObject *s_obj,
             PyObject *p_obj, int ceil_mode, int count_include_pad,
             PyObject *div_obj, ampc_avg_pool2d_shape *s)
{
    int64_t k[2], st[2], pad[2] = {0, 0};
    if (ampc_nn_parse_pair(fn, "kernel_size", k_obj, k) < 0 ||
        (p_obj != NULL &&
         ampc_nn_parse_pair(fn, "padding", p_obj, pad) < 0)) {
        return -1;
    }
    if (ampc_nn_parse_stride(fn, s_obj, k, st) < 0) {
        return -1;
    }
    s->divisor_override = 0;
    if (div_obj != NULL && div_obj != Py_None) {
        if (!PyLong_Check(div_obj) || PyBool_Check(div_obj)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): divisor_override must be None or an int, "
                         "got %R",
                         fn, div_obj);
            return -1;
        }
        s->divisor_override = PyLong_AsLongLong(div_obj);
        if (s->divisor_override == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (s->divisor_override == 0) {
            PyErr_Format(PyExc_RuntimeError, "%s(): divisor must be not zero",
                         fn);
            return -1;
        }
    }
    if (ampc_nn_pool_args_check(fn, k, st, pad, NULL) < 0) {
        return -1;
    }
    s->kh = k[0];
    s->kw = k[1];
    s->sh = st[0];
    s->sw = st[1];
    s->ph = pad[0];
    s->pw = pad[1];
    s->adaptive = 0;
    s->count_include_pad = count_include_pad;
    s->oh = ampc_nn_pool_out_size(s->h, s->kh, s->ph, s->sh, 1, ceil_mode);
    s->ow = ampc_nn_pool_out_size(s->w, s->kw, s->pw, s->sw, 1, ceil_mode);
    if (s->oh < 1 || s->ow < 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Given input size: (%lldx%lld). Calculated "
                     "output size: (%lldx%lld). Output size is too small",
                     fn, (long long)s->h, (long long)s->w, (long long)s->oh,
                     (long long)s->ow);
        return -1;
    }
    return 0;
}

/* adaptive_avg_pool2d's output_size: an int, or a pair whose None entries
 * keep the input's size. */
static int
adaptive_geometry(const char *fn, PyObject *size_obj,
                  ampc_avg_pool2d_shape *s)
{
    int64_t size[2];
    PyObject *items[2] = {size_obj, size_obj};
    int pair = PyTuple_Check(size_obj) || PyList_Check(size_obj);
    if (pair) {
        if (PySequence_Size(size_obj) != 2) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): output_size must be an int or a pair, got "
                         "%R",
                         fn, size_obj);
            return -1;
        }
        items[0] = PySequence_Fast_GET_ITEM(size_obj, 0);
        items[1] = PySequence_Fast_GET_ITEM(size_obj, 1);
    }
    for (int i = 0; i < 2; i++) {
        if (items[i] == Py_None && pair) {
            size[i] = i == 0 ? s->h : s->w;
            continue;
        }
        if (!PyLong_Check(items[i]) || PyBool_Check(items[i])) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): output_size must be an int or a pair of ints "
                         "(or None), got %R",
                         fn, size_obj);
            return -1;
        }
        size[i] = PyLong_AsLongLong(items[i]);
        if (size[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (size[i] < 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): elements of output_size must be greater than "
                         "or equal to 0 but received {%lld, %lld}",
                         fn, (long long)size[0], (long long)size[1]);
            return -1;
        }
    }
    s->oh = size[0];
    s->ow = size[1];
    s->kh = s->kw = s->sh = s->sw = 1;
    s->ph = s->pw = 0;
    s->adaptive = 1;
    s->count_include_pad = 0;
    s->divisor_override = 0;
    return 0;
}

// ----------------------------------------------------------------------------
// running the kernels

/* forward (backward == 0): src (planes, H, W) -> (planes, OH, OW); else
 * src (planes, OH, OW) -> (planes, H, W).  out_shape: the result's. */
static PyObject *
run(const char *fn, const ampc_avg_pool2d_shape *s, AmpcTensorObject *src,
    int nd, const int64_t *out_shape, int backward)
{
    AmpcTensorObject *sc = ampc_contiguous(src);
    AmpcTensorObject *out = sc == NULL ? NULL
                                       : ampc_tensor_empty(nd, out_shape,
                                                           src->dtype,
                                                           src->device);
    if (out == NULL) {
        Py_XDECREF(sc);
        return NULL;
    }
    int status = AMPC_NN_OK;
    if (ampc_is_cuda(src)) {
        int rc = backward ? ampc_cuda.avg_pool2d_bwd(s, src->dtype, sc->data,
                                                     out->data)
                          : ampc_cuda.avg_pool2d_fwd(s, src->dtype, sc->data,
                                                     out->data);
        if (rc != 0) {
            Py_DECREF(sc);
            Py_DECREF(out);
            return ampc_cuda_raise(fn, rc);
        }
    }
    else if (backward) {
        RUN_KERNEL(ampc_numel(out) + ampc_numel(src),
                   status = ampc_cpu.avg_pool2d_bwd(s, src->dtype, sc->data,
                                                    out->data));
    }
    else {
        RUN_KERNEL(ampc_numel(out) + ampc_numel(src),
                   status = ampc_cpu.avg_pool2d_fwd(s, src->dtype, sc->data,
                                                    out->data));
    }
    Py_DECREF(sc);
    if (status != AMPC_NN_OK) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return (PyObject *)out;
}

/* The forward: x (.., H, W) -> (.., OH, OW) with s's geometry. */
static PyObject *
forward(const char *fn, const ampc_avg_pool2d_shape *s, AmpcTensorObject *x)
{
    int64_t out_shape[4];
    int nd = x->ndim;
    memcpy(out_shape, x->shape, sizeof(int64_t) * (size_t)nd);
    out_shape[nd - 2] = s->oh;
    out_shape[nd - 1] = s->ow;
    return run(fn, s, x, nd, out_shape, 0);
}

/* The backward: grad_output must have the forward's output shape. */
static PyObject *
backward(const char *fn, const ampc_avg_pool2d_shape *s,
         AmpcTensorObject *g, const int64_t *in_shape)
{
    int nd = g->ndim;
    int64_t expect[4];
    memcpy(expect, in_shape, sizeof(int64_t) * (size_t)nd);
    expect[nd - 2] = s->oh;
    expect[nd - 1] = s->ow;
    if (ampc_arg_shape(fn, "grad_output", g, nd, expect, "the output") < 0) {
        return NULL;
    }
    return run(fn, s, g, nd, in_shape, 1);
}

/* grad_output (3-D or 4-D) and input_shape of its rank -> in_shape, with
 * s's planes, h and w. */
static int
backward_args(const char *fn, AmpcTensorObject *g, PyObject *shape_obj,
              int64_t *in_shape, ampc_avg_pool2d_shape *s)
{
    if (g->ndim != 3 && g->ndim != 4) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): grad_output must be 3-D (C, OH, OW) or 4-D (N, "
                     "C, OH, OW), got %d-D",
                     fn, g->ndim);
        return -1;
    }
    if (ampc_nn_parse_input_shape(fn, shape_obj, g->ndim, in_shape) < 0) {
        return -1;
    }
    return input_planes(fn, g->ndim, in_shape, s);
}

// ----------------------------------------------------------------------------
// Python functions

static PyObject *
op_avg_pool2d(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "kernel_size", "stride", "padding",
                             "ceil_mode", "count_include_pad",
                             "divisor_override", NULL};
    static const char *fn = "avg_pool2d";
    PyObject *x_obj, *k_obj, *s_obj = NULL, *p_obj = NULL, *d_obj = NULL;
    int ceil_mode = 0, count_include_pad = 1;
    AmpcTensorObject *x;
    ampc_avg_pool2d_shape s;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOppO:avg_pool2d",
                                     kwlist, &x_obj, &k_obj, &s_obj, &p_obj,
                                     &ceil_mode, &count_include_pad,
                                     &d_obj) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0 ||
        input_planes(fn, x->ndim, x->shape, &s) < 0 ||
        avg_geometry(fn, k_obj, s_obj, p_obj, ceil_mode, count_include_pad,
                     d_obj, &s) < 0) {
        return NULL;
    }
    return forward(fn, &s, x);
}

static PyObject *
op_avg_pool2d_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input_shape", "kernel_size",
                             "stride", "padding", "ceil_mode",
                             "count_include_pad", "divisor_override", NULL};
    static const char *fn = "avg_pool2d_backward";
    PyObject *g_obj, *shape_obj, *k_obj, *s_obj = NULL, *p_obj = NULL;
    PyObject *d_obj = NULL;
    int ceil_mode = 0, count_include_pad = 1;
    AmpcTensorObject *g;
    int64_t in_shape[4];
    ampc_avg_pool2d_shape s;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOO|OOppO:avg_pool2d_backward", kwlist, &g_obj,
            &shape_obj, &k_obj, &s_obj, &p_obj, &ceil_mode,
            &count_include_pad, &d_obj) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &g) < 0 ||
        backward_args(fn, g, shape_obj, in_shape, &s) < 0 ||
        avg_geometry(fn, k_obj, s_obj, p_obj, ceil_mode, count_include_pad,
                     d_obj, &s) < 0) {
        return NULL;
    }
    return backward(fn, &s, g, in_shape);
}

static PyObject *
op_adaptive_avg_pool2d(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "output_size", NULL};
    static const char *fn = "adaptive_avg_pool2d";
    PyObject *x_obj, *size_obj;
    AmpcTensorObject *x;
    ampc_avg_pool2d_shape s;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:adaptive_avg_pool2d",
                                     kwlist, &x_obj, &size_obj) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0 ||
        input_planes(fn, x->ndim, x->shape, &s) < 0 ||
        adaptive_geometry(fn, size_obj, &s) < 0) {
        return NULL;
    }
    return forward(fn, &s, x);
}

static PyObject *
op_adaptive_avg_pool2d_backward(PyObject *module, PyObject *args,
                                PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input_shape", NULL};
    static const char *fn = "adaptive_avg_pool2d_backward";
    PyObject *g_obj, *shape_obj;
    AmpcTensorObject *g;
    int64_t in_shape[4];
    ampc_avg_pool2d_shape s;
    if (!PyArg_ParseTupleAndKeywords(args, kwds,
                                     "OO:adaptive_avg_pool2d_backward",
                                     kwlist, &g_obj, &shape_obj) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &g) < 0 ||
        backward_args(fn, g, shape_obj, in_shape, &s) < 0) {
        return NULL;
    }
    s.adaptive = 1;
    s.count_include_pad = 0;
    s.divisor_override = 0;
    s.kh = s.kw = s.sh = s.sw = 1;
    s.ph = s.pw = 0;
    s.oh = g->shape[g->ndim - 2];
    s.ow = g->shape[g->ndim - 1];
    return backward(fn, &s, g, in_shape);
}

PyMethodDef ampc_nn_avg_pool_methods[] = {
    {"avg_pool2d", (PyCFunction)(void (*)(void))op_avg_pool2d,
     METH_VARARGS | METH_KEYWORDS,
     "avg_pool2d(input, kernel_size, stride=None, padding=0, "
     "ceil_mode=False, count_include_pad=True, divisor_override=None)"},
    {"avg_pool2d_backward",
     (PyCFunction)(void (*)(void))op_avg_pool2d_backward,
     METH_VARARGS | METH_KEYWORDS,
     "avg_pool2d_backward(grad_output, input_shape, kernel_size, "
     "stride=None, padding=0, ceil_mode=False, count_include_pad=True, "
     "divisor_override=None) -> grad_input"},
    {"adaptive_avg_pool2d",
     (PyCFunction)(void (*)(void))op_adaptive_avg_pool2d,
     METH_VARARGS | METH_KEYWORDS,
     "adaptive_avg_pool2d(input, output_size)"},
    {"adaptive_avg_pool2d_backward",
     (PyCFunction)(void (*)(void))op_adaptive_avg_pool2d_backward,
     METH_VARARGS | METH_KEYWORDS,
     "adaptive_avg_pool2d_backward(grad_output, input_shape) -> grad_input"},
    {NULL},
};
