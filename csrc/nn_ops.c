/* nn_ops.c - the Python-facing NN kernels of ampc._C: relu_backward,
 * max_pool2d, softmax and log_softmax, nll_loss, cross_entropy, mse_loss and
 * dropout, each with its backward.  Each op parses and checks its arguments,
 * makes its inputs contiguous, allocates its outputs and runs a kernel slot;
 * the losses then reduce the kernels' per-row doubles here, in order.  No
 * autograd here: ampc/nn/functional.py wraps these.
 *
 * The two class-index losses keep nothing but their inputs between forward
 * and backward: cross_entropy returns (loss, log_probs), and its backward
 * takes log_probs and, optionally, total_weight (the sum of the target
 * weights, which it recomputes from target and weight when None).
 *
 * CUDA tensors take the same checks and messages, then the CUDA table's
 * slots (kernels_cuda.h), with every reduction on the device.  Class
 * targets and pooling indices are validated by the GPU kernels, which
 * report a bad one through the deferred error record (ampc_nn_error): it
 * is read here without a host sync at the next CUDA NN op, which raises
 * the IndexError then.  A check at the op itself would need a host read of
 * the targets, a sync every training step.
 */
#include "ampc.h"

#include <math.h>

#include "cpu/loops.h"
#include "ops.h"

/* Runs `call` (a kernel call) without the GIL when `work` is large. */
#define RUN_KERNEL(work, call)                                              \
    do {                                                                    \
        if ((work) >= RELEASE_GIL_MIN) {                                    \
            Py_BEGIN_ALLOW_THREADS                                          \
            call;                                                           \
            Py_END_ALLOW_THREADS                                            \
        }                                                                   \
        else {                                                              \
            call;                                                           \
        }                                                                   \
    } while (0)

enum { REDUCTION_NONE = 0, REDUCTION_MEAN, REDUCTION_SUM };

// ----------------------------------------------------------------------------
// argument helpers (shared with optim_ops.c through ampc.h)

AmpcTensorObject *
ampc_arg_tensor(const char *fn, const char *arg, PyObject *obj)
{
    if (!ampc_tensor_check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a Tensor, not %.100s", fn,
                     arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return AMPC_TENSOR(obj);
}

/* Every tensor of ts (n >= 1, NULL entries skipped) on ts[0]'s device, and
 * that device made current (ampc_cuda_enter); -1 with an exception. */
static int
one_device(const char *fn, int n, AmpcTensorObject *const *ts)
{
    for (int k = 1; k < n; k++) {
        if (ts[k] != NULL && ampc_check_same_device(ts[0], ts[k]) < 0) {
            return -1;
        }
    }
    return ampc_cuda_enter(fn, ts[0]->device);
}

/* Raises the IndexError that a CUDA NN kernel recorded since the last
 * check (kernels_cuda.h ampc_nn_error), and clears it; 0 when none.  Reads
 * mapped host memory: no sync. */
static int
check_deferred(const char *fn)
{
    ampc_nn_error *e;
    int rc = ampc_cuda.nn_error(&e);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    if (e->state == 0) {
        return 0;
    }
    if (e->kind == AMPC_NN_ERR_TARGET) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): Target %lld is out of bounds (C = %lld). (found "
                     "on the GPU by an earlier CUDA loss call, reported at "
                     "this one)",
                     fn, (long long)e->value, (long long)e->bound);
    }
    else {
        PyErr_Format(PyExc_IndexError,
                     "%s(): indices must lie in [0, %lld), the H*W elements "
                     "of an input plane; found %lld (on the GPU, by an "
                     "earlier max_pool2d_backward call, reported at this "
                     "one)",
                     fn, (long long)e->bound, (long long)e->value);
    }
    e->state = 0;
    return -1;
}

/* Before a CUDA op: one device, made current, no error pending. */
static int
cuda_prologue(const char *fn, int n, AmpcTensorObject *const *ts)
{
    if (one_device(fn, n, ts) < 0) {
        return -1;
    }
    return ampc_is_cuda(ts[0]) ? check_deferred(fn) : 0;
}

int
ampc_arg_float(const char *fn, const char *arg, AmpcTensorObject *t)
{
    if (!ampc_dtype_is_float(t->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have a floating-point dtype "
                     "(float32, float16 or bfloat16), got %s",
                     fn, arg, ampc_dtype_name(t->dtype));
        return -1;
    }
    return 0;
}

int
ampc_arg_dtype(const char *fn, const char *arg, AmpcTensorObject *t,
               ampc_dtype dt, const char *whose)
{
    if (t->dtype != dt) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have dtype %s (the %s's), got %s",
                     fn, arg, ampc_dtype_name(dt), whose,
                     ampc_dtype_name(t->dtype));
        return -1;
    }
    return 0;
}

int
ampc_arg_shape(const char *fn, const char *arg, AmpcTensorObject *t,
               int ndim, const int64_t *shape, const char *whose)
{
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) {
        ok = t->shape[d] == shape[d];
    }
    if (!ok) {
        char want[256], got[256];
        ampc_format_shape(want, sizeof(want), ndim, shape);
        ampc_format_shape(got, sizeof(got), t->ndim, t->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have the shape of %s, %s, got %s",
                     fn, arg, whose, want, got);
        return -1;
    }
    return 0;
}

/* A new contiguous tensor with t's values in dtype dt (t itself, new
 * reference, when it is already both). */
static AmpcTensorObject *
contiguous_as(AmpcTensorObject *t, ampc_dtype dt)
{
    if (t->dtype == dt) {
        return ampc_contiguous(t);
    }
    AmpcTensorObject *out = ampc_tensor_empty(t->ndim, t->shape, dt,
                                              t->device);
    if (out != NULL && ampc_copy_into(out, t) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

static int
parse_reduction(const char *fn, PyObject *obj)
{
    static const char *const names[] = {"none", "mean", "sum"};
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    for (int i = 0; s != NULL && i < 3; i++) {
        if (strcmp(s, names[i]) == 0) {
            return i;
        }
    }
    if (s == NULL && PyErr_Occurred()) {
        return -1;
    }
    PyErr_Format(PyExc_ValueError,
                 "%s(): reduction must be 'none', 'mean' or 'sum', got %R",
                 fn, obj);
    return -1;
}

/* A Python float (or int) argument. */
static int
parse_double(const char *fn, const char *arg, PyObject *obj, double *out)
{
    if (!PyFloat_Check(obj) && !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a number, not %.100s", fn,
                     arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* Raises exc with fmt, whose "%s" is fn and "%R" the number v (PyErr_Format
 * has no %g). */
static void
raise_number(PyObject *exc, const char *fmt, const char *fn, double v)
{
    PyObject *num = PyFloat_FromDouble(v);
    if (num != NULL) {
        PyErr_Format(exc, fmt, fn, num);
        Py_DECREF(num);
    }
}

/* An int, or a tuple or list of one or two ints -> out[0], out[1]. */
static int
parse_pair(const char *fn, const char *arg, PyObject *obj, int64_t out[2])
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

/* A 0-d CPU tensor of dt holding d, rounded once. */
static AmpcTensorObject *
scalar_tensor(double d, ampc_dtype dt)
{
    int64_t none[1] = {1};
    AmpcTensorObject *t = ampc_tensor_empty(0, none, dt,
                                            (ampc_device){AMPC_DEV_CPU, 0});
    if (t != NULL) {
        ampc_store_f64(dt, t->data, d);
    }
    return t;
}

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
        cuda_prologue(fn, 2, (AmpcTensorObject *[]){o, g}) < 0) {
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
// max_pool2d

/* torch's pooling_output_shape: floor or ceil of the window count, where a
 * ceil-mode window must start inside the input or its left padding. */
static int64_t
pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride,
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

static PyObject *
op_max_pool2d(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "kernel_size", "stride", "padding",
                             "dilation", "ceil_mode", NULL};
    static const char *fn = "max_pool2d";
    PyObject *x_obj, *k_obj, *s_obj = Py_None, *p_obj = NULL, *d_obj = NULL;
    int ceil_mode = 0;
    int64_t k[2], st[2], pad[2] = {0, 0}, dil[2] = {1, 1};
    AmpcTensorObject *x;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOOp:max_pool2d", kwlist,
                                     &x_obj, &k_obj, &s_obj, &p_obj, &d_obj,
                                     &ceil_mode) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 ||
        cuda_prologue(fn, 1, &x) < 0 ||
        parse_pair(fn, "kernel_size", k_obj, k) < 0 ||
        (p_obj != NULL && parse_pair(fn, "padding", p_obj, pad) < 0) ||
        (d_obj != NULL && parse_pair(fn, "dilation", d_obj, dil) < 0)) {
        return NULL;
    }
    /* stride None or () means the kernel size, as in torch */
    if (s_obj == Py_None ||
        ((PyTuple_Check(s_obj) || PyList_Check(s_obj)) &&
         PySequence_Size(s_obj) == 0)) {
        st[0] = k[0];
        st[1] = k[1];
    }
    else if (parse_pair(fn, "stride", s_obj, st) < 0) {
        return NULL;
    }
    int nd = x->ndim;
    if ((nd != 3 && nd != 4) || x->shape[nd - 1] == 0 ||
        x->shape[nd - 2] == 0 || x->shape[nd - 3] == 0) {
        char buf[256];
        ampc_format_shape(buf, sizeof(buf), nd, x->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected 3D (C, H, W) or 4D (N, C, H, W) input "
                     "with non-zero C, H and W (N may be 0), but got %s",
                     fn, buf);
        return NULL;
    }
    const char *bad = NULL;
    if (k[0] <= 0 || k[1] <= 0) {
        bad = "kernel_size must be greater than zero";
    }
    else if (st[0] <= 0 || st[1] <= 0) {
        bad = "stride must be greater than zero";
    }
    else if (dil[0] <= 0 || dil[1] <= 0) {
        bad = "dilation must be greater than zero";
    }
    else if (pad[0] < 0 || pad[1] < 0) {
        bad = "padding must be non-negative";
    }
    else if (pad[0] > k[0] / 2 || pad[1] > k[1] / 2) {
        bad = "padding should be at most half of kernel_size";
    }
    if (bad != NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): %s, but got kernel_size=(%lld, %lld), "
                     "stride=(%lld, %lld), padding=(%lld, %lld), "
                     "dilation=(%lld, %lld)",
                     fn, bad, (long long)k[0], (long long)k[1],
                     (long long)st[0], (long long)st[1], (long long)pad[0],
                     (long long)pad[1], (long long)dil[0],
                     (long long)dil[1]);
        return NULL;
    }
    ampc_pool2d_shape s = {
        .h = x->shape[nd - 2], .w = x->shape[nd - 1],
        .kh = k[0], .kw = k[1], .sh = st[0], .sw = st[1],
        .ph = pad[0], .pw = pad[1], .dh = dil[0], .dw = dil[1]};
    s.oh = pool_out_size(s.h, s.kh, s.ph, s.sh, s.dh, ceil_mode);
    s.ow = pool_out_size(s.w, s.kw, s.pw, s.sw, s.dw, ceil_mode);
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

/* input_shape: a sequence of ndim non-negative ints */
static int
parse_input_shape(const char *fn, PyObject *obj, int ndim, int64_t *shape)
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
    if (parse_pair(fn, "kernel_size", k_obj, k) < 0 ||
        (p_obj != Py_None && parse_pair(fn, "padding", p_obj, pad) < 0) ||
        (d_obj != Py_None && parse_pair(fn, "dilation", d_obj, dil) < 0)) {
        return -1;
    }
    if (s_obj == Py_None) {
        st[0] = k[0];
        st[1] = k[1];
    }
    else if (parse_pair(fn, "stride", s_obj, st) < 0) {
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
                             NULL};
    static const char *fn = "max_pool2d_backward";
    PyObject *g_obj, *i_obj, *shape_obj;
    PyObject *k_obj = Py_None, *s_obj = Py_None, *p_obj = Py_None;
    PyObject *d_obj = Py_None;
    AmpcTensorObject *g, *ix;
    int64_t in_shape[4];
    if (!PyArg_ParseTupleAndKeywords(args, kwds,
                                     "OOO|OOOO:max_pool2d_backward", kwlist,
                                     &g_obj, &i_obj, &shape_obj, &k_obj,
                                     &s_obj, &p_obj, &d_obj) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        (ix = ampc_arg_tensor(fn, "indices", i_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 ||
        cuda_prologue(fn, 2, (AmpcTensorObject *[]){g, ix}) < 0) {
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
        parse_input_shape(fn, shape_obj, nd, in_shape) < 0) {
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
                           .oh = g->shape[nd - 2], .ow = g->shape[nd - 1]};
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
        cuda_prologue(fn, 1, &x) < 0) {
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
    AmpcTensorObject *xc = contiguous_as(x, xdt);
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
        cuda_prologue(fn, 2, (AmpcTensorObject *[]){y, g}) < 0) {
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
// class-index losses: nll_loss and cross_entropy

/* The checked arguments of a class-index loss.  The tensors are new
 * references (contiguous); on the CPU weight is a float32 copy or NULL, on
 * a GPU weight_t is the (contiguous) weight tensor or NULL. */
typedef struct {
    const char *fn;
    AmpcTensorObject *input;    /* (N, C) or (C,) */
    AmpcTensorObject *target;   /* (N,) or () int64 */
    float *weight;
    AmpcTensorObject *weight_t;
    ampc_class_loss_shape s;
    int reduction;
    int batched;                /* input is 2-D */
    int cuda;
} class_loss;

static void
class_loss_clear(class_loss *a)
{
    Py_CLEAR(a->input);
    Py_CLEAR(a->target);
    Py_CLEAR(a->weight_t);
    PyMem_Free(a->weight);
    a->weight = NULL;
}

static int
class_loss_init(class_loss *a, const char *fn, PyObject *in_obj,
                PyObject *t_obj, PyObject *w_obj, PyObject *red_obj,
                long long ignore_index, double label_smoothing)
{
    AmpcTensorObject *in, *t, *w = NULL;
    memset(a, 0, sizeof(*a));
    a->fn = fn;
    if ((in = ampc_arg_tensor(fn, "input", in_obj)) == NULL ||
        (t = ampc_arg_tensor(fn, "target", t_obj)) == NULL ||
        (w_obj != Py_None &&
         (w = ampc_arg_tensor(fn, "weight", w_obj)) == NULL) ||
        ampc_arg_float(fn, "input", in) < 0 ||
        (a->reduction = parse_reduction(fn, red_obj)) < 0 ||
        cuda_prologue(fn, 3, (AmpcTensorObject *[]){in, t, w}) < 0) {
        return -1;
    }
    a->cuda = ampc_is_cuda(in);
    if (in->ndim != 1 && in->ndim != 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input tensor should be 1D (C) or 2D (N, C), got "
                     "%dD",
                     fn, in->ndim);
        return -1;
    }
    if (t->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected target to have dtype int64 (class "
                     "indices), got %s",
                     fn, ampc_dtype_name(t->dtype));
        return -1;
    }
    a->batched = in->ndim == 2;
    a->s.n = a->batched ? in->shape[0] : 1;
    a->s.c = in->shape[in->ndim - 1];
    a->s.ignore_index = ignore_index;
    a->s.label_smoothing = label_smoothing;
    if (a->batched && (t->ndim != 1 || t->shape[0] != a->s.n)) {
        char buf[256];
        ampc_format_shape(buf, sizeof(buf), t->ndim, t->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected input batch_size (%lld) to match "
                     "target batch_size: target must have shape [%lld], got "
                     "%s",
                     fn, (long long)a->s.n, (long long)a->s.n, buf);
        return -1;
    }
    if (!a->batched && t->ndim != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): 1D input (C) expects a 0-D target, got a %d-D "
                     "target",
                     fn, t->ndim);
        return -1;
    }
    if (w != NULL) {
        if (ampc_arg_dtype(fn, "weight", w, in->dtype, "input") < 0) {
            return -1;
        }
        if (w->ndim != 1 || w->shape[0] != a->s.c) {
            char buf[256];
            ampc_format_shape(buf, sizeof(buf), w->ndim, w->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): weight tensor should be defined either for "
                         "all %lld classes or no classes but got weight "
                         "tensor of shape: %s",
                         fn, (long long)a->s.c, buf);
            return -1;
        }
    }
    a->input = ampc_contiguous(in);
    a->target = a->input == NULL ? NULL : ampc_contiguous(t);
    if (a->target == NULL) {
        return -1;
    }
    if (a->cuda) {
        /* the kernels validate the targets (check_deferred) */
        if (w != NULL && (a->weight_t = ampc_contiguous(w)) == NULL) {
            return -1;
        }
        return 0;
    }
    const int64_t *tv = (const int64_t *)a->target->data;
    for (int64_t i = 0; i < a->s.n; i++) {
        if (tv[i] != ignore_index && (tv[i] < 0 || tv[i] >= a->s.c)) {
            PyErr_Format(PyExc_IndexError,
                         "%s(): Target %lld is out of bounds (C = %lld).", fn,
                         (long long)tv[i], (long long)a->s.c);
            return -1;
        }
    }
    if (w != NULL) {
        a->weight = PyMem_Malloc(sizeof(float) * (size_t)(a->s.c + 1));
        if (a->weight == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        size_t es = ampc_dtype_size[w->dtype];
        for (int64_t k = 0; k < a->s.c; k++) {
            a->weight[k] = (float)ampc_scalar_as_double(
                w->dtype, w->data + k * w->strides[0] * (int64_t)es);
        }
    }
    return 0;
}

/* The sum of the target weights over the rows that are not ignored. */
static double
class_loss_total_weight(const class_loss *a)
{
    const int64_t *tv = (const int64_t *)a->target->data;
    double total = 0.0;
    for (int64_t i = 0; i < a->s.n; i++) {
        if (tv[i] != a->s.ignore_index) {
            total += a->weight != NULL ? a->weight[tv[i]] : 1.0;
        }
    }
    return total;
}

/* (loss, total_weight) from the kernels' rows: 'none' keeps the rows (N,)
 * (0-d for a 1-D input) and gives total_weight 0, as torch; 'sum' adds
 * them; 'mean' divides the sum by the total weight. */
static int
class_loss_reduce(const class_loss *a, const double *row_loss,
                  const double *row_weight, AmpcTensorObject **loss,
                  AmpcTensorObject **total_weight)
{
    ampc_dtype dt = a->input->dtype;
    double sum = 0.0, total = 0.0;
    *loss = *total_weight = NULL;
    if (a->reduction == REDUCTION_NONE) {
        int64_t n = a->s.n;
        *loss = ampc_tensor_empty(a->batched ? 1 : 0, &n, dt,
                                  a->input->device);
        if (*loss == NULL) {
            return -1;
        }
        size_t es = ampc_dtype_size[dt];
        for (int64_t i = 0; i < n; i++) {
            ampc_store_f64(dt, (*loss)->data + i * (int64_t)es, row_loss[i]);
        }
    }
    else {
        for (int64_t i = 0; i < a->s.n; i++) {
            sum += row_loss[i];
            total += row_weight[i];
        }
        *loss = scalar_tensor(a->reduction == REDUCTION_MEAN ? sum / total
                                                             : sum,
                              dt);
        if (*loss == NULL) {
            return -1;
        }
    }
    *total_weight = scalar_tensor(total, AMPC_FLOAT32);
    if (*total_weight == NULL) {
        Py_CLEAR(*loss);
        return -1;
    }
    return 0;
}

/* The per-row gradient factors of a class-index loss: grad_loss's rows for
 * 'none' (shape (N,) or ()), its one value for 'sum', divided by the total
 * weight for 'mean' (total_weight: a number, a one-element tensor, or None
 * to recompute).  A PyMem array of N floats, or NULL. */
/* grad_output of a class-index loss, checked (borrowed), or NULL. */
static AmpcTensorObject *
class_loss_grad_output(const class_loss *a, PyObject *g_obj)
{
    const char *fn = a->fn;
    AmpcTensorObject *g = ampc_arg_tensor(fn, "grad_output", g_obj);
    if (g == NULL || ampc_arg_float(fn, "grad_output", g) < 0 ||
        ampc_check_same_device(a->input, g) < 0) {
        return NULL;
    }
    int64_t n = a->s.n;
    if (a->reduction == REDUCTION_NONE) {
        if (ampc_arg_shape(fn, "grad_output", g, a->batched ? 1 : 0, &n,
                           "the unreduced loss") < 0) {
            return NULL;
        }
    }
    else if (ampc_numel(g) != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): grad_output of a reduced loss must have one "
                     "element, got %lld",
                     fn, (long long)ampc_numel(g));
        return NULL;
    }
    return g;
}

/* total_weight of a 'mean' backward: a one-element float tensor or a
 * number -> *tw (the tensor, borrowed) or *total; None leaves both. */
static int
class_loss_total_arg(const class_loss *a, PyObject *tw_obj,
                     AmpcTensorObject **tw, double *total)
{
    *tw = NULL;
    if (tw_obj == Py_None) {
        return 0;
    }
    if (!ampc_tensor_check(tw_obj)) {
        return parse_double(a->fn, "total_weight", tw_obj, total);
    }
    *tw = AMPC_TENSOR(tw_obj);
    if (ampc_numel(*tw) != 1 || !ampc_dtype_is_float((*tw)->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): total_weight must be a one-element "
                     "floating-point tensor",
                     a->fn);
        return -1;
    }
    return 0;
}

static float *
class_loss_row_scale(const class_loss *a, PyObject *g_obj, PyObject *tw_obj)
{
    const char *fn = a->fn;
    AmpcTensorObject *g = class_loss_grad_output(a, g_obj);
    if (g == NULL) {
        return NULL;
    }
    int64_t n = a->s.n;
    double scale = 1.0;
    if (a->reduction == REDUCTION_MEAN) {
        AmpcTensorObject *tw;
        double total;
        if (class_loss_total_arg(a, tw_obj, &tw, &total) < 0) {
            return NULL;
        }
        if (tw != NULL) {
            char buf[8];
            if (ampc_read_to_host(fn, tw, buf, ampc_dtype_size[tw->dtype]) <
                0) {
                return NULL;
            }
            total = ampc_scalar_as_double(tw->dtype, buf);
        }
        else if (tw_obj == Py_None) {
            /* as the forward's float32 total_weight holds it */
            total = (float)class_loss_total_weight(a);
        }
        scale = 1.0 / total;
    }
    float *rs = PyMem_Malloc(sizeof(float) * (size_t)(n + 1));
    if (rs == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    size_t es = ampc_dtype_size[g->dtype];
    for (int64_t i = 0; i < n; i++) {
        const char *p = g->data;
        if (a->reduction == REDUCTION_NONE && a->batched) {
            p += i * g->strides[0] * (int64_t)es;
        }
        rs[i] = (float)(ampc_scalar_as_double(g->dtype, p) * scale);
    }
    return rs;
}

/* The forward on a GPU: (loss, total_weight) for nll_loss, (loss,
 * log_probs) for cross_entropy (xent), reduced on the device. */
static PyObject *
class_loss_fwd_cuda(const class_loss *a, int xent)
{
    ampc_dtype dt = a->input->dtype;
    ampc_device dev = a->input->device;
    int64_t n = a->s.n, one = 1;
    PyObject *result = NULL;
    AmpcTensorObject *loss, *total = NULL, *logp = NULL;
    if (a->reduction == REDUCTION_NONE) {
        loss = ampc_tensor_empty(a->batched ? 1 : 0, &n, dt, dev);
    }
    else {
        loss = ampc_tensor_empty(0, &one, dt, dev);
    }
    if (loss == NULL ||
        (total = ampc_tensor_empty(0, &one, AMPC_FLOAT32, dev)) == NULL ||
        (xent && (logp = ampc_tensor_empty(a->input->ndim, a->input->shape,
                                           dt, dev)) == NULL)) {
        goto done;
    }
    ampc_cuda_class_loss_args c = {
        .s = a->s,
        .reduction = a->reduction,
        .dt = dt,
        .input = a->input->data,
        .target = (const int64_t *)a->target->data,
        .weight = a->weight_t != NULL ? a->weight_t->data : NULL,
        .logp = logp != NULL ? logp->data : NULL,
        .loss = loss->data,
        .total_weight = (float *)total->data,
    };
    int rc = xent ? ampc_cuda.cross_entropy_fwd(&c)
                  : ampc_cuda.nll_loss_fwd(&c);
    if (rc != 0) {
        ampc_cuda_raise(a->fn, rc);
        goto done;
    }
    result = PyTuple_Pack(2, loss, xent ? logp : total);
done:
    Py_XDECREF(loss);
    Py_XDECREF(total);
    Py_XDECREF(logp);
    return result;
}

/* The backward on a GPU: grad (N, C) (input's shape); the per-row factors
 * are formed on the device from grad_output and total_weight. */
static AmpcTensorObject *
class_loss_bwd_cuda(const class_loss *a, PyObject *g_obj, PyObject *tw_obj,
                    int xent)
{
    AmpcTensorObject *g = class_loss_grad_output(a, g_obj), *tw = NULL;
    double total = 0.0;
    if (g == NULL || (a->reduction == REDUCTION_MEAN &&
                      class_loss_total_arg(a, tw_obj, &tw, &total) < 0)) {
        return NULL;
    }
    ampc_cuda_class_loss_args c = {
        .s = a->s,
        .reduction = a->reduction,
        .dt = a->input->dtype,
        .input = a->input->data,
        .target = (const int64_t *)a->target->data,
        .weight = a->weight_t != NULL ? a->weight_t->data : NULL,
        .grad_out = g->data,
        .gdt = g->dtype,
        .grad_stride = (a->reduction == REDUCTION_NONE && a->batched)
                           ? g->strides[0]
                           : 0,
        .total_recompute = tw_obj == Py_None,
        .total_host = total,
    };
    if (tw != NULL && ampc_is_cuda(tw)) {
        if (ampc_check_same_device(a->input, tw) < 0) {
            return NULL;
        }
        c.total_in = tw->data;
        c.tdt = tw->dtype;
    }
    else if (tw != NULL) {
        /* a CPU total_weight: one small host read, no GPU wait */
        c.total_host = ampc_scalar_as_double(tw->dtype, tw->data);
    }
    AmpcTensorObject *grad = ampc_tensor_empty(
        a->input->ndim, a->input->shape, a->input->dtype, a->input->device);
    if (grad == NULL) {
        return NULL;
    }
    c.grad = grad->data;
    int rc = xent ? ampc_cuda.cross_entropy_bwd(&c)
                  : ampc_cuda.nll_loss_bwd(&c);
    if (rc != 0) {
        Py_DECREF(grad);
        return ampc_cuda_raise(a->fn, rc);
    }
    return grad;
}

static PyObject *
op_nll_loss(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "target", "weight", "reduction",
                             "ignore_index", NULL};
    PyObject *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    long long ignore_index = -100;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOL:nll_loss", kwlist,
                                     &in_obj, &t_obj, &w_obj, &red_obj,
                                     &ignore_index)) {
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    PyObject *result = NULL;
    double *rows = NULL;
    int rc = class_loss_init(&a, "nll_loss", in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, 0.0);
    Py_XDECREF(mean);
    if (rc < 0) {
        goto done;
    }
    if (a.cuda) {
        result = class_loss_fwd_cuda(&a, 0);
        goto done;
    }
    rows = PyMem_Malloc(sizeof(double) * (size_t)(2 * a.s.n + 1));
    if (rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    ampc_cpu.nll_loss_fwd(&a.s, a.input->dtype, a.input->data,
                          (const int64_t *)a.target->data, a.weight, rows,
                          rows + a.s.n);
    AmpcTensorObject *loss, *total;
    if (class_loss_reduce(&a, rows, rows + a.s.n, &loss, &total) == 0) {
        result = PyTuple_Pack(2, loss, total);
        Py_DECREF(loss);
        Py_DECREF(total);
    }
done:
    PyMem_Free(rows);
    class_loss_clear(&a);
    return result;
}

static PyObject *
op_nll_loss_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input", "target", "weight",
                             "reduction", "ignore_index", "total_weight",
                             NULL};
    PyObject *g_obj, *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    PyObject *tw_obj = Py_None;
    long long ignore_index = -100;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|OOLO:nll_loss_backward",
                                     kwlist, &g_obj, &in_obj, &t_obj, &w_obj,
                                     &red_obj, &ignore_index, &tw_obj)) {
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    int rc = class_loss_init(&a, "nll_loss_backward", in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, 0.0);
    Py_XDECREF(mean);
    if (rc == 0 && a.cuda) {
        AmpcTensorObject *grad = class_loss_bwd_cuda(&a, g_obj, tw_obj, 0);
        class_loss_clear(&a);
        return (PyObject *)grad;
    }
    float *rs = rc < 0 ? NULL : class_loss_row_scale(&a, g_obj, tw_obj);
    AmpcTensorObject *grad = NULL;
    if (rs != NULL) {
        grad = ampc_tensor_empty(a.input->ndim, a.input->shape,
                                 a.input->dtype, a.input->device);
    }
    if (grad != NULL) {
        RUN_KERNEL(ampc_numel(grad),
                   ampc_cpu.nll_loss_bwd(&a.s, a.input->dtype,
                                         (const int64_t *)a.target->data,
                                         a.weight, rs, grad->data));
    }
    PyMem_Free(rs);
    class_loss_clear(&a);
    return (PyObject *)grad;
}

static PyObject *
op_cross_entropy(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "target", "weight", "reduction",
                             "ignore_index", "label_smoothing", NULL};
    static const char *fn = "cross_entropy";
    PyObject *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    long long ignore_index = -100;
    double ls = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOLd:cross_entropy",
                                     kwlist, &in_obj, &t_obj, &w_obj,
                                     &red_obj, &ignore_index, &ls)) {
        return NULL;
    }
    if (!(ls >= 0.0 && ls <= 1.0)) {
        raise_number(PyExc_RuntimeError,
                     "%s(): label_smoothing must be between 0.0 and 1.0. "
                     "Got: %R",
                     fn, ls);
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    PyObject *result = NULL;
    double *rows = NULL;
    AmpcTensorObject *logp = NULL;
    int rc = class_loss_init(&a, fn, in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, ls);
    Py_XDECREF(mean);
    if (rc < 0) {
        goto done;
    }
    if (a.cuda) {
        result = class_loss_fwd_cuda(&a, 1);
        goto done;
    }
    rows = PyMem_Malloc(sizeof(double) * (size_t)(2 * a.s.n + 1));
    logp = ampc_tensor_empty(a.input->ndim, a.input->shape, a.input->dtype,
                             a.input->device);
    if (rows == NULL || logp == NULL) {
        if (rows == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    if (a.s.c > 0) {
        RUN_KERNEL(a.s.n * a.s.c,
                   ampc_cpu.cross_entropy_fwd(&a.s, a.input->dtype,
                                              a.input->data,
                                              (const int64_t *)a.target->data,
                                              a.weight, logp->data, rows,
                                              rows + a.s.n));
    }
    else {
        /* no classes: every row is ignored (init rejected any other
         * target) */
        memset(rows, 0, sizeof(double) * (size_t)(2 * a.s.n));
    }
    AmpcTensorObject *loss, *total;
    if (class_loss_reduce(&a, rows, rows + a.s.n, &loss, &total) == 0) {
        result = PyTuple_Pack(2, loss, logp);
        Py_DECREF(loss);
        Py_DECREF(total);
    }
done:
    Py_XDECREF(logp);
    PyMem_Free(rows);
    class_loss_clear(&a);
    return result;
}

static PyObject *
op_cross_entropy_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "log_probs", "target", "weight",
                             "reduction", "ignore_index", "label_smoothing",
                             "total_weight", NULL};
    static const char *fn = "cross_entropy_backward";
    PyObject *g_obj, *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    PyObject *tw_obj = Py_None;
    long long ignore_index = -100;
    double ls = 0.0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOO|OOLdO:cross_entropy_backward", kwlist, &g_obj,
            &in_obj, &t_obj, &w_obj, &red_obj, &ignore_index, &ls,
            &tw_obj)) {
        return NULL;
    }
    if (!(ls >= 0.0 && ls <= 1.0)) {
        raise_number(PyExc_RuntimeError,
                     "%s(): label_smoothing must be between 0.0 and 1.0. "
                     "Got: %R",
                     fn, ls);
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    int rc = class_loss_init(&a, fn, in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, ls);
    Py_XDECREF(mean);
    if (rc == 0 && a.cuda) {
        AmpcTensorObject *grad = class_loss_bwd_cuda(&a, g_obj, tw_obj, 1);
        class_loss_clear(&a);
        return (PyObject *)grad;
    }
    float *rs = rc < 0 ? NULL : class_loss_row_scale(&a, g_obj, tw_obj);
    AmpcTensorObject *grad = NULL;
    if (rs != NULL) {
        grad = ampc_tensor_empty(a.input->ndim, a.input->shape,
                                 a.input->dtype, a.input->device);
    }
    if (grad != NULL && a.s.c > 0) {
        RUN_KERNEL(ampc_numel(grad),
                   ampc_cpu.cross_entropy_bwd(&a.s, a.input->dtype,
                                              a.input->data,
                                              (const int64_t *)a.target->data,
                                              a.weight, rs, grad->data));
    }
    PyMem_Free(rs);
    class_loss_clear(&a);
    return (PyObject *)grad;
}

// ----------------------------------------------------------------------------
// mse_loss

static int
mse_args(const char *fn, PyObject *x_obj, PyObject *t_obj,
         AmpcTensorObject **x, AmpcTensorObject **t)
{
    if ((*x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        (*t = ampc_arg_tensor(fn, "target", t_obj)) == NULL ||
        ampc_arg_float(fn, "input", *x) < 0 ||
        ampc_arg_dtype(fn, "target", *t, (*x)->dtype, "input") < 0 ||
        ampc_arg_shape(fn, "target", *t, (*x)->ndim, (*x)->shape,
                       "input") < 0 ||
        cuda_prologue(fn, 2, (AmpcTensorObject *[]){*x, *t}) < 0) {
        return -1;
    }
    return 0;
}

static PyObject *
op_mse_loss(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "target", "reduction", NULL};
    static const char *fn = "mse_loss";
    PyObject *x_obj, *t_obj, *red_obj = NULL;
    AmpcTensorObject *x, *t;
    int red = REDUCTION_MEAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O:mse_loss", kwlist,
                                     &x_obj, &t_obj, &red_obj) ||
        mse_args(fn, x_obj, t_obj, &x, &t) < 0 ||
        (red_obj != NULL && (red = parse_reduction(fn, red_obj)) < 0)) {
        return NULL;
    }
    int64_t n = ampc_numel(x);
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *tc = xc == NULL ? NULL : ampc_contiguous(t);
    AmpcTensorObject *out = NULL;
    if (tc == NULL) {
        goto done;
    }
    if (ampc_is_cuda(x)) {
        int64_t one = 1;
        out = red == REDUCTION_NONE
                  ? ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)
                  : ampc_tensor_empty(0, &one, x->dtype, x->device);
        int rc = out == NULL ? 0
                             : ampc_cuda.mse_loss_fwd(x->dtype, n, red,
                                                      xc->data, tc->data,
                                                      out->data);
        if (rc != 0) {
            Py_CLEAR(out);
            ampc_cuda_raise(fn, rc);
        }
        goto done;
    }
    if (red == REDUCTION_NONE) {
        out = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device);
        if (out != NULL) {
            RUN_KERNEL(n, ampc_cpu.mse_loss_fwd(x->dtype, n, xc->data,
                                                tc->data, out->data, NULL));
        }
        goto done;
    }
    int64_t chunks = (n + AMPC_LOSS_CHUNK - 1) / AMPC_LOSS_CHUNK;
    double *partial = PyMem_Malloc(sizeof(double) * (size_t)(chunks + 1));
    if (partial == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    RUN_KERNEL(n, ampc_cpu.mse_loss_fwd(x->dtype, n, xc->data, tc->data,
                                        NULL, partial));
    double sum = 0.0;
    for (int64_t k = 0; k < chunks; k++) {
        sum += partial[k];
    }
    PyMem_Free(partial);
    /* an empty mean is 0 / 0 = NaN, as torch */
    out = scalar_tensor(red == REDUCTION_MEAN ? sum / (double)n : sum,
                        x->dtype);
done:
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    return (PyObject *)out;
}

static PyObject *
op_mse_loss_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input", "target", "reduction",
                             NULL};
    static const char *fn = "mse_loss_backward";
    PyObject *g_obj, *x_obj, *t_obj, *red_obj = NULL;
    AmpcTensorObject *g, *x, *t;
    int red = REDUCTION_MEAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:mse_loss_backward",
                                     kwlist, &g_obj, &x_obj, &t_obj,
                                     &red_obj) ||
        mse_args(fn, x_obj, t_obj, &x, &t) < 0 ||
        (red_obj != NULL && (red = parse_reduction(fn, red_obj)) < 0) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 ||
        ampc_check_same_device(x, g) < 0) {
        return NULL;
    }
    int64_t n = ampc_numel(x);
    double scale = 2.0;
    if (red == REDUCTION_NONE) {
        if (ampc_arg_shape(fn, "grad_output", g, x->ndim, x->shape,
                           "input") < 0) {
            return NULL;
        }
    }
    else if (ampc_numel(g) != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): grad_output of a reduced loss must have one "
                     "element, got %lld",
                     fn, (long long)ampc_numel(g));
        return NULL;
    }
    else if (!ampc_is_cuda(x)) {
        /* on a GPU the kernel forms the scale from the device value */
        scale *= ampc_scalar_as_double(g->dtype, g->data);
        if (red == REDUCTION_MEAN) {
            scale /= (double)n;
        }
    }
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *tc = xc == NULL ? NULL : ampc_contiguous(t);
    AmpcTensorObject *gc = NULL, *gx = NULL;
    if (tc == NULL ||
        (red == REDUCTION_NONE &&
         (gc = contiguous_as(g, x->dtype)) == NULL) ||
        (gx = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)) ==
            NULL) {
        goto done;
    }
    if (ampc_is_cuda(x)) {
        int rc = ampc_cuda.mse_loss_bwd(x->dtype, n, red, xc->data, tc->data,
                                        gc != NULL ? gc->data : g->data,
                                        g->dtype, gx->data);
        if (rc != 0) {
            Py_CLEAR(gx);
            ampc_cuda_raise(fn, rc);
        }
    }
    else {
        RUN_KERNEL(n, ampc_cpu.mse_loss_bwd(x->dtype, n, xc->data, tc->data,
                                            gc != NULL ? gc->data : NULL,
                                            (float)scale, gx->data));
    }
done:
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(gc);
    return (PyObject *)gx;
}

// ----------------------------------------------------------------------------
// dropout

static int
check_p(const char *fn, double p)
{
    if (!(p >= 0.0 && p <= 1.0)) {
        raise_number(PyExc_ValueError,
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
        cuda_prologue(fn, 1, &x) < 0) {
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
        cuda_prologue(fn, 2, (AmpcTensorObject *[]){g, m}) < 0) {
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

PyMethodDef ampc_nn_methods[] = {
    {"relu_backward", KW(op_relu_backward),
     "relu_backward(grad_output, output) -> grad where output > 0, else 0"},
    {"max_pool2d", KW(op_max_pool2d),
     "max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, "
     "ceil_mode=False) -> (output, indices)"},
    {"max_pool2d_backward", KW(op_max_pool2d_backward),
     "max_pool2d_backward(grad_output, indices, input_shape) -> grad_input"},
    {"softmax", KW(op_softmax), "softmax(input, dim, dtype=None)"},
    {"log_softmax", KW(op_log_softmax),
     "log_softmax(input, dim, dtype=None)"},
    {"softmax_backward", KW(op_softmax_backward),
     "softmax_backward(grad_output, output, dim) -> grad_input"},
    {"log_softmax_backward", KW(op_log_softmax_backward),
     "log_softmax_backward(grad_output, output, dim) -> grad_input"},
    {"nll_loss", KW(op_nll_loss),
     "nll_loss(input, target, weight=None, reduction='mean', "
     "ignore_index=-100) -> (loss, total_weight)"},
    {"nll_loss_backward", KW(op_nll_loss_backward),
     "nll_loss_backward(grad_output, input, target, weight=None, "
     "reduction='mean', ignore_index=-100, total_weight=None) -> grad_input"},
    {"cross_entropy", KW(op_cross_entropy),
     "cross_entropy(input, target, weight=None, reduction='mean', "
     "ignore_index=-100, label_smoothing=0.0) -> (loss, log_probs)"},
    {"cross_entropy_backward", KW(op_cross_entropy_backward),
     "cross_entropy_backward(grad_output, log_probs, target, weight=None, "
     "reduction='mean', ignore_index=-100, label_smoothing=0.0, "
     "total_weight=None) -> grad_input"},
    {"mse_loss", KW(op_mse_loss),
     "mse_loss(input, target, reduction='mean')"},
    {"mse_loss_backward", KW(op_mse_loss_backward),
     "mse_loss_backward(grad_output, input, target, reduction='mean') -> "
     "grad_input (grad_target is its negation)"},
    {"dropout", KW(op_dropout),
     "dropout(input, p, training=True) -> (output, mask)"},
    {"dropout_backward", KW(op_dropout_backward),
     "dropout_backward(grad_output, mask, p) -> grad_input"},
    {NULL},
};
