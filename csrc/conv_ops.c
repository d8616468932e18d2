/* conv_ops.c - conv2d, conv2d_backward and conv2d_input_grad (the
 * transposed convolution) of ampc._C (raw ops, no autograd), and the cuDNN
 * algorithm cache and version queries.  Parse and check (linalg_ops.h),
 * allocate, then run the conv2d slots of the CPU table (the GIL released)
 * or, for CUDA tensors, of the CUDA table (cuDNN, or the im2col fallback,
 * with ampc.backends.cudnn's options).
 */
#include "linalg_ops.h"

// ----------------------------------------------------------------------------
// conv2d

/* stride, padding and dilation as pairs, checked; NULL objects keep the
 * values already in s, p, d.  -1 with an exception. */
static int
parse_conv_params(const char *fn, PyObject *st, PyObject *pad, PyObject *dil,
                  int64_t s[2], int64_t p[2], int64_t d[2])
{
    if ((st != NULL && ampc_la_parse_pair(fn, "stride", st, s) < 0) ||
        (pad != NULL && ampc_la_parse_pair(fn, "padding", pad, p) < 0) ||
        (dil != NULL && ampc_la_parse_pair(fn, "dilation", dil, d) < 0)) {
        return -1;
    }
    if (s[0] <= 0 || s[1] <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): stride must be positive, got (%lld, %lld)", fn,
                     (long long)s[0], (long long)s[1]);
        return -1;
    }
    if (p[0] < 0 || p[1] < 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): padding must be non-negative, got (%lld, %lld)",
                     fn, (long long)p[0], (long long)p[1]);
        return -1;
    }
    if (d[0] <= 0 || d[1] <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): dilation must be positive, got (%lld, %lld)",
                     fn, (long long)d[0], (long long)d[1]);
        return -1;
    }
    return 0;
}

/* groups: a positive int (NULL: 1); -1 with an exception. */
static int
parse_groups(const char *fn, PyObject *obj, int64_t *groups)
{
    *groups = 1;
    if (obj == NULL) {
        return 0;
    }
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): expected groups to be a positive int, got %R",
                     fn, obj);
        return -1;
    }
    *groups = PyLong_AsLongLong(obj);
    if (*groups == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (*groups < 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected groups to be a positive int, got %lld",
                     fn, (long long)*groups);
        return -1;
    }
    return 0;
}

/* c input channels against weight (OC, C/G, KH, KW) for G groups: G
 * divides C and OC; -1 with an exception. */
static int
check_channels(const char *fn, int64_t c, AmpcTensorObject *w, int64_t groups)
{
    char buf[256];
    ampc_format_shape(buf, sizeof(buf), 4, w->shape);
    if (groups == 1) {
        if (c == w->shape[1]) {
            return 0;
        }
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected input to have %lld channels (weight "
                     "has shape %s), got %lld channels",
                     fn, (long long)w->shape[1], buf, (long long)c);
        return -1;
    }
    if (c % groups != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected input's channels to be divisible by "
                     "groups=%lld, got %lld channels",
                     fn, (long long)groups, (long long)c);
        return -1;
    }
    if (w->shape[0] % groups != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected weight's output channels (dim 0) to be "
                     "divisible by groups=%lld, got weight of shape %s",
                     fn, (long long)groups, buf);
        return -1;
    }
    if (w->shape[1] * groups != c) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected weight to have %lld input channels "
                     "per group (dim 1: the input's %lld channels / "
                     "groups=%lld), got weight of shape %s",
                     fn, (long long)(c / groups), (long long)c,
                     (long long)groups, buf);
        return -1;
    }
    return 0;
}

/* An input of shape xs (N, C, H, W) against weight (OC, C/G, KH, KW) and
 * bias (OC) or NULL, of the input's dtype: checks and fills the shape; -1
 * with an exception. */
static int
conv_geometry(const char *fn, const int64_t xs[4], AmpcTensorObject *w,
              AmpcTensorObject *b, const int64_t st[2], const int64_t pad[2],
              const int64_t dil[2], int64_t groups, ampc_conv2d_shape *s)
{
    char buf[256];
    if (ampc_la_check_ndim(fn, "weight", w, 4, "(OC, C, KH, KW)") < 0 ||
        check_channels(fn, xs[1], w, groups) < 0) {
        return -1;
    }
    if (w->shape[2] < 1 || w->shape[3] < 1) {
        ampc_format_shape(buf, sizeof(buf), 4, w->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): weight must have a kernel of at least 1x1, got "
                     "shape %s",
                     fn, buf);
        return -1;
    }
    if (b != NULL) {
        if (ampc_la_same_dtype(fn, "bias", b, "weight", w) < 0) {
            return -1;
        }
        if (b->ndim != 1 || b->shape[0] != w->shape[0]) {
            ampc_format_shape(buf, sizeof(buf), b->ndim, b->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): expected bias to have shape [%lld] (one "
                         "per output channel), got %s",
                         fn, (long long)w->shape[0], buf);
            return -1;
        }
    }
    *s = (ampc_conv2d_shape){
        .n = xs[0], .c = xs[1], .h = xs[2], .w = xs[3], .oc = w->shape[0], .kh = w->shape[2],
        .kw = w->shape[3], .groups = groups, .sh = st[0], .sw = st[1],
        .ph = pad[0],
        .pw = pad[1], .dh = dil[0], .dw = dil[1],
    };
    int64_t eh = s->dh * (s->kh - 1) + 1, ew = s->dw * (s->kw - 1) + 1;
    int64_t ph = s->h + 2 * s->ph, pw = s->w + 2 * s->pw;
    s->oh = ph >= eh ? (ph - eh) / s->sh + 1 : 0;
    s->ow = pw >= ew ? (pw - ew) / s->sw + 1 : 0;
    if (s->oh < 1 || s->ow < 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): output size is too small: the padded input is "
                     "%lldx%lld but the dilated kernel is %lldx%lld "
                     "(output %lldx%lld)",
                     fn, (long long)ph, (long long)pw, (long long)eh,
                     (long long)ew, (long long)s->oh, (long long)s->ow);
        return -1;
    }
    return 0;
}

/* x (N, C, H, W), weight (OC, C/G, KH, KW), bias (OC) or NULL: checks and
 * fills the shape; -1 with an exception. */
static int
conv_shape(const char *fn, AmpcTensorObject *x, AmpcTensorObject *w,
           AmpcTensorObject *b, const int64_t st[2], const int64_t pad[2],
           const int64_t dil[2], int64_t groups, ampc_conv2d_shape *s)
{
    if (ampc_la_check_ndim(fn, "input", x, 4, "(N, C, H, W)") < 0 ||
        ampc_la_same_dtype(fn, "weight", w, "input", x) < 0) {
        return -1;
    }
    return conv_geometry(fn, x->shape, w, b, st, pad, dil, groups, s);
}

static double
conv_flops(const ampc_conv2d_shape *s)
{
    return 2.0 * (double)s->n * (double)s->oc * (double)s->oh *
           (double)s->ow * (double)(s->c / s->groups * s->kh * s->kw);
}

/* x (N, C, H, W), weight (OC, C/G, KH, KW), bias (OC) -> y (N, OC, OH,
 * OW) */
static PyObject *
op_conv2d(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "weight", "bias", "stride", "padding",
                             "dilation", "relu", "groups", NULL};
    const char *fn = "conv2d";
    PyObject *x_obj, *w_obj, *b_obj = Py_None;
    PyObject *st_obj = NULL, *pad_obj = NULL, *dil_obj = NULL, *g_obj = NULL;
    int relu = 0;
    int64_t st[2] = {1, 1}, pad[2] = {0, 0}, dil[2] = {1, 1}, groups;
    AmpcTensorObject *x, *w, *b = NULL, *xc = NULL, *wc = NULL, *bc = NULL;
    AmpcTensorObject *y = NULL;
    ampc_conv2d_shape s;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOOOpO:conv2d", kwlist,
                                     &x_obj, &w_obj, &b_obj, &st_obj,
                                     &pad_obj, &dil_obj, &relu, &g_obj) ||
        (x = ampc_la_float_tensor(fn, "input", x_obj)) == NULL ||
        (w = ampc_la_float_tensor(fn, "weight", w_obj)) == NULL ||
        (b_obj != Py_None &&
         (b = ampc_la_float_tensor(fn, "bias", b_obj)) == NULL) ||
        parse_conv_params(fn, st_obj, pad_obj, dil_obj, st, pad, dil) < 0 ||
        parse_groups(fn, g_obj, &groups) < 0 ||
        conv_shape(fn, x, w, b, st, pad, dil, groups, &s) < 0 ||
        ampc_la_check_devices(fn, 3, (AmpcTensorObject *[]){x, w, b}) < 0) {
        return NULL;
    }

    int64_t shape[4] = {s.n, s.oc, s.oh, s.ow};
    if ((xc = ampc_contiguous(x)) == NULL ||
        (wc = ampc_contiguous(w)) == NULL ||
        (b != NULL && (bc = ampc_contiguous(b)) == NULL) ||
        (y = ampc_tensor_empty(4, shape, x->dtype, x->device)) == NULL) {
        goto error;
    }
    int err = 0;
    const void *bias = bc != NULL ? bc->data : NULL;
    if (ampc_is_cuda(x)) {
        err = ampc_numel(y) > 0
                  ? ampc_cuda.conv2d_fwd(&s, x->dtype, xc->data, wc->data,
                                         bias, relu, y->data,
                                         ampc_la_conv_opts())
                  : 0;
        if (err != 0) {
            ampc_cuda_raise(fn, err);
            goto error;
        }
    }
    else if (ampc_numel(y) > 0) {
        if (conv_flops(&s) >= AMPC_LA_RELEASE_GIL_FLOPS) {
            Py_BEGIN_ALLOW_THREADS
            err = ampc_cpu.conv2d_fwd(&s, x->dtype, xc->data, wc->data, bias,
                                      relu, y->data);
            Py_END_ALLOW_THREADS
        }
        else {
            err = ampc_cpu.conv2d_fwd(&s, x->dtype, xc->data, wc->data, bias,
                                      relu, y->data);
        }
    }
    if (err) {
        ampc_la_kernel_failed(fn);
        goto error;
    }
    Py_DECREF(xc);
    Py_DECREF(wc);
    Py_XDECREF(bc);
    return (PyObject *)y;

error:
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    Py_XDECREF(y);
    return NULL;
}

/* -1 with RuntimeError unless go has the output shape of s. */
static int
check_grad_out(const char *fn, AmpcTensorObject *go,
               const ampc_conv2d_shape *s)
{
    char buf[256], buf2[256];
    int64_t yshape[4] = {s->n, s->oc, s->oh, s->ow};
    if (go->ndim == 4 && memcmp(go->shape, yshape, sizeof(yshape)) == 0) {
        return 0;
    }
    ampc_format_shape(buf, sizeof(buf), go->ndim, go->shape);
    ampc_format_shape(buf2, sizeof(buf2), 4, yshape);
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): expected grad_out to have shape %s (the output's), "
                 "got %s",
                 fn, buf2, buf);
    return -1;
}

/* grad_out (N, OC, OH, OW), x (N, C, H, W), weight (OC, C/G, KH, KW) ->
 * (grad_x, grad_w, grad_b), each None unless needed */
static PyObject *
op_conv2d_backward(PyObject *module, PyObject *args)
{
    const char *fn = "conv2d_backward";
    PyObject *go_obj, *x_obj, *w_obj, *st_obj, *pad_obj, *dil_obj, *needs;
    PyObject *g_obj = NULL;
    AmpcTensorObject *go, *x, *w, *goc = NULL, *xc = NULL, *wc = NULL;
    AmpcTensorObject *gx = NULL, *gw = NULL, *gb = NULL;
    int64_t st[2], pad[2], dil[2], groups;
    int need[3];
    ampc_conv2d_shape s;
    if (!PyArg_ParseTuple(args, "OOOOOOO|O:conv2d_backward", &go_obj,
                          &x_obj, &w_obj, &st_obj, &pad_obj, &dil_obj,
                          &needs, &g_obj) ||
        (go = ampc_la_float_tensor(fn, "grad_out", go_obj)) == NULL ||
        (x = ampc_la_float_tensor(fn, "input", x_obj)) == NULL ||
        (w = ampc_la_float_tensor(fn, "weight", w_obj)) == NULL ||
        parse_conv_params(fn, st_obj, pad_obj, dil_obj, st, pad, dil) < 0 ||
        parse_groups(fn, g_obj, &groups) < 0 ||
        conv_shape(fn, x, w, NULL, st, pad, dil, groups, &s) < 0 ||
        ampc_la_same_dtype(fn, "grad_out", go, "input", x) < 0 ||
        ampc_la_parse_needs(fn, needs, "need_input, need_weight, need_bias",
                            need) < 0 ||
        ampc_la_check_devices(fn, 3, (AmpcTensorObject *[]){go, x, w}) < 0) {
        return NULL;
    }
    if (check_grad_out(fn, go, &s) < 0) {
        return NULL;
    }
    if ((goc = ampc_contiguous(go)) == NULL ||
        (xc = ampc_contiguous(x)) == NULL ||
        (wc = ampc_contiguous(w)) == NULL ||
        (need[0] && (gx = ampc_tensor_empty(4, x->shape, x->dtype,
                                            x->device)) == NULL) ||
        (need[1] && (gw = ampc_tensor_empty(4, w->shape, x->dtype,
                                            x->device)) == NULL) ||
        (need[2] && (gb = ampc_tensor_empty(1, &s.oc, x->dtype,
                                            x->device)) == NULL)) {
        goto error;
    }
    if (ampc_is_cuda(x)) {
        int err = 0;
        if (gx != NULL && ampc_numel(gx) > 0) {
            err = ampc_cuda.conv2d_bwd_input(&s, x->dtype, goc->data,
                                             wc->data, gx->data,
                                             ampc_la_conv_opts());
        }
        if (err == 0 && (gw != NULL || gb != NULL)) {
            err = ampc_cuda.conv2d_bwd_weight(&s, x->dtype, goc->data,
                                              xc->data, gw ? gw->data : NULL,
                                              gb ? gb->data : NULL,
                                              ampc_la_conv_opts());
        }
        if (err != 0) {
            ampc_cuda_raise(fn, err);
            goto error;
        }
        goto done;
    }
    int err = 0, release = conv_flops(&s) >= AMPC_LA_RELEASE_GIL_FLOPS;
    PyThreadState *ts = release ? PyEval_SaveThread() : NULL;
    if (gx != NULL && ampc_numel(gx) > 0) {
        err = ampc_cpu.conv2d_bwd_input(&s, x->dtype, goc->data, wc->data,
                                        gx->data);
    }
    if (err == 0 && (gw != NULL || gb != NULL)) {
        err = ampc_cpu.conv2d_bwd_weight(&s, x->dtype, goc->data, xc->data,
                                         gw ? gw->data : NULL,
                                         gb ? gb->data : NULL);
    }
    if (ts != NULL) {
        PyEval_RestoreThread(ts);
    }
    if (err) {
        ampc_la_kernel_failed(fn);
        goto error;
    }

done:
    Py_DECREF(goc);
    Py_DECREF(xc);
    Py_DECREF(wc);
    return Py_BuildValue("(NNN)", gx ? (PyObject *)gx : Py_NewRef(Py_None),
                         gw ? (PyObject *)gw : Py_NewRef(Py_None),
                         gb ? (PyObject *)gb : Py_NewRef(Py_None));

error:
    Py_XDECREF(goc);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(gx);
    Py_XDECREF(gw);
    Py_XDECREF(gb);
    return NULL;
}

// ----------------------------------------------------------------------------
// the input gradient alone: the transposed convolution

/* input_size (N, C, H, W) as four non-negative ints; -1 with TypeError. */
static int
parse_input_size(const char *fn, PyObject *obj, int64_t xs[4])
{
    if ((PyTuple_Check(obj) || PyList_Check(obj)) &&
        PySequence_Fast_GET_SIZE(obj) == 4) {
        int ok = 1;
        for (int i = 0; i < 4 && ok; i++) {
            PyObject *v = PySequence_Fast_GET_ITEM(obj, i);
            ok = PyLong_Check(v) && !PyBool_Check(v);
            xs[i] = ok ? PyLong_AsLongLong(v) : -1;
            if (xs[i] == -1 && PyErr_Occurred()) {
                return -1;
            }
            ok = ok && xs[i] >= 0;
        }
        if (ok) {
            return 0;
        }
    }
    PyErr_Format(PyExc_TypeError,
                 "%s(): input_size must be 4 non-negative ints (N, C, H, W), "
                 "got %R",
                 fn, obj);
    return -1;
}

/* grad_out (N, OC, OH, OW), weight (OC, C/G, KH, KW), input_size (N, C, H,
 * W) -> the input gradient (N, C, H, W): conv2d_backward's first output
 * without an input tensor, which is also conv_transpose2d's forward. */
static PyObject *
op_conv2d_input_grad(PyObject *module, PyObject *args)
{
    const char *fn = "conv2d_input_grad";
    PyObject *go_obj, *w_obj, *size_obj, *st_obj, *pad_obj, *dil_obj;
    PyObject *g_obj = NULL;
    AmpcTensorObject *go, *w, *goc = NULL, *wc = NULL, *gx = NULL;
    int64_t xs[4], st[2], pad[2], dil[2], groups;
    ampc_conv2d_shape s;
    if (!PyArg_ParseTuple(args, "OOOOOO|O:conv2d_input_grad", &go_obj,
                          &w_obj, &size_obj, &st_obj, &pad_obj, &dil_obj,
                          &g_obj) ||
        (go = ampc_la_float_tensor(fn, "grad_out", go_obj)) == NULL ||
        (w = ampc_la_float_tensor(fn, "weight", w_obj)) == NULL ||
        parse_input_size(fn, size_obj, xs) < 0 ||
        parse_conv_params(fn, st_obj, pad_obj, dil_obj, st, pad, dil) < 0 ||
        parse_groups(fn, g_obj, &groups) < 0 ||
        ampc_la_same_dtype(fn, "weight", w, "grad_out", go) < 0 ||
        conv_geometry(fn, xs, w, NULL, st, pad, dil, groups, &s) < 0 ||
        ampc_la_check_devices(fn, 2, (AmpcTensorObject *[]){go, w}) < 0) {
        return NULL;
    }
    if (check_grad_out(fn, go, &s) < 0) {
        return NULL;
    }
    if ((goc = ampc_contiguous(go)) == NULL ||
        (wc = ampc_contiguous(w)) == NULL ||
        (gx = ampc_tensor_empty(4, xs, go->dtype, go->device)) == NULL) {
        goto error;
    }
    int err = 0;
    if (ampc_numel(gx) > 0 && ampc_is_cuda(go)) {
        err = ampc_cuda.conv2d_bwd_input(&s, go->dtype, goc->data, wc->data,
                                         gx->data, ampc_la_conv_opts());
        if (err != 0) {
            ampc_cuda_raise(fn, err);
            goto error;
        }
    }
    else if (ampc_numel(gx) > 0) {
        int release = conv_flops(&s) >= AMPC_LA_RELEASE_GIL_FLOPS;
        PyThreadState *ts = release ? PyEval_SaveThread() : NULL;
        err = ampc_cpu.conv2d_bwd_input(&s, go->dtype, goc->data, wc->data,
                                        gx->data);
        if (ts != NULL) {
            PyEval_RestoreThread(ts);
        }
        if (err) {
            ampc_la_kernel_failed(fn);
            goto error;
        }
    }
    Py_DECREF(goc);
    Py_DECREF(wc);
    return (PyObject *)gx;

error:
    Py_XDECREF(goc);
    Py_XDECREF(wc);
    Py_XDECREF(gx);
    return NULL;
}

// ----------------------------------------------------------------------------
// the cuDNN algorithm cache and version

/* _cudnn_algo_cache(clear=False) -> (entries, hits, misses) */
static PyObject *
op_cudnn_algo_cache(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"clear", NULL};
    int clear = 0;
    int64_t entries = 0, hits = 0, misses = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:_cudnn_algo_cache",
                                     kwlist, &clear)) {
        return NULL;
    }
    /* NULL in a CPU-only build, where nothing is cached */
    if (ampc_cuda.conv2d_algo_cache != NULL) {
        int err = ampc_cuda.conv2d_algo_cache(clear, &entries, &hits,
                                              &misses);
        if (err != 0) {
            return ampc_cuda_raise("_cudnn_algo_cache", err);
        }
    }
    return Py_BuildValue("(LLL)", (long long)entries, (long long)hits,
                         (long long)misses);
}

/* _cudnn_version() -> cuDNN's run-time version (90100 is 9.1.0) or None */
static PyObject *
op_cudnn_version(PyObject *module, PyObject *noargs)
{
    int64_t v = 0;
    if (ampc_cuda.cudnn_version != NULL) {
        int err = ampc_cuda.cudnn_version(&v);
        if (err != 0) {
            return ampc_cuda_raise("_cudnn_version", err);
        }
    }
    if (v == 0) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong((long long)v);
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_conv_methods[] = {
    {"conv2d", (PyCFunction)(void (*)(void))op_conv2d,
     METH_VARARGS | METH_KEYWORDS,
     "conv2d(input, weight, bias=None, stride=(1, 1), padding=(0, 0), "
     "dilation=(1, 1), relu=False, groups=1) -> output"},
    {"conv2d_backward", op_conv2d_backward, METH_VARARGS,
     "conv2d_backward(grad_out, input, weight, stride, padding, dilation, "
     "needs, groups=1) -> (grad_input, grad_weight, grad_bias)"},
    {"conv2d_input_grad", op_conv2d_input_grad, METH_VARARGS,
     "conv2d_input_grad(grad_out, weight, input_size, stride, padding, "
     "dilation, groups=1) -> grad_input (the transposed convolution)"},
    {"_cudnn_algo_cache", (PyCFunction)(void (*)(void))op_cudnn_algo_cache,
     METH_VARARGS | METH_KEYWORDS,
     "_cudnn_algo_cache(clear=False) -> (entries, hits, misses) of the "
     "conv2d algorithm cache, emptied first when clear"},
    {"_cudnn_version", op_cudnn_version, METH_NOARGS,
     "_cudnn_version() -> cuDNN's run-time version (90100 for 9.1.0), or "
     "None without cuDNN"},
    {NULL},
};
