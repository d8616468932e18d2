/* ops.c - the raw Python-facing ops' shared helpers (argument checks,
 * devices, copy and cast, overlap), and the ops that create, copy and fill
 * tensors.  The memory statistics and pinning live in memory_ops.c, the
 * element-wise ops in ops_elementwise.c, reductions and cat in
 * ops_reduce.c, random numbers in ops_random.c.  No autograd here;
 * ampc/autograd.py wraps these.  Every error names the op, the argument and
 * what was expected.
 */
#include "ampc.h"

#include <math.h>

#include "amp_math.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// argument helpers

int
ampc_check_tensor_any(const char *fn, const char *arg, PyObject *v)
{
    if (!ampc_tensor_check(v)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a Tensor, not %.100s", fn,
                     arg, Py_TYPE(v)->tp_name);
        return -1;
    }
    return 0;
}

void
ampc_device_str(char *buf, size_t size, ampc_device dev)
{
    if (dev.type == AMPC_DEV_CPU) {
        snprintf(buf, size, "cpu");
    }
    else {
        snprintf(buf, size, "cuda:%d", dev.index);
    }
}

int
ampc_check_same_device(const AmpcTensorObject *a, const AmpcTensorObject *b)
{
    if (a->device.type == b->device.type &&
        a->device.index == b->device.index) {
        return 0;
    }
    char x[16], y[16];
    ampc_device_str(x, sizeof(x), a->device);
    ampc_device_str(y, sizeof(y), b->device);
    PyErr_Format(PyExc_RuntimeError,
                 "Expected all tensors to be on the same device, but found "
                 "at least two devices, %s and %s!",
                 x, y);
    return -1;
}

int
ampc_parse_device(PyObject *obj, ampc_device *dev, const char *fn)
{
    *dev = (ampc_device){AMPC_DEV_CPU, 0};
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    if (s == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): device must be a string such as 'cpu' or "
                     "'cuda:0', not %.100s",
                     fn, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (strcmp(s, "cpu") == 0 || strcmp(s, "cpu:0") == 0) {
        return 0;
    }
    if (strncmp(s, "cuda", 4) == 0 && (s[4] == '\0' || s[4] == ':')) {
        int count = ampc_cuda_count();
        if (count <= 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): device '%s' is not available: %s", fn, s,
                         ampc_cuda_built()
                             ? "no CUDA GPU was found on this machine"
                             : "ampc was built without CUDA (install with "
                               "nvcc on PATH to build it)");
            return -1;
        }
        long index = ampc_cuda_current_index();
        if (s[4] == ':') {
            char *end = NULL;
            index = strtol(s + 5, &end, 10);
            if (s[5] < '0' || s[5] > '9' || *end != '\0') {
                PyErr_Format(PyExc_RuntimeError,
                             "%s(): Invalid device string: '%s'", fn, s);
                return -1;
            }
        }
        if (index >= count || index >= AMPC_MAX_CUDA_INDEX) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): CUDA error: invalid device ordinal: '%s' "
                         "(this machine has %d CUDA device%s)",
                         fn, s, count, count == 1 ? "" : "s");
            return -1;
        }
        dev->type = AMPC_DEV_CUDA;
        dev->index = (int8_t)index;
        return 0;
    }
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): Expected one of cpu, cuda device type at start of "
                 "device string: %s",
                 fn, s);
    return -1;
}

int
ampc_same_device(AmpcTensorObject *a, AmpcTensorObject *b)
{
    return a->device.type == b->device.type &&
           a->device.index == b->device.index;
}

/* A 0-d stand-in for a scalar operand, for ampc_iter_init only.
 * NOTE: never exposed to Python and never reference counted. */
void
ampc_scalar_operand(AmpcTensorObject *t, ampc_dtype dt, char *buf)
{
    memset(t, 0, sizeof(*t));
    t->ndim = 0;
    t->dtype = dt;
    t->data = buf;
}

// ----------------------------------------------------------------------------
// copy and cast

typedef struct {
    ampc_dtype sdt, ddt;
} cast_ctx;

static void
cast_inner(void *ctx, int64_t n, char **p, const int64_t *s)
{
    cast_ctx *c = ctx;
    ampc_cpu.cast(n, c->sdt, p[1], s[1], c->ddt, p[0], s[0]);
}

void
ampc_run_iter(ampc_iter *it, ampc_inner_fn fn, void *ctx, int64_t numel)
{
    if (numel >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_iter_run(it, fn, ctx);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_iter_run(it, fn, ctx);
    }
}

/* The copy slot over an iteration whose operands are all on dst's GPU. */
static int
cuda_copy_iter(AmpcTensorObject *dst, AmpcTensorObject *src)
{
    if (ampc_cuda_enter("copy_", dst->device) < 0) {
        return -1;
    }
    AmpcTensorObject *ops[2] = {dst, src};
    ampc_iter it;
    ampc_iter_init(&it, 2, ops);
    int rc = ampc_cuda.copy(src->dtype, dst->dtype, &it);
    if (rc != 0) {
        ampc_cuda_raise("copy_", rc);
        return -1;
    }
    return 0;
}

/* src (any layout) cast to dtype dt, contiguous, on src's device: src itself
 * when it already is.  New reference. */
static AmpcTensorObject *
contiguous_as(AmpcTensorObject *src, ampc_dtype dt)
{
    if (src->dtype == dt && ampc_is_contiguous(src)) {
        Py_INCREF(src);
        return src;
    }
    AmpcTensorObject *out = ampc_tensor_empty(src->ndim, src->shape, dt,
                                              src->device);
    if (out != NULL && ampc_copy_into(out, src) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

/* Between devices: src is cast and made contiguous on its own device (so a
 * float32 -> float16 move sends half the bytes from a GPU), sent with one
 * memcpy, and broadcast or scattered into dst's layout on dst's device
 * when dst is not simply a contiguous tensor of src's shape. */
static int
copy_across(AmpcTensorObject *dst, AmpcTensorObject *src)
{
    AmpcTensorObject *s = contiguous_as(src, dst->dtype);
    if (s == NULL) {
        return -1;
    }
    int direct = ampc_is_contiguous(dst) && ampc_numel(dst) == ampc_numel(s);
    AmpcTensorObject *d = direct ? (AmpcTensorObject *)Py_NewRef(dst)
                                 : ampc_tensor_empty(s->ndim, s->shape,
                                                     dst->dtype, dst->device);
    if (d == NULL) {
        Py_DECREF(s);
        return -1;
    }
    size_t nbytes = (size_t)ampc_numel(s) * ampc_dtype_size[s->dtype];
    int rc = 0;
    const char *fn = "copy_";
    if (s->device.type == AMPC_DEV_CUDA && d->device.type == AMPC_DEV_CPU) {
        rc = ampc_read_to_host(fn, s, d->data, nbytes);
    }
    else {
        if (s->device.type == AMPC_DEV_CUDA) {
            /* GPU to GPU: the source's stream must have produced s before
             * the destination's stream reads it.  Both waits below are on
             * a stream of its own device, so the capture check looks at
             * each device in turn (it looks at the current one) */
            int code;
            if (ampc_cuda_enter(fn, s->device) < 0 ||
                ampc_cuda_check_no_wait(fn) < 0 ||
                ampc_cuda_enter(fn, d->device) < 0 ||
                ampc_cuda_check_no_wait(fn) < 0) {
                rc = -1;
            }
            else if ((code = ampc_cuda.synchronize(s->device.index)) != 0) {
                ampc_cuda_raise(fn, code);
                rc = -1;
            }
        }
        if (rc == 0 && ampc_cuda_enter(fn, d->device) < 0) {
            rc = -1;
        }
        if (rc == 0) {
            ampc_copy_kind kind = s->device.type == AMPC_DEV_CPU
                                      ? AMPC_COPY_H2D
                                      : AMPC_COPY_D2D;
            int code = ampc_cuda.memcpy(d->data, s->data, nbytes, kind);
            if (code == 0 && kind == AMPC_COPY_D2D) {
                /* ...and s, owned by the other device's stream, must not
                 * be reused there while this stream still reads it */
                code = ampc_cuda.synchronize(d->device.index);
            }
            if (code != 0) {
                ampc_cuda_raise(fn, code);
                rc = -1;
            }
        }
    }
    Py_DECREF(s);
    if (rc == 0 && !direct) {
        rc = ampc_copy_into(dst, d);
    }
    Py_DECREF(d);
    return rc;
}

/* Copies src into dst, which src broadcasts to; between any two devices. */
int
ampc_copy_into(AmpcTensorObject *dst, AmpcTensorObject *src)
{
    int nd;
    int64_t shape[AMPC_MAX_DIMS];
    if (ampc_broadcast_shapes("copy_", dst->ndim, dst->shape, src->ndim,
                              src->shape, &nd, shape) < 0) {
        return -1;
    }
    int ok = nd == dst->ndim;
    for (int d = 0; ok && d < nd; d++) {
        ok = shape[d] == dst->shape[d];
    }
    if (!ok) {
        char a[256], b[256];
        ampc_format_shape(a, sizeof(a), src->ndim, src->shape);
        ampc_format_shape(b, sizeof(b), dst->ndim, dst->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "copy_(): source of shape %s cannot be broadcast to "
                     "the destination's shape %s",
                     a, b);
        return -1;
    }
    if (!ampc_same_device(dst, src)) {
        if (copy_across(dst, src) < 0) {
            return -1;
        }
    }
    else if (ampc_is_cuda(dst)) {
        if (cuda_copy_iter(dst, src) < 0) {
            return -1;
        }
    }
    else {
        AmpcTensorObject *ops[2] = {dst, src};
        ampc_iter it;
        ampc_iter_init(&it, 2, ops);
        cast_ctx c = {src->dtype, dst->dtype};
        ampc_run_iter(&it, cast_inner, &c, ampc_numel(dst));
    }
    dst->storage->version++;
    return 0;
}

int
ampc_read_to_host(const char *fn, const AmpcTensorObject *t, void *dst,
                  size_t nbytes)
{
    if (nbytes == 0) {
        return 0;
    }
    if (!ampc_is_cuda(t)) {
        memcpy(dst, t->data, nbytes);
        return 0;
    }
    /* t's device made current first: the capture check looks at the
     * current device's stream, which is the one the read queues on */
    if (ampc_cuda_enter(fn, t->device) < 0 ||
        ampc_cuda_check_not_capturing(fn) < 0) {
        return -1;
    }
    ampc_cuda_host_reads++;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    /* waits for the stream: the GIL is released meanwhile */
    rc = ampc_cuda.memcpy(dst, t->data, nbytes, AMPC_COPY_D2H);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    return 0;
}

int
ampc_has_internal_overlap(AmpcTensorObject *t)
{
    for (int d = 0; d < t->ndim; d++) {
        if (t->strides[d] == 0 && t->shape[d] > 1) {
            PyErr_SetString(PyExc_RuntimeError,
                            "unsupported operation: more than one element "
                            "of the written-to tensor refers to a single "
                            "memory location. Please clone() the tensor "
                            "before performing the operation.");
            return 1;
        }
    }
    return 0;
}

/* An input that shares memory with `out` but is not exactly `out` (the same
 * elements: data, shape and strides; a broadcast prefix such as x[:1] for x
 * is not) is copied first, so that writes cannot feed later reads.  Returns
 * a new reference. */
AmpcTensorObject *
ampc_unalias(AmpcTensorObject *in, AmpcTensorObject *out)
{
    if (out == NULL || in->storage != out->storage ||
        (in->data == out->data && in->ndim == out->ndim &&
         memcmp(in->shape, out->shape, sizeof(int64_t) * in->ndim) == 0 &&
         memcmp(in->strides, out->strides, sizeof(int64_t) * in->ndim) ==
             0)) {
        Py_INCREF(in);
        return in;
    }
    AmpcTensorObject *copy = ampc_tensor_empty(in->ndim, in->shape,
                                               in->dtype, in->device);
    if (copy != NULL && ampc_copy_into(copy, in) < 0) {
        Py_CLEAR(copy);
    }
    return copy;
}

AmpcTensorObject *
ampc_copy_if_shared(AmpcTensorObject *in, const AmpcTensorObject *out)
{
    if (in->storage != out->storage) {
        return (AmpcTensorObject *)Py_NewRef(in);
    }
    AmpcTensorObject *copy = ampc_tensor_empty(in->ndim, in->shape,
                                               in->dtype, in->device);
    if (copy != NULL && ampc_copy_into(copy, in) < 0) {
        Py_CLEAR(copy);
    }
    return copy;
}

/* t itself when it has dtype dt, else a cast copy.  New reference. */
AmpcTensorObject *
ampc_as_dtype(AmpcTensorObject *t, ampc_dtype dt)
{
    if (t->dtype == dt) {
        Py_INCREF(t);
        return t;
    }
    AmpcTensorObject *out = ampc_tensor_empty(t->ndim, t->shape, dt,
                                              t->device);
    if (out != NULL && ampc_copy_into(out, t) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

static PyObject *
op_cast(PyObject *module, PyObject *args)
{
    PyObject *t_obj, *dt_obj;
    ampc_dtype dt;
    if (!PyArg_ParseTuple(args, "OO:cast", &t_obj, &dt_obj) ||
        ampc_check_tensor_any("cast", "self", t_obj) < 0 ||
        ampc_dtype_from_object(dt_obj, &dt, "cast", "dtype") < 0) {
        return NULL;
    }
    AmpcTensorObject *t = AMPC_TENSOR(t_obj);
    AmpcTensorObject *out = ampc_tensor_empty(t->ndim, t->shape, dt,
                                              t->device);
    if (out != NULL && ampc_copy_into(out, t) < 0) {
        Py_CLEAR(out);
    }
    return (PyObject *)out;
}

static PyObject *
op_copy_(PyObject *module, PyObject *args)
{
    PyObject *dst_obj, *src_obj;
    int non_blocking = 0;
    if (!PyArg_ParseTuple(args, "OO|p:copy_", &dst_obj, &src_obj,
                          &non_blocking) ||
        ampc_check_tensor_any("copy_", "self", dst_obj) < 0 ||
        ampc_check_tensor_any("copy_", "src", src_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *dst = AMPC_TENSOR(dst_obj);
    if (ampc_has_internal_overlap(dst)) {
        return NULL;
    }
    AmpcTensorObject *src = ampc_unalias(AMPC_TENSOR(src_obj), dst);
    if (src == NULL) {
        return NULL;
    }
    int rc = ampc_copy_into(dst, src);
    /* As in PyTorch, a copy from host memory has finished when copy_
     * returns unless non_blocking was asked: only a pinned source is ever
     * left queued, and the caller may overwrite it next.  While dst's
     * stream is being captured the copy is a node of the graph that runs
     * at each replay, not now: there is nothing to wait for, and the wait
     * would invalidate the capture (the README allows copies from pinned
     * memory during capture). */
    if (rc == 0 && !non_blocking && ampc_is_cuda(dst) && !ampc_is_cuda(src) &&
        src->storage->pinned) {
        int capturing = 0, code = 0;
        if (ampc_cuda_enter("copy_", dst->device) < 0) {
            rc = -1;
        }
        else if ((code = ampc_cuda.graph_capturing(&capturing)) == 0 &&
                 !capturing) {
            code = ampc_cuda.synchronize(dst->device.index);
        }
        if (code != 0) {
            ampc_cuda_raise("copy_", code);
            rc = -1;
        }
    }
    Py_DECREF(src);
    return rc < 0 ? NULL : Py_NewRef(dst_obj);
}

/* t (on a GPU) = the one element at host_value (t's dtype).  The value
 * is a kernel argument (the fill slot), so nothing waits and a captured
 * CUDA graph keeps it. */
int
ampc_device_fill(AmpcTensorObject *t, const void *host_value,
                 const char *fn)
{
    if (ampc_cuda_enter(fn, t->device) < 0) {
        return -1;
    }
    uint64_t bits = 0;
    memcpy(&bits, host_value, ampc_dtype_size[t->dtype]);
    AmpcTensorObject *ops[1] = {t};
    ampc_iter it;
    ampc_iter_init(&it, 1, ops);
    int rc = ampc_cuda.fill(t->dtype, &it, bits);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    t->storage->version++;
    return 0;
}

int
ampc_fill_value(AmpcTensorObject *t, PyObject *value, const char *fn)
{
    char buf[8];
    if (ampc_scalar_from_python(value, t->dtype, buf, fn, "value") < 0) {
        return -1;
    }
    if (ampc_is_cuda(t)) {
        return ampc_device_fill(t, buf, fn);
    }
    AmpcTensorObject scalar;
    ampc_scalar_operand(&scalar, t->dtype, buf);
    AmpcTensorObject *ops[2] = {t, &scalar};
    ampc_iter it;
    ampc_iter_init(&it, 2, ops);
    cast_ctx c = {t->dtype, t->dtype};
    ampc_run_iter(&it, cast_inner, &c, ampc_numel(t));
    t->storage->version++;
    return 0;
}

static PyObject *
op_fill_(PyObject *module, PyObject *args)
{
    PyObject *t_obj, *value;
    if (!PyArg_ParseTuple(args, "OO:fill_", &t_obj, &value) ||
        ampc_check_tensor_any("fill_", "self", t_obj) < 0) {
        return NULL;
    }
    if (ampc_tensor_check(value)) {
        AmpcTensorObject *v = AMPC_TENSOR(value);
        if (v->ndim != 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "fill_ only supports 0-dimension value tensor but "
                         "got tensor with %d dimensions.",
                         v->ndim);
            return NULL;
        }
        AmpcTensorObject *t = AMPC_TENSOR(t_obj);
        if (ampc_is_cuda(v) && ampc_same_device(t, v)) {
            /* on the device, cast and broadcast: no wait for the GPU */
            if (ampc_has_internal_overlap(t)) {
                return NULL;
            }
            AmpcTensorObject *src = ampc_unalias(v, t);
            int rc = src == NULL ? -1 : ampc_copy_into(t, src);
            Py_XDECREF(src);
            return rc < 0 ? NULL : Py_NewRef(t_obj);
        }
        char buf[8];
        if (ampc_read_to_host("fill_", v, buf,
                              ampc_dtype_size[v->dtype]) < 0) {
            return NULL;
        }
        PyObject *item = ampc_scalar_to_python(v->dtype, buf);
        if (item == NULL) {
            return NULL;
        }
        int rc = ampc_has_internal_overlap(AMPC_TENSOR(t_obj)) ||
                 ampc_fill_value(AMPC_TENSOR(t_obj), item, "fill_") < 0;
        Py_DECREF(item);
        return rc ? NULL : Py_NewRef(t_obj);
    }
    if (ampc_has_internal_overlap(AMPC_TENSOR(t_obj)) ||
        ampc_fill_value(AMPC_TENSOR(t_obj), value, "fill_") < 0) {
        return NULL;
    }
    return Py_NewRef(t_obj);
}


int
ampc_lookup_name(const char *const *names, int n, PyObject *name, const char *fn)
{
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    for (int i = 0; s != NULL && i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            return i;
        }
    }
    PyErr_Format(PyExc_ValueError, "%s(): unknown op %R", fn, name);
    return -1;
}

// ----------------------------------------------------------------------------
// creation

static int
parse_shape_arg(const char *fn, PyObject *obj, int64_t *shape)
{
    PyObject *seq = PySequence_Fast(obj, "shape");
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): size must be a tuple of ints, not %.100s", fn,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > AMPC_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError,
                     "%s(): at most %d dimensions are supported", fn,
                     AMPC_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyIndex_Check(item) || PyBool_Check(item)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): size must be a tuple of ints, but element "
                         "%zd is %.100s",
                         fn, i, Py_TYPE(item)->tp_name);
            Py_DECREF(seq);
            return -1;
        }
        shape[i] = PyNumber_AsSsize_t(item, PyExc_OverflowError);
        if (shape[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (shape[i] < 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): Trying to create tensor with negative "
                         "dimension %lld: %S",
                         fn, (long long)shape[i], obj);
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return (int)n;
}

static PyObject *
op_empty(PyObject *module, PyObject *args)
{
    PyObject *shape_obj, *dt_obj, *dev_obj = Py_None;
    int64_t shape[AMPC_MAX_DIMS];
    ampc_dtype dt;
    ampc_device dev;
    if (!PyArg_ParseTuple(args, "OO|O:empty", &shape_obj, &dt_obj,
                          &dev_obj)) {
        return NULL;
    }
    int nd = parse_shape_arg("empty", shape_obj, shape);
    if (nd < 0 || ampc_dtype_from_object(dt_obj, &dt, "empty", "dtype") < 0 ||
        ampc_parse_device(dev_obj, &dev, "empty") < 0) {
        return NULL;
    }
    return (PyObject *)ampc_tensor_empty(nd, shape, dt, dev);
}

static PyObject *
op_full(PyObject *module, PyObject *args)
{
    PyObject *shape_obj, *value, *dt_obj, *dev_obj = Py_None;
    int64_t shape[AMPC_MAX_DIMS];
    ampc_dtype dt;
    ampc_device dev;
    if (!PyArg_ParseTuple(args, "OOO|O:full", &shape_obj, &value, &dt_obj,
                          &dev_obj)) {
        return NULL;
    }
    int nd = parse_shape_arg("full", shape_obj, shape);
    if (nd < 0 || ampc_dtype_from_object(dt_obj, &dt, "full", "dtype") < 0 ||
        ampc_parse_device(dev_obj, &dev, "full") < 0) {
        return NULL;
    }
    AmpcTensorObject *t = ampc_tensor_empty(nd, shape, dt, dev);
    if (t != NULL && ampc_fill_value(t, value, "full") < 0) {
        Py_CLEAR(t);
    }
    return (PyObject *)t;
}

static PyObject *
op_arange(PyObject *module, PyObject *args)
{
    double start, end, step;
    PyObject *dt_obj, *dev_obj = Py_None;
    ampc_dtype dt;
    ampc_device dev;
    if (!PyArg_ParseTuple(args, "dddO|O:arange", &start, &end, &step,
                          &dt_obj, &dev_obj) ||
        ampc_dtype_from_object(dt_obj, &dt, "arange", "dtype") < 0 ||
        ampc_parse_device(dev_obj, &dev, "arange") < 0) {
        return NULL;
    }
    if (step == 0.0) {
        PyErr_SetString(PyExc_RuntimeError, "arange(): step must be nonzero");
        return NULL;
    }
    if (!isfinite(start) || !isfinite(end)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "arange(): unsupported range: start and end must be "
                        "finite");
        return NULL;
    }
    if ((step > 0 && end < start) || (step < 0 && end > start)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "arange(): upper bound and larger bound inconsistent "
                        "with step sign");
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count > 9e15) {
        PyErr_SetString(PyExc_RuntimeError, "arange(): too many elements");
        return NULL;
    }
    int64_t n = (int64_t)count;
    ampc_device cpu = {AMPC_DEV_CPU, 0};
    AmpcTensorObject *t = ampc_tensor_empty(1, &n, dt, cpu);
    if (t == NULL) {
        return NULL;
    }
    ampc_cpu.arange(dt, n, t->data, start, step);
    if (dev.type == AMPC_DEV_CPU) {
        return (PyObject *)t;
    }
    /* NOTE: made on the CPU and copied over (one queued H2D copy), so the
     * GPU's values are the CPU's bit for bit; arange is never hot. */
    AmpcTensorObject *g = ampc_tensor_empty(1, &n, dt, dev);
    if (g != NULL && ampc_copy_into(g, t) < 0) {
        Py_CLEAR(g);
    }
    Py_DECREF(t);
    return (PyObject *)g;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_ops_methods[] = {
    {"empty", op_empty, METH_VARARGS,
     "empty(shape, dtype, device=None) -> uninitialised tensor"},
    {"full", op_full, METH_VARARGS,
     "full(shape, value, dtype, device=None) -> tensor"},
    {"arange", op_arange, METH_VARARGS,
     "arange(start, end, step, dtype, device=None) -> 1-D tensor"},
    {"cast", op_cast, METH_VARARGS,
     "cast(t, dtype) -> a new contiguous tensor of dtype"},
    {"copy_", op_copy_, METH_VARARGS,
     "copy_(dst, src, non_blocking=False) -> dst, src broadcast and cast "
     "into dst"},
    {"fill_", op_fill_, METH_VARARGS, "fill_(t, value) -> t"},
    {NULL},
};
