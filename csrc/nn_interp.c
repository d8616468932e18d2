/* nn_interp.c - the Python-facing interpolate and interpolate_backward of
 * ampc._C: the separable modes (interp.h) over 1 to 3 spatial axes, in
 * torch's linear (linear, bilinear, trilinear) or cubic (bicubic) form,
 * antialiased or not.  Checks the arguments, sets each axis's geometry
 * (torch's scale, the copy shortcuts), then runs a kernel slot.  The modes
 * and their error messages per rank are F.interpolate's (Python).
 */
#include "ampc.h"

#include "interp_math.h"
#include "nn_ops.h"

// ----------------------------------------------------------------------------
// arguments

/* 'linear' or 'cubic', antialiased or not -> the kind */
static int
parse_kind(const char *fn, const char *mode, int antialias,
           ampc_interp_kind *kind)
{
    if (strcmp(mode, "linear") == 0) {
        *kind = antialias ? AMPC_INTERP_AA_LINEAR : AMPC_INTERP_LINEAR;
        return 0;
    }
    if (strcmp(mode, "cubic") == 0) {
        *kind = antialias ? AMPC_INTERP_AA_CUBIC : AMPC_INTERP_CUBIC;
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "%s(): mode must be 'linear' or 'cubic', got '%s'", fn,
                 mode);
    return -1;
}

/* A sequence of k non-negative ints -> out (output_size, input_shape) */
static int
parse_sizes(const char *fn, const char *arg, PyObject *obj, int k,
            int64_t *out)
{
    PyObject *seq = (PyTuple_Check(obj) || PyList_Check(obj))
                        ? PySequence_Fast(obj, arg)
                        : NULL;
    if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != k) {
        Py_XDECREF(seq);
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a tuple of %d ints, got %R", fn, arg,
                     k, obj);
        return -1;
    }
    for (int d = 0; d < k; d++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, d);
        Py_ssize_t v = -1;
        if (PyIndex_Check(item) && !PyBool_Check(item)) {
            v = PyNumber_AsSsize_t(item, PyExc_OverflowError);
        }
        if (v < 0) {
            Py_DECREF(seq);
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError,
                             "%s(): %s must hold non-negative ints, got %R",
                             fn, arg, obj);
            }
            return -1;
        }
        out[d] = v;
    }
    Py_DECREF(seq);
    return 0;
}

/* scales: None, or k entries each None or a float (the scale_factor the
 * sampling uses; <= 0 or None: in / out) -> out[0:k] (-1 for none) */
static int
parse_scales(const char *fn, PyObject *obj, int k, double *out)
{
    for (int d = 0; d < k; d++) {
        out[d] = -1.0;
    }
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    PyObject *seq = (PyTuple_Check(obj) || PyList_Check(obj))
                        ? PySequence_Fast(obj, "scales")
                        : NULL;
    if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != k) {
        Py_XDECREF(seq);
        PyErr_Format(PyExc_TypeError,
                     "%s(): scales must be None or a tuple of %d floats (or "
                     "None), got %R",
                     fn, k, obj);
        return -1;
    }
    for (int d = 0; d < k; d++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, d);
        if (item == Py_None) {
            continue;
        }
        out[d] = PyFloat_AsDouble(item);
        if (out[d] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* s from the input's and output's k spatial sizes (the leading axes of
 * s->ax padded with size-1 copies); planes set by the caller. */
static int
set_geometry(const char *fn, int k, const int64_t *in, const int64_t *out,
             ampc_interp_kind kind, int align_corners, const double *scales,
             ampc_interp_shape *s)
{
    s->kind = kind;
    for (int a = 0; a < AMPC_INTERP_AXES; a++) {
        ampc_interp_axis *ax = &s->ax[a];
        int d = a - (AMPC_INTERP_AXES - k);
        ax->align_corners = align_corners;
        if (d < 0) {
            ax->n = ax->on = 1;
            ax->scale = 1.0f;
            ax->copy = ax->taps = 1;
            continue;
        }
        if (in[d] < 1 || out[d] < 1) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): input and output sizes should be greater "
                         "than 0, got input %lld and output %lld along "
                         "spatial dim %d",
                         fn, (long long)in[d], (long long)out[d], d);
            return -1;
        }
        ax->n = in[d];
        ax->on = out[d];
        ax->scale = ampc_interp_scale(in[d], out[d], align_corners,
                                      scales[d]);
        /* torch's shortcuts: linear's same-size copy, and the separable
         * antialias kernel's skip of a same-size dim (not cubic's) */
        ax->copy = kind != AMPC_INTERP_CUBIC && in[d] == out[d];
        ax->taps = ax->copy ? 1 : ampc_interp_max_taps(ax, kind);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// running the kernels

/* forward (backward == 0): src (.., D, H, W) -> (.., OD, OH, OW); else
 * src (.., OD, OH, OW) -> (.., D, H, W).  out_shape: the result's. */
static PyObject *
run(const char *fn, const ampc_interp_shape *s, AmpcTensorObject *src,
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
    if (s->planes == 0) {
        /* nothing to compute */
    }
    else if (ampc_is_cuda(src)) {
        int rc = backward ? ampc_cuda.interp_bwd(s, src->dtype, sc->data,
                                                 out->data)
                          : ampc_cuda.interp_fwd(s, src->dtype, sc->data,
                                                 out->data);
        if (rc != 0) {
            Py_DECREF(sc);
            Py_DECREF(out);
            return ampc_cuda_raise(fn, rc);
        }
    }
    else if (backward) {
        RUN_KERNEL(ampc_numel(out) + ampc_numel(src),
                   status = ampc_cpu.interp_bwd(s, src->dtype, sc->data,
                                                out->data));
    }
    else {
        RUN_KERNEL(ampc_numel(out) + ampc_numel(src),
                   status = ampc_cpu.interp_fwd(s, src->dtype, sc->data,
                                                out->data));
    }
    Py_DECREF(sc);
    if (status != AMPC_NN_OK) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return (PyObject *)out;
}

// ----------------------------------------------------------------------------
// Python functions

static PyObject *
op_interpolate(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "output_size", "mode",
                             "align_corners", "scales", "antialias", NULL};
    static const char *fn = "interpolate";
    PyObject *x_obj, *size_obj, *scales_obj = NULL;
    const char *mode;
    int align_corners = 0, antialias = 0;
    AmpcTensorObject *x;
    ampc_interp_kind kind;
    ampc_interp_shape s;
    int64_t out_size[AMPC_INTERP_AXES], out_shape[AMPC_INTERP_AXES + 2];
    double scales[AMPC_INTERP_AXES];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOs|pOp:interpolate",
                                     kwlist, &x_obj, &size_obj, &mode,
                                     &align_corners, &scales_obj,
                                     &antialias) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 ||
        parse_kind(fn, mode, antialias, &kind) < 0) {
        return NULL;
    }
    int k = x->ndim - 2;
    if (k < 1 || k > AMPC_INTERP_AXES) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input must be 3-D, 4-D or 5-D (N, C, spatial "
                     "dims), got %d-D",
                     fn, x->ndim);
        return NULL;
    }
    if (parse_sizes(fn, "output_size", size_obj, k, out_size) < 0 ||
        parse_scales(fn, scales_obj, k, scales) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0 ||
        set_geometry(fn, k, x->shape + 2, out_size, kind, align_corners,
                     scales, &s) < 0) {
        return NULL;
    }
    s.planes = x->shape[0] * x->shape[1];
    out_shape[0] = x->shape[0];
    out_shape[1] = x->shape[1];
    memcpy(out_shape + 2, out_size, sizeof(int64_t) * (size_t)k);
    return run(fn, &s, x, x->ndim, out_shape, 0);
}

static PyObject *
op_interpolate_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input_shape", "mode",
                             "align_corners", "scales", "antialias", NULL};
    static const char *fn = "interpolate_backward";
    PyObject *g_obj, *shape_obj, *scales_obj = NULL;
    const char *mode;
    int align_corners = 0, antialias = 0;
    AmpcTensorObject *g;
    ampc_interp_kind kind;
    ampc_interp_shape s;
    int64_t in_shape[AMPC_INTERP_AXES + 2];
    double scales[AMPC_INTERP_AXES];
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOs|pOp:interpolate_backward", kwlist, &g_obj,
            &shape_obj, &mode, &align_corners, &scales_obj, &antialias) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 ||
        parse_kind(fn, mode, antialias, &kind) < 0) {
        return NULL;
    }
    int k = g->ndim - 2;
    if (k < 1 || k > AMPC_INTERP_AXES) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): grad_output must be 3-D, 4-D or 5-D, got %d-D",
                     fn, g->ndim);
        return NULL;
    }
    if (parse_sizes(fn, "input_shape", shape_obj, k + 2, in_shape) < 0 ||
        parse_scales(fn, scales_obj, k, scales) < 0) {
        return NULL;
    }
    if (in_shape[0] != g->shape[0] || in_shape[1] != g->shape[1]) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input_shape must match grad_output in its (N, "
                     "C) dims",
                     fn);
        return NULL;
    }
    if (ampc_nn_cuda_prologue(fn, 1, &g) < 0 ||
        set_geometry(fn, k, in_shape + 2, g->shape + 2, kind, align_corners,
                     scales, &s) < 0) {
        return NULL;
    }
    s.planes = g->shape[0] * g->shape[1];
    return run(fn, &s, g, g->ndim, in_shape, 1);
}

PyMethodDef ampc_nn_interp_methods[] = {
    {"interpolate", (PyCFunction)(void (*)(void))op_interpolate,
     METH_VARARGS | METH_KEYWORDS,
     "interpolate(input, output_size, mode, align_corners=False, "
     "scales=None, antialias=False): mode 'linear' or 'cubic' over the "
     "spatial dims of (N, C, *spatial) input"},
    {"interpolate_backward",
     (PyCFunction)(void (*)(void))op_interpolate_backward,
     METH_VARARGS | METH_KEYWORDS,
     "interpolate_backward(grad_output, input_shape, mode, "
     "align_corners=False, scales=None, antialias=False) -> grad_input"},
    {NULL},
};
