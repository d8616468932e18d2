/* nn_pool.c - the Python-facing max_pool2d of ampc._C and its backward:
 * the argument and geometry checks (torch's messages), the output shape
 * (torch's pooling_output_shape), then a kernel slot.  On a GPU a bad index
 * given to the backward is reported later, through the deferred error
 * record that nn_ops.c reads.
 */
#include "ampc.h"

#include <math.h>

#include "cpu/loops.h"
#include "nn_ops.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// argument helpers

int
ampc_nn_parse_pair(const char *fn, const char *arg, PyObject *obj,
                   int64_t out[2])
{
    PyObject *items[2] = {obj, obj};
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        Py_ssize_t n = PySequence_Size(obj);
        if (n != 1 && n != 2) {
            goto bad;
        }
        items[0] = PySequence_Fast_GET_ITEM(obj, 0);
        items[1] = PySequence_Fast_GET_ITEM(obj, n - 1);
    }
    for (int i = 0; i < 2; i++) {
        if (!PyIndex_Check(items[i]) || PyBool_Check(items[i])) {
            goto bad;
        }
        Py_ssize_t v = PyNumber_AsSsize_t(items[i], PyExc_OverflowError);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        out[i] = v;
    }
    return 0;
bad:
    PyErr_Format(PyExc_TypeError,
                 "%s(): argument '%s' must be an int or a tuple of two "
                 "ints, got %R",
                 fn, arg, obj);
    return -1;
}

// ----------------------------------------------------------------------------
// max_pool2d

int64_t
ampc_nn_pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride,
              int64_t dil, int ceil_mode)
{
    int64_t num = in + 2 * pad - dil * (k - 1) - 1 +
                  (ceil_mode ? stride - 1 : 0);
    int64_t q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);
    int64_t out = q + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) {
        out--;
    }
    return out;
}

int
ampc_nn_parse_stride(const char *fn, PyObject *obj, const int64_t k[2],
                     int64_t st[2])
{
    /* None (or absent) or () means the kernel size, as in torch */
    if (obj == NULL || obj == Py_None ||
        ((PyTuple_Check(obj) || PyList_Check(obj)) &&
         PySequence_Size(obj) == 0)) {
        st[0] = k[0];
        st[1] = k[1];
        return 0;
    }
    return ampc_nn_parse_pair(fn, "stride", obj, st);
}

int
ampc_nn_pool_input_check(const char *fn, int nd, const int64_t *shape)
{
    if ((nd != 3 && nd != 4) || shape[nd - 1] == 0 || shape[nd - 2] == 0 ||
        shape[nd - 3] == 0) {
        char buf[256];
        ampc_format_shape(buf, sizeof(buf), nd, shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected 3D (C, H, W) or 4D (N, C, H, W) input "
                     "with non-zero C, H and W (N may be 0), but got %s",
                     fn, buf);
        return -1;
    }
    return 0;
}

int
ampc_nn_pool_args_check(const char *fn, const int64_t k[2],
                        const int64_t st[2], const int64_t pad[2],
                        const int64_t dil[2])
{
    const char *bad = NULL;
    if (k[0] <= 0 || k[1] <= 0) {
        bad = "kernel_size must be greater than zero";
    }
    else if (st[0] <= 0 || st[1] <= 0) {
        bad = "stride must be greater than zero";
    }
    else if (dil != NULL && (dil[0] <= 0 || dil[1] <= 0)) {
        bad = "dilation must be greater than zero";
    }
    else if (pad[0] < 0 || pad[1] < 0) {
        bad = "padding must be non-negative";
    }
    else if (pad[0] > k[0] / 2 || pad[1] > k[1] / 2) {
        bad = "padding should be at most half of kernel_size";
    }
    if (bad == NULL) {
        return 0;
    }
    char dil_text[64] = "";
    if (dil != NULL) {
        PyOS_snprintf(dil_text, sizeof(dil_text), ", dilation=(%lld, %lld)",
                      (long long)dil[0], (long long)dil[1]);
    }
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): %s, but got kernel_size=(%lld, %lld), "
                 "stride=(%lld, %lld), padding=(%lld, %lld)%s",
                 fn, bad, (long long)k[0], (long long)k[1], (long long)st[0],
                 (long long)st[1], (long long)pad[0], (long long)pad[1],
                 dil_text);
    return -1;
}

static PyObject *
op_max_pool2d(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "kernel_size", "stride", "padding",
                             "dilation", "ceil_mode", "relu_masked", NULL};
    static const char *fn = "max_pool2d";
    PyObject *x_obj, *k_obj, *s_obj = Py_None, *p_obj = NULL, *d_obj = NULL;
    int ceil_mode = 0, relu_masked = 0;
    int64_t k[2], st[2], pad[2] = {0, 0}, dil[2] = {1, 1};
    AmpcTensorObject *x;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOOp$p:max_pool2d",
                                     kwlist, &x_obj, &k_obj, &s_obj, &p_obj,
                                     &d_obj, &ceil_mode, &relu_masked) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0 ||
        ampc_nn_parse_pair(fn, "kernel_size", k_obj, k) < 0 ||
        (p_obj != NULL &&
         ampc_nn_parse_pair(fn, "padding", p_obj, pad) < 0) ||
        (d_obj != NULL &&
         ampc_nn_parse_pair(fn, "dilation", d_obj, dil) < 0)) {
        return NULL;
    }
    if (ampc_nn_parse_stride(fn, s_obj, k, st) < 0) {
        return NULL;
    }
    int nd = x->ndim;
    if (ampc_nn_pool_input_check(fn, nd, x->shape) < 0 ||
        ampc_nn_pool_args_check(fn, k, st, pad, dil) < 0) {
        return NULL;
    }
    ampc_pool2d_shape s = {
        .h = x->shape[nd - 2], .w = x->shape[nd - 1],
        .kh = k[0], .kw = k[1], .sh = st[0], .sw = st[1],
        .ph = pad[0], .pw = pad[1], .dh = dil[0], .dw = dil[1],
        .relu_masked = relu_masked};
    s.oh = ampc_nn_pool_out_size(s.h, s.kh, s.ph, s.sh, s.dh, ceil_mode);
    s.ow = ampc_nn_pool_out_size(s.w, s.kw, s.pw, s.sw, s.dw, ceil_mode);
    int64_t c = x->shape[nd - 3];
    if (s.oh < 1 || s.ow < 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Given input size: (%lldx%lldx%lld). Calculated "
                     "output size: (%lldx%lldx%lld). Output size is too "
                     "small",
                     fn, (long long)c, (long long)s.h, (long long)s.w,
                     (long long)c, (long long)s.oh, (long long)s.ow);
        return NULL;
    }
    s.planes = nd == 4 ? x->shape[0] * c : c;
    int64_t out_shape[4];
    memcpy(out_shape, x->shape, sizeof(int64_t) * nd);
    out_shape[nd - 2] = s.oh;
    out_shape[nd - 1] = s.ow;

    PyObject *result = NULL;
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *y = NULL, *idx = NULL;
    if (xc == NULL ||
        (y = ampc_tensor_empty(nd, out_shape, x->dtype, x->device)) == NULL ||
        (idx = ampc_tensor_empty(nd, out_shape, AMPC_INT64, x->device)) ==
            NULL) {
        goto done;
    }
    if (ampc_is_cuda(x)) {
        int rc = ampc_cuda.max_pool2d_fwd(&s, x->dtype, xc->data, y->data,
                                          (int64_t *)idx->data);
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto done;
        }
    }
    else {
        RUN_KERNEL(ampc_numel(x), ampc_cpu.max_pool2d_fwd(
                                      &s, x->dtype, xc->data, y->data,
                                      (int64_t *)idx->data));
    }
    result = PyTuple_Pack(2, y, idx);
done:
    Py_XDECREF(xc);
    Py_XDECREF(y);
    Py_XDECREF(idx);
    return result;
}

int
ampc_nn_parse_input_shape(const char *fn, PyObject *obj, int ndim,
                          int64_t *shape)
{
    PyObject *seq = (PyTuple_Check(obj) || PyList_Check(obj))
                        ? PySequence_Fast(obj, "input_shape")
                        : NULL;
    if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != ndim) {
        Py_XDECREF(seq);
        PyErr_Format(PyExc_TypeError,
                     "%s(): input_shape must be a tuple of %d ints (the "
                     "rank of grad_output), got %R",
                     fn, ndim, obj);
        return -1;
    }
    for (int d = 0; d < ndim; d++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, d);
        Py_ssize_t v = -1;
        if (PyIndex_Check(item) && !PyBool_Check(item)) {
            v = PyNumber_AsSsize_t(item, PyExc_OverflowError);
        }
        if (v < 0) {
            Py_DECREF(seq);
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError,
                             "%s(): input_shape must hold non-negative "
                             "ints, got %R",
                             fn, obj);
            }
            return -1;
        }
        shape[d] = v;
    }
    Py_DECREF(seq);
    return 0;
}

/* The forward's geometry, optional for the backward (kernel_size None:
 * absent, kh = 0); the CUDA kernel then gathers instead of scanning. */
static int
parse_pool_geometry(const char *fn, PyObject *k_obj, PyObject *s_obj,
                    PyObject *p_obj, PyObject *d_obj, ampc_pool2d_shape *s)
{
    int64_t k[2], st[2], pad[2] = {0, 0}, dil[2] = {1, 1};
    if (k_obj == Py_None) {
        s->kh = s->kw = 0;
        return 0;
    }
    if (ampc_nn_parse_pair(fn, "kernel_size", k_obj, k) < 0 ||
        (p_obj != Py_None &&
         ampc_nn_parse_pair(fn, "padding", p_obj, pad) < 0) ||
        (d_obj != Py_None &&
         ampc_nn_parse_pair(fn, "dilation", d_obj, dil) < 0)) {
        return -1;
    }
    if (ampc_nn_parse_stride(fn, s_obj, k, st) < 0) {
        return -1;
    }
    if (k[0] <= 0 || k[1] <= 0 || st[0] <= 0 || st[1] <= 0 || dil[0] <= 0 ||
        dil[1] <= 0 || pad[0] < 0 || pad[1] < 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): kernel_size, stride and dilation must be "
                     "positive and padding non-negative, as in the "
                     "forward",
                     fn);
        return -1;
    }
    s->kh = k[0];
    s->kw = k[1];
    s->sh = st[0];
    s->sw = st[1];
    s->ph = pad[0];
    s->pw = pad[1];
    s->dh = dil[0];
    s->dw = dil[1];
    return 0;
}

static PyObject *
op_max_pool2d_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "indices", "input_shape",
                             "kernel_size", "stride", "padding", "dilation",
                             "relu_masked", NULL};
    static const char *fn = "max_pool2d_backward";
    PyObject *g_obj, *i_obj, *shape_obj;
    PyObject *k_obj = Py_None, *s_obj = Py_None, *p_obj = Py_None;
    PyObject *d_obj = Py_None;
    AmpcTensorObject *g, *ix;
    int64_t in_shape[4];
    int relu_masked = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds,
                                     "OOO|OOOO$p:max_pool2d_backward", kwlist,
                                     &g_obj, &i_obj, &shape_obj, &k_obj,
                                     &s_obj, &p_obj, &d_obj, &relu_masked) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        (ix = ampc_arg_tensor(fn, "indices", i_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 ||
        ampc_nn_cuda_prologue(fn, 2, (AmpcTensorObject *[]){g, ix}) < 0) {
        return NULL;
    }
    int nd = g->ndim;
    if (nd != 3 && nd != 4) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): grad_output must be 3-D (C, OH, OW) or 4-D (N, "
                     "C, OH, OW), got %d-D",
                     fn, nd);
        return NULL;
    }
    if (ix->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected indices to have dtype int64, got %s", fn,
                     ampc_dtype_name(ix->dtype));
        return NULL;
    }
    if (ampc_arg_shape(fn, "indices", ix, nd, g->shape, "grad_output") < 0 ||
        ampc_nn_parse_input_shape(fn, shape_obj, nd, in_shape) < 0) {
        return NULL;
    }
    int lead_ok = 1;
    for (int d = 0; d < nd - 2; d++) {
        lead_ok = lead_ok && in_shape[d] == g->shape[d];
    }
    if (!lead_ok || in_shape[nd - 1] == 0 || in_shape[nd - 2] == 0) {
        char a[256], b[256];
        ampc_format_shape(a, sizeof(a), nd, in_shape);
        ampc_format_shape(b, sizeof(b), nd, g->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input_shape %s must match grad_output %s in its "
                     "leading (N, C) dims and have H, W >= 1",
                     fn, a, b);
        return NULL;
    }
    ampc_pool2d_shape s = {.h = in_shape[nd - 2], .w = in_shape[nd - 1],
                           .oh = g->shape[nd - 2], .ow = g->shape[nd - 1],
                           .relu_masked = relu_masked};
    s.planes = nd == 4 ? g->shape[0] * g->shape[1] : g->shape[0];
    if (parse_pool_geometry(fn, k_obj, s_obj, p_obj, d_obj, &s) < 0) {
        return NULL;
    }

    PyObject *result = NULL;
    AmpcTensorObject *gc = ampc_contiguous(g);
    AmpcTensorObject *ic = gc == NULL ? NULL : ampc_contiguous(ix);
    AmpcTensorObject *gi = ic == NULL ? NULL
                                      : ampc_tensor_empty(nd, in_shape,
                                                          g->dtype,
                                                          g->device);
    if (gi == NULL) {
        goto done;
    }
    int status = AMPC_NN_OK;
    if (ampc_is_cuda(g)) {
        /* a bad index is reported by the GPU, later (check_deferred) */
        int rc = ampc_cuda.max_pool2d_bwd(&s, g->dtype, gc->data,
                                          (const int64_t *)ic->data,
                                          gi->data);
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto done;
        }
    }
    else {
        RUN_KERNEL(ampc_numel(gi) + ampc_numel(g),
                   status = ampc_cpu.max_pool2d_bwd(
                       &s, g->dtype, gc->data, (const int64_t *)ic->data,
                       gi->data));
    }
    if (status == AMPC_NN_NO_MEMORY) {
        PyErr_NoMemory();
    }
    else if (status != AMPC_NN_OK) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): indices must lie in [0, %lld), the H*W elements "
                     "of an input plane; found one outside",
                     fn, (long long)(s.h * s.w));
    }
    else {
        result = Py_NewRef(gi);
    }
done:
    Py_XDECREF(gc);
    Py_XDECREF(ic);
    Py_XDECREF(gi);
    return result;
}

/* max_pool2d_gather(input, indices, *, relu_masked=False): input (N, C, H,
 * W) or (C, H, W) at the indices of a max_pool2d -> a tensor of the
 * indices' shape: the adjoint of max_pool2d_backward, for second
 * derivatives through the pooling. */
static PyObject *
op_max_pool2d_gather(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "indices", "relu_masked", NULL};
    static const char *fn = "max_pool2d_gather";
    PyObject *x_obj, *i_obj;
    AmpcTensorObject *x, *ix;
    int relu_masked = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$p:max_pool2d_gather",
                                     kwlist, &x_obj, &i_obj, &relu_masked) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        (ix = ampc_arg_tensor(fn, "indices", i_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 ||
        ampc_nn_cuda_prologue(fn, 2, (AmpcTensorObject *[]){x, ix}) < 0) {
        return NULL;
    }
    int nd = x->ndim;
    if (ix->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected indices to have dtype int64, got %s", fn,
                     ampc_dtype_name(ix->dtype));
        return NULL;
    }
    int lead_ok = (nd == 3 || nd == 4) && ix->ndim == nd;
    for (int d = 0; lead_ok && d < nd - 2; d++) {
        lead_ok = x->shape[d] == ix->shape[d];
    }
    if (!lead_ok) {
        char a[256], b[256];
        ampc_format_shape(a, sizeof(a), nd, x->shape);
        ampc_format_shape(b, sizeof(b), ix->ndim, ix->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input %s and indices %s must both be 3-D (C, "
                     "H, W) or 4-D (N, C, H, W) with the same leading (N, "
                     "C) dims",
                     fn, a, b);
        return NULL;
    }
    ampc_pool2d_shape s = {.h = x->shape[nd - 2], .w = x->shape[nd - 1],
                           .oh = ix->shape[nd - 2], .ow = ix->shape[nd - 1],
                           .relu_masked = relu_masked};
    s.planes = nd == 4 ? x->shape[0] * x->shape[1] : x->shape[0];

    PyObject *result = NULL;
    size_t es = ampc_dtype_size[x->dtype];
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *ic = xc == NULL ? NULL : ampc_contiguous(ix);
    AmpcTensorObject *out = ic == NULL ? NULL
                                       : ampc_tensor_empty(nd, ix->shape,
                                                           x->dtype,
                                                           x->device);
    if (out == NULL) {
        goto done;
    }
    int status = AMPC_NN_OK;
    if (ampc_is_cuda(x)) {
        /* a bad index is reported by the GPU, later (check_deferred) */
        int rc = ampc_cuda.max_pool2d_gather(&s, es, xc->data,
                                             (const int64_t *)ic->data,
                                             out->data);
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto done;
        }
    }
    else {
        RUN_KERNEL(ampc_numel(out),
                   status = ampc_cpu.max_pool2d_gather(
                       &s, es, xc->data, (const int64_t *)ic->data,
                       out->data));
    }
    if (status != AMPC_NN_OK) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): indices must lie in [0, %lld), the H*W elements "
                     "of an input plane; found one outside",
                     fn, (long long)(s.h * s.w));
    }
    else {
        result = Py_NewRef(out);
    }
done:
    Py_XDECREF(xc);
    Py_XDECREF(ic);
    Py_XDECREF(out);
    return result;
}

// ----------------------------------------------------------------------------

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_nn_pool_methods[] = {
    {"max_pool2d", KW(op_max_pool2d),
     "max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, "
     "ceil_mode=False, *, relu_masked=False) -> (output, indices); "
     "relu_masked: an output <= 0 gets index -1 - idx, which "
     "max_pool2d_backward(relu_masked=True) skips: the backward of "
     "max_pool2d(relu(x)) without relu's output"},
    {"max_pool2d_backward", KW(op_max_pool2d_backward),
     "max_pool2d_backward(grad_output, indices, input_shape, kernel_size="
     "None, stride=None, padding=None, dilation=None, *, relu_masked=False)"
     " -> grad_input"},
    {"max_pool2d_gather", KW(op_max_pool2d_gather),
     "max_pool2d_gather(input, indices, *, relu_masked=False) -> input at "
     "the indices of a max_pool2d (0 at a relu_masked one): the adjoint of "
     "max_pool2d_backward"},
    {NULL},
};
