/* ops.c - the Python-facing raw ops of ampc._C: parse and check arguments,
 * promote dtypes, allocate the output, then run a kernel slot from the
 * dispatch table.  No autograd here; ampc/autograd.py wraps these.  Every
 * error names the op, the argument and what was expected.
 */
#include "ampc.h"

#include <math.h>

#include "amp_math.h"

/* Below this many elements an op keeps the GIL: releasing it costs more. */
#define RELEASE_GIL_MIN 65536

#define OPS_BUF 1024      /* elements per stack buffer in chunked loops */

// ----------------------------------------------------------------------------
// argument helpers

int
ampc_check_cpu(const char *fn, const char *arg, AmpcTensorObject *t)
{
    if (t->device.type != AMPC_DEV_CPU) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): argument '%s' is on cuda:%d, but this op runs "
                     "on the CPU only in this build",
                     fn, arg, t->device.index);
        return -1;
    }
    return 0;
}

static int
check_tensor(const char *fn, const char *arg, PyObject *v)
{
    if (!ampc_tensor_check(v)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a Tensor, not %.100s", fn,
                     arg, Py_TYPE(v)->tp_name);
        return -1;
    }
    return ampc_check_cpu(fn, arg, AMPC_TENSOR(v));
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
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): CUDA tensors are not supported by this version "
                     "of ampc yet",
                     fn);
        return -1;
    }
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): Expected one of cpu, cuda device type at start of "
                 "device string: %s",
                 fn, s);
    return -1;
}

static int
same_device(AmpcTensorObject *a, AmpcTensorObject *b)
{
    return a->device.type == b->device.type &&
           a->device.index == b->device.index;
}

/* A 0-d stand-in for a scalar operand, for ampc_iter_init only.
 * NOTE: never exposed to Python and never reference counted. */
static void
scalar_operand(AmpcTensorObject *t, ampc_dtype dt, char *buf)
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

static void
run_iter(ampc_iter *it, ampc_inner_fn fn, void *ctx, int64_t numel)
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

/* Copies src into dst, which src broadcasts to. */
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
    AmpcTensorObject *ops[2] = {dst, src};
    ampc_iter it;
    ampc_iter_init(&it, 2, ops);
    cast_ctx c = {src->dtype, dst->dtype};
    run_iter(&it, cast_inner, &c, ampc_numel(dst));
    dst->storage->version++;
    return 0;
}

static int
has_internal_overlap(AmpcTensorObject *t)
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

/* An input that shares memory with `out` but is not exactly `out` is copied
 * first, so that writes cannot feed later reads.  Returns a new reference. */
static AmpcTensorObject *
unalias(AmpcTensorObject *in, AmpcTensorObject *out)
{
    if (out == NULL || in->storage != out->storage ||
        (in->data == out->data && in->ndim == out->ndim &&
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

/* t itself when it has dtype dt, else a cast copy.  New reference. */
static AmpcTensorObject *
as_dtype(AmpcTensorObject *t, ampc_dtype dt)
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
        check_tensor("cast", "self", t_obj) < 0 ||
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
    if (!PyArg_ParseTuple(args, "OO:copy_", &dst_obj, &src_obj) ||
        check_tensor("copy_", "self", dst_obj) < 0 ||
        check_tensor("copy_", "src", src_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *dst = AMPC_TENSOR(dst_obj);
    if (has_internal_overlap(dst)) {
        return NULL;
    }
    AmpcTensorObject *src = unalias(AMPC_TENSOR(src_obj), dst);
    if (src == NULL) {
        return NULL;
    }
    int rc = ampc_copy_into(dst, src);
    Py_DECREF(src);
    return rc < 0 ? NULL : Py_NewRef(dst_obj);
}

static int
fill_value(AmpcTensorObject *t, PyObject *value, const char *fn)
{
    char buf[8];
    if (ampc_scalar_from_python(value, t->dtype, buf, fn, "value") < 0) {
        return -1;
    }
    AmpcTensorObject scalar;
    scalar_operand(&scalar, t->dtype, buf);
    AmpcTensorObject *ops[2] = {t, &scalar};
    ampc_iter it;
    ampc_iter_init(&it, 2, ops);
    cast_ctx c = {t->dtype, t->dtype};
    run_iter(&it, cast_inner, &c, ampc_numel(t));
    t->storage->version++;
    return 0;
}

static PyObject *
op_fill_(PyObject *module, PyObject *args)
{
    PyObject *t_obj, *value;
    if (!PyArg_ParseTuple(args, "OO:fill_", &t_obj, &value) ||
        check_tensor("fill_", "self", t_obj) < 0) {
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
        PyObject *item = ampc_scalar_to_python(v->dtype, v->data);
        if (item == NULL) {
            return NULL;
        }
        int rc = has_internal_overlap(AMPC_TENSOR(t_obj)) ||
                 fill_value(AMPC_TENSOR(t_obj), item, "fill_") < 0;
        Py_DECREF(item);
        return rc ? NULL : Py_NewRef(t_obj);
    }
    if (has_internal_overlap(AMPC_TENSOR(t_obj)) ||
        fill_value(AMPC_TENSOR(t_obj), value, "fill_") < 0) {
        return NULL;
    }
    return Py_NewRef(t_obj);
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
    if (t != NULL && fill_value(t, value, "full") < 0) {
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
    AmpcTensorObject *t = ampc_tensor_empty(1, &n, dt, dev);
    if (t != NULL) {
        ampc_cpu.arange(dt, n, t->data, start, step);
    }
    return (PyObject *)t;
}

// ----------------------------------------------------------------------------
// binary ops

static const char *const binary_names[AMPC_NUM_BINARY] = {
    "add", "sub", "mul", "div", "maximum", "minimum", "pow"};
static const char *const compare_names[AMPC_NUM_COMPARE] = {
    "eq", "ne", "lt", "le", "gt", "ge"};

static int
lookup_name(const char *const *names, int n, PyObject *name, const char *fn)
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

typedef struct {
    ampc_binary_op op;
    ampc_compare_op cmp;
    ampc_dtype dt;          /* the operands' dtype */
    int scalar_first;       /* scalar op tensor rather than tensor op scalar */
    float scalar;           /* opmath scalar for float16/bfloat16 */
} binary_ctx;

static void
binary_inner(void *ctx, int64_t n, char **p, const int64_t *s)
{
    binary_ctx *c = ctx;
    ampc_cpu.binary(c->op, c->dt, n, p[1], s[1], p[2], s[2], p[0], s[0]);
}

static void
compare_inner(void *ctx, int64_t n, char **p, const int64_t *s)
{
    binary_ctx *c = ctx;
    ampc_cpu.compare(c->cmp, c->dt, n, p[1], s[1], p[2], s[2], p[0], s[0]);
}

/* float16/bfloat16 tensor with a scalar: PyTorch computes in float32 with
 * the scalar kept in float32 (so x_half * 65536.0 does not see an inf
 * scalar).  Widen a block, run the float32 kernel, round once on store. */
static void
binary_scalar_lowp_inner(void *ctx, int64_t n, char **p, const int64_t *s)
{
    binary_ctx *c = ctx;
    float buf[OPS_BUF];
    size_t isz = ampc_dtype_size[c->dt];
    for (int64_t i = 0; i < n; i += OPS_BUF) {
        int64_t m = n - i < OPS_BUF ? n - i : OPS_BUF;
        ampc_cpu.cast(m, c->dt, p[1] + i * s[1] * (int64_t)isz, s[1],
                      AMPC_FLOAT32, buf, 1);
        if (c->scalar_first) {
            ampc_cpu.binary(c->op, AMPC_FLOAT32, m, &c->scalar, 0, buf, 1,
                            buf, 1);
        }
        else {
            ampc_cpu.binary(c->op, AMPC_FLOAT32, m, buf, 1, &c->scalar, 0,
                            buf, 1);
        }
        ampc_cpu.cast(m, AMPC_FLOAT32, buf, 1, c->dt,
                      p[0] + i * s[0] * (int64_t)isz, s[0]);
    }
}

/* Operand i as a tensor of dtype dt: tensors are cast (new reference);
 * scalars become a 0-d stand-in over `buf`. */
static AmpcTensorObject *
operand_as(PyObject *v, ampc_dtype dt, AmpcTensorObject *stand_in, char *buf,
           const char *fn, const char *arg)
{
    if (ampc_tensor_check(v)) {
        return as_dtype(AMPC_TENSOR(v), dt);
    }
    if (ampc_scalar_from_python(v, dt, buf, fn, arg) < 0) {
        return NULL;
    }
    scalar_operand(stand_in, dt, buf);
    return stand_in;
}

static void
release_operand(AmpcTensorObject *t, AmpcTensorObject *stand_in)
{
    if (t != NULL && t != stand_in) {
        Py_DECREF(t);
    }
}

static int
check_operands(const char *fn, PyObject *a, PyObject *b)
{
    PyObject *ops[2] = {a, b};
    const char *names[2] = {"self", "other"};
    int tensors = 0;
    for (int i = 0; i < 2; i++) {
        if (ampc_tensor_check(ops[i])) {
            if (ampc_check_cpu(fn, names[i], AMPC_TENSOR(ops[i])) < 0) {
                return -1;
            }
            tensors++;
        }
        else if (!PyFloat_Check(ops[i]) && !PyLong_Check(ops[i])) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' must be a Tensor or a Python "
                         "number, not %.100s",
                         fn, names[i], Py_TYPE(ops[i])->tp_name);
            return -1;
        }
    }
    if (tensors == 0) {
        PyErr_Format(PyExc_TypeError, "%s(): at least one argument must be "
                                      "a Tensor", fn);
        return -1;
    }
    if (tensors == 2 && !same_device(AMPC_TENSOR(a), AMPC_TENSOR(b))) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected all tensors to be on the same device",
                     fn);
        return -1;
    }
    return 0;
}

static void
operand_shape(PyObject *v, int *nd, const int64_t **shape)
{
    static const int64_t none[1] = {1};
    if (ampc_tensor_check(v)) {
        *nd = AMPC_TENSOR(v)->ndim;
        *shape = AMPC_TENSOR(v)->shape;
    }
    else {
        *nd = 0;
        *shape = none;
    }
}

/* The output for an element-wise op: `out` checked (shape, dtype, overlap)
 * or a new tensor of the broadcast shape.  New reference. */
static AmpcTensorObject *
prepare_out(const char *fn, PyObject *out_obj, int nd, const int64_t *shape,
            ampc_dtype result, ampc_device dev)
{
    if (out_obj == NULL || out_obj == Py_None) {
        return ampc_tensor_empty(nd, shape, result, dev);
    }
    if (check_tensor(fn, "out", out_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = AMPC_TENSOR(out_obj);
    int ok = out->ndim == nd;
    for (int d = 0; ok && d < nd; d++) {
        ok = out->shape[d] == shape[d];
    }
    if (!ok) {
        char a[256], b[256];
        ampc_format_shape(a, sizeof(a), nd, shape);
        ampc_format_shape(b, sizeof(b), out->ndim, out->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): output with shape %s doesn't match the broadcast "
                     "shape %s",
                     fn, b, a);
        return NULL;
    }
    if (!ampc_can_cast(result, out->dtype)) {
        /* PyTorch's wording, with its ScalarType names */
        static const char *const scalar_type[AMPC_NUM_DTYPES] = {
            "Float", "Half", "BFloat16", "Long", "Bool"};
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): result type %s can't be cast to the desired "
                     "output type %s",
                     fn, scalar_type[result], scalar_type[out->dtype]);
        return NULL;
    }
    if (has_internal_overlap(out)) {
        return NULL;
    }
    Py_INCREF(out);
    return out;
}

static int
is_scalar_like(PyObject *v)
{
    return !ampc_tensor_check(v) || AMPC_TENSOR(v)->ndim == 0;
}

/* Runs a binary op (or a comparison when cmp >= 0) of a and b into out,
 * computing in dtype `dt`. */
static int
run_binary(const char *fn, PyObject *a, PyObject *b, AmpcTensorObject *out,
           ampc_dtype dt, int op, int cmp)
{
    AmpcTensorObject sa, sb;
    char bufa[8], bufb[8];
    binary_ctx c = {.op = (ampc_binary_op)(op < 0 ? 0 : op),
                    .cmp = (ampc_compare_op)(cmp < 0 ? 0 : cmp),
                    .dt = dt};
    int lowp = cmp < 0 && (dt == AMPC_FLOAT16 || dt == AMPC_BFLOAT16);
    /* float16/bfloat16 with a scalar-like operand: float32 opmath */
    if (lowp && (is_scalar_like(a) != is_scalar_like(b))) {
        PyObject *scalar = is_scalar_like(a) ? a : b;
        PyObject *tensor = is_scalar_like(a) ? b : a;
        c.scalar_first = scalar == a;
        if (ampc_tensor_check(scalar)) {
            AmpcTensorObject *st = AMPC_TENSOR(scalar);
            c.scalar = (float)ampc_scalar_as_double(st->dtype, st->data);
        }
        else if (ampc_scalar_from_python(scalar, AMPC_FLOAT32,
                                         (char *)&c.scalar, fn,
                                         "other") < 0) {
            return -1;
        }
        AmpcTensorObject *t = as_dtype(AMPC_TENSOR(tensor), dt);
        AmpcTensorObject *tin = t == NULL ? NULL : unalias(t, out);
        Py_XDECREF(t);
        if (tin == NULL) {
            return -1;
        }
        AmpcTensorObject *ops[2] = {out, tin};
        ampc_iter it;
        ampc_iter_init(&it, 2, ops);
        run_iter(&it, binary_scalar_lowp_inner, &c, ampc_numel(out));
        Py_DECREF(tin);
        return 0;
    }
    AmpcTensorObject *ta = operand_as(a, dt, &sa, bufa, fn, "self");
    AmpcTensorObject *tb = ta == NULL ? NULL
                                      : operand_as(b, dt, &sb, bufb, fn,
                                                   "other");
    AmpcTensorObject *ua = NULL, *ub = NULL;
    int rc = -1;
    if (tb == NULL) {
        goto done;
    }
    ua = ta == &sa ? ta : unalias(ta, out);
    ub = tb == &sb ? tb : unalias(tb, out);
    if (ua == NULL || ub == NULL) {
        goto done;
    }
    AmpcTensorObject *ops[3] = {out, ua, ub};
    ampc_iter it;
    ampc_iter_init(&it, 3, ops);
    run_iter(&it, cmp >= 0 ? compare_inner : binary_inner, &c,
             ampc_numel(out));
    rc = 0;
done:
    release_operand(ua, &sa);
    release_operand(ub, &sb);
    release_operand(ta, &sa);
    release_operand(tb, &sb);
    return rc;
}

/* 1 when the integer exponent (a Python int or an int64 tensor) has a
 * negative value, 0 when not, -1 on error. */
static int
has_negative(PyObject *e)
{
    if (!ampc_tensor_check(e)) {
        return PyObject_RichCompareBool(e, Py_False, Py_LT);
    }
    AmpcTensorObject *t = AMPC_TENSOR(e);
    if (t->dtype != AMPC_INT64) {
        return 0;
    }
    AmpcTensorObject *c = ampc_contiguous(t);
    if (c == NULL) {
        return -1;
    }
    const int64_t *v = (const int64_t *)c->data;
    int64_t n = ampc_numel(c);
    int negative = 0;
    for (int64_t i = 0; i < n && !negative; i++) {
        negative = v[i] < 0;
    }
    Py_DECREF(c);
    return negative;
}

static PyObject *
op_binary(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"op", "a", "b", "out", NULL};
    PyObject *name, *a, *b, *out_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:binary", kwlist,
                                     &name, &a, &b, &out_obj)) {
        return NULL;
    }
    int op = lookup_name(binary_names, AMPC_NUM_BINARY, name, "binary");
    if (op < 0) {
        return NULL;
    }
    const char *fn = binary_names[op];
    if (check_operands(fn, a, b) < 0) {
        return NULL;
    }
    PyObject *pair[2] = {a, b};
    ampc_dtype result;
    ampc_result_type(2, pair, &result);
    if (result == AMPC_BOOL && op == AMPC_BIN_SUB) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Subtraction, the `-` operator, with two bool "
                        "tensors is not supported. Use the `^` or "
                        "`logical_xor()` operator instead.");
        return NULL;
    }
    if (op == AMPC_BIN_DIV && !ampc_dtype_is_float(result)) {
        result = AMPC_FLOAT32;          /* true division */
    }
    if (op == AMPC_BIN_POW && result == AMPC_BOOL) {
        result = AMPC_INT64;
    }
    if (op == AMPC_BIN_POW && result == AMPC_INT64) {
        int negative = has_negative(b);
        if (negative < 0) {
            return NULL;
        }
        if (negative) {
            PyErr_SetString(PyExc_RuntimeError,
                            "Integers to negative integer powers are not "
                            "allowed.");
            return NULL;
        }
    }
    int nda, ndb, nd;
    const int64_t *sha, *shb;
    int64_t shape[AMPC_MAX_DIMS];
    operand_shape(a, &nda, &sha);
    operand_shape(b, &ndb, &shb);
    if (ampc_broadcast_shapes(fn, nda, sha, ndb, shb, &nd, shape) < 0) {
        return NULL;
    }
    ampc_device dev = ampc_tensor_check(a) ? AMPC_TENSOR(a)->device
                                           : AMPC_TENSOR(b)->device;
    AmpcTensorObject *out = prepare_out(fn, out_obj, nd, shape, result, dev);
    if (out == NULL) {
        return NULL;
    }
    /* a result of another dtype than `out` goes through a temporary */
    AmpcTensorObject *target = out;
    if (out->dtype != result) {
        target = ampc_tensor_empty(nd, shape, result, dev);
        if (target == NULL) {
            Py_DECREF(out);
            return NULL;
        }
    }
    int rc = run_binary(fn, a, b, target, result, op, -1);
    if (rc == 0 && target != out) {
        rc = ampc_copy_into(out, target);
    }
    else if (rc == 0) {
        out->storage->version += out_obj != Py_None;
    }
    if (target != out) {
        Py_DECREF(target);
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

static PyObject *
op_compare(PyObject *module, PyObject *args)
{
    PyObject *name, *a, *b;
    if (!PyArg_ParseTuple(args, "OOO:compare", &name, &a, &b)) {
        return NULL;
    }
    int cmp = lookup_name(compare_names, AMPC_NUM_COMPARE, name, "compare");
    if (cmp < 0) {
        return NULL;
    }
    const char *fn = compare_names[cmp];
    if (check_operands(fn, a, b) < 0) {
        return NULL;
    }
    PyObject *pair[2] = {a, b};
    ampc_dtype dt;
    ampc_result_type(2, pair, &dt);
    int nda, ndb, nd;
    const int64_t *sha, *shb;
    int64_t shape[AMPC_MAX_DIMS];
    operand_shape(a, &nda, &sha);
    operand_shape(b, &ndb, &shb);
    if (ampc_broadcast_shapes(fn, nda, sha, ndb, shb, &nd, shape) < 0) {
        return NULL;
    }
    ampc_device dev = ampc_tensor_check(a) ? AMPC_TENSOR(a)->device
                                           : AMPC_TENSOR(b)->device;
    AmpcTensorObject *out = ampc_tensor_empty(nd, shape, AMPC_BOOL, dev);
    if (out != NULL && run_binary(fn, a, b, out, dt, -1, cmp) < 0) {
        Py_CLEAR(out);
    }
    return (PyObject *)out;
}

static PyObject *
op_result_type(PyObject *module, PyObject *args)
{
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:result_type", &a, &b) ||
        check_operands("result_type", a, b) < 0) {
        return NULL;
    }
    PyObject *pair[2] = {a, b};
    ampc_dtype dt;
    ampc_result_type(2, pair, &dt);
    return Py_NewRef(ampc_dtype_object(dt));
}

// ----------------------------------------------------------------------------
// unary ops

static const char *const unary_names[AMPC_NUM_UNARY] = {
    "neg", "abs", "sqrt", "exp", "log", "relu", "sign", "isfinite"};

typedef struct {
    ampc_unary_op op;
    ampc_dtype dt;
} unary_ctx;

static void
unary_inner(void *ctx, int64_t n, char **p, const int64_t *s)
{
    unary_ctx *c = ctx;
    ampc_cpu.unary(c->op, c->dt, n, p[1], s[1], p[0], s[0]);
}

static PyObject *
op_unary(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"op", "a", "out", NULL};
    PyObject *name, *a_obj, *out_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O:unary", kwlist, &name,
                                     &a_obj, &out_obj)) {
        return NULL;
    }
    int op = lookup_name(unary_names, AMPC_NUM_UNARY, name, "unary");
    if (op < 0) {
        return NULL;
    }
    const char *fn = unary_names[op];
    if (check_tensor(fn, "self", a_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *a = AMPC_TENSOR(a_obj);
    ampc_dtype dt = a->dtype, result = a->dtype;
    if (op == AMPC_UN_SQRT || op == AMPC_UN_EXP || op == AMPC_UN_LOG) {
        if (!ampc_dtype_is_float(dt)) {
            dt = result = AMPC_FLOAT32;
        }
    }
    else if (op == AMPC_UN_ISFINITE) {
        result = AMPC_BOOL;
    }
    else if (a->dtype == AMPC_BOOL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): not supported for bool tensors; convert with "
                     ".long() or .float() first",
                     fn);
        return NULL;
    }
    AmpcTensorObject *out = prepare_out(fn, out_obj, a->ndim, a->shape,
                                        result, a->device);
    if (out == NULL) {
        return NULL;
    }
    AmpcTensorObject *target = out;
    if (out->dtype != result) {
        target = ampc_tensor_empty(a->ndim, a->shape, result, a->device);
    }
    AmpcTensorObject *in = NULL, *cast = NULL;
    int rc = -1;
    if (target == NULL || (cast = as_dtype(a, dt)) == NULL ||
        (in = unalias(cast, target)) == NULL) {
        goto done;
    }
    AmpcTensorObject *ops[2] = {target, in};
    ampc_iter it;
    ampc_iter_init(&it, 2, ops);
    unary_ctx c = {(ampc_unary_op)op, dt};
    run_iter(&it, unary_inner, &c, ampc_numel(target));
    rc = 0;
    if (target != out) {
        rc = ampc_copy_into(out, target);
    }
    else if (out_obj != Py_None) {
        out->storage->version++;
    }
done:
    Py_XDECREF(in);
    Py_XDECREF(cast);
    if (target != out) {
        Py_XDECREF(target);
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

/* clamp(a, min=None, max=None, out=None): maximum with min, then minimum
 * with max, both in place on the output (NaN propagates, like PyTorch). */
static PyObject *
op_clamp(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"a", "min", "max", "out", NULL};
    PyObject *a_obj, *lo = Py_None, *hi = Py_None, *out_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOO:clamp", kwlist,
                                     &a_obj, &lo, &hi, &out_obj) ||
        check_tensor("clamp", "self", a_obj) < 0) {
        return NULL;
    }
    if (lo == Py_None && hi == Py_None) {
        PyErr_SetString(PyExc_RuntimeError,
                        "clamp(): At least one of 'min' or 'max' must not be "
                        "None");
        return NULL;
    }
    PyObject *bounds[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        if (bounds[i] != Py_None && !PyFloat_Check(bounds[i]) &&
            !PyLong_Check(bounds[i])) {
            PyErr_Format(PyExc_TypeError,
                         "clamp(): argument '%s' must be a number or None, "
                         "not %.100s",
                         i ? "max" : "min", Py_TYPE(bounds[i])->tp_name);
            return NULL;
        }
    }
    AmpcTensorObject *a = AMPC_TENSOR(a_obj);
    ampc_dtype result = a->dtype;
    for (int i = 0; i < 2; i++) {
        if (bounds[i] != Py_None) {
            PyObject *pair[2] = {a_obj, bounds[i]};
            ampc_dtype r;
            ampc_result_type(2, pair, &r);
            result = ampc_promote(result, r);
        }
    }
    AmpcTensorObject *out = prepare_out("clamp", out_obj, a->ndim, a->shape,
                                        result, a->device);
    if (out == NULL) {
        return NULL;
    }
    AmpcTensorObject *target = out;
    if (out->dtype != result) {
        target = ampc_tensor_empty(a->ndim, a->shape, result, a->device);
        if (target == NULL) {
            Py_DECREF(out);
            return NULL;
        }
    }
    PyObject *src = a_obj;
    int rc = 0;
    if (lo != Py_None) {
        rc = run_binary("clamp", src, lo, target, result, AMPC_BIN_MAXIMUM,
                        -1);
        src = (PyObject *)target;
    }
    if (rc == 0 && hi != Py_None) {
        rc = run_binary("clamp", src, hi, target, result, AMPC_BIN_MINIMUM,
                        -1);
    }
    if (rc == 0 && target != out) {
        rc = ampc_copy_into(out, target);
    }
    else if (rc == 0 && out_obj != Py_None) {
        out->storage->version++;
    }
    if (target != out) {
        Py_DECREF(target);
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

// ----------------------------------------------------------------------------
// reductions

static const char *const reduce_names[] = {
    "sum", "mean", "max", "min", "argmax", "argmin", "max_dim", "min_dim"};
#define NUM_REDUCE_NAMES 8

/* Marks the reduced dims in `mask` from dim=None, an int or a sequence.
 * Returns the number of reduced dims or -1. */
static int
parse_reduce_dims(const char *fn, PyObject *dim, int ndim, int multi,
                  int *mask)
{
    memset(mask, 0, sizeof(int) * AMPC_MAX_DIMS);
    if (dim == Py_None) {
        for (int d = 0; d < ndim; d++) {
            mask[d] = 1;
        }
        return ndim;
    }
    PyObject *seq;
    if (PyLong_Check(dim)) {
        seq = PyTuple_Pack(1, dim);
    }
    else if (multi && (PyTuple_Check(dim) || PyList_Check(dim))) {
        seq = PySequence_Tuple(dim);
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'dim' must be %s, not %.100s", fn,
                     multi ? "an int, a tuple of ints or None"
                           : "an int or None",
                     Py_TYPE(dim)->tp_name);
        return -1;
    }
    if (seq == NULL) {
        return -1;
    }
    int count = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        int d = ampc_wrap_dim(fn, v, ndim);
        if (d < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (ndim == 0) {
            continue;
        }
        if (mask[d]) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): dim %d appears multiple times in the list of "
                         "dims",
                         fn, d);
            return -1;
        }
        mask[d] = 1;
        count++;
    }
    Py_DECREF(seq);
    return count;
}

typedef struct {
    ampc_reduce_op op;
    ampc_dtype dt;
    int64_t outer, r, inner;
    const void *x;
    void *out;
    int64_t *idx;
} reduce_call;

static void
run_reduce(reduce_call *c)
{
    if (c->outer * c->r * c->inner >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.reduce(c->op, c->dt, c->outer, c->r, c->inner, c->x, c->out,
                        c->idx);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.reduce(c->op, c->dt, c->outer, c->r, c->inner, c->x, c->out,
                        c->idx);
    }
}

static PyObject *
op_reduce(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"op", "a", "dim", "keepdim", NULL};
    PyObject *name, *a_obj, *dim = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|Op:reduce", kwlist,
                                     &name, &a_obj, &dim, &keepdim)) {
        return NULL;
    }
    int which = lookup_name(reduce_names, NUM_REDUCE_NAMES, name, "reduce");
    if (which < 0) {
        return NULL;
    }
    const char *fn = reduce_names[which];
    int with_indices = which >= 6;
    if (with_indices) {
        fn = which == 6 ? "max" : "min";
    }
    if (check_tensor(fn, "self", a_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *a = AMPC_TENSOR(a_obj);
    ampc_reduce_op op = with_indices ? (which == 6 ? AMPC_RED_MAX
                                                   : AMPC_RED_MIN)
                                     : (ampc_reduce_op)which;
    int is_sum = op == AMPC_RED_SUM || op == AMPC_RED_MEAN;
    if (with_indices && dim == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'dim' is required", fn);
        return NULL;
    }
    int mask[AMPC_MAX_DIMS];
    int nred = parse_reduce_dims(fn, dim, a->ndim, is_sum, mask);
    if (nred < 0) {
        return NULL;
    }
    if (op == AMPC_RED_MEAN && !ampc_dtype_is_float(a->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "mean(): could not infer output dtype. Input dtype must "
                     "be either a floating point or complex dtype. Got: %s",
                     ampc_dtype_name(a->dtype));
        return NULL;
    }
    /* argmax/argmin over all dims of a tensor return a flat index */
    int flat = dim == Py_None;
    int64_t r = 1;
    int64_t out_shape[AMPC_MAX_DIMS];
    int out_nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (mask[d]) {
            r *= a->shape[d];
            if (keepdim) {
                out_shape[out_nd++] = 1;
            }
        }
        else {
            out_shape[out_nd++] = a->shape[d];
        }
    }
    if (flat && !keepdim) {
        out_nd = 0;
    }
    if (r == 0 && !is_sum) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): Expected reduction dim to be specified for "
                     "input.numel() == 0 (or the reduced dim has size 0): "
                     "the operation has no identity",
                     fn);
        return NULL;
    }
    /* bring the reduced dims innermost, contiguous: (outer, r, 1); one
     * reduced dim of a contiguous tensor needs no copy: (outer, r, inner) */
    AmpcTensorObject *x = NULL;
    int64_t outer = 1, inner = 1;
    int single = -1;
    if (nred == 1 && ampc_is_contiguous(a)) {
        for (int d = 0; d < a->ndim; d++) {
            if (mask[d]) {
                single = d;
            }
        }
    }
    if (a->ndim == 0 || (nred == a->ndim && ampc_is_contiguous(a))) {
        x = (AmpcTensorObject *)Py_NewRef(a);
        outer = 1;
    }
    else if (single >= 0) {
        x = (AmpcTensorObject *)Py_NewRef(a);
        for (int d = 0; d < single; d++) {
            outer *= a->shape[d];
        }
        for (int d = single + 1; d < a->ndim; d++) {
            inner *= a->shape[d];
        }
    }
    else {
        int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
        int k = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int d = 0; d < a->ndim; d++) {
                if (mask[d] == pass) {
                    shape[k] = a->shape[d];
                    strides[k++] = a->strides[d];
                    outer *= pass ? 1 : a->shape[d];
                }
            }
        }
        AmpcTensorObject *perm = ampc_tensor_view(a, a->ndim, shape, strides,
                                                  a->data);
        if (perm == NULL) {
            return NULL;
        }
        x = ampc_contiguous(perm);
        Py_DECREF(perm);
        if (x == NULL) {
            return NULL;
        }
    }
    ampc_dtype out_dt = a->dtype;
    if (is_sum && !ampc_dtype_is_float(a->dtype)) {
        out_dt = AMPC_INT64;
    }
    int want_values = op != AMPC_RED_ARGMAX && op != AMPC_RED_ARGMIN;
    int want_idx = !want_values || with_indices;
    AmpcTensorObject *values = NULL, *indices = NULL;
    PyObject *result = NULL;
    if (want_values) {
        values = ampc_tensor_empty(out_nd, out_shape, out_dt, a->device);
        if (values == NULL) {
            goto done;
        }
    }
    if (want_idx) {
        indices = ampc_tensor_empty(out_nd, out_shape, AMPC_INT64,
                                    a->device);
        if (indices == NULL) {
            goto done;
        }
    }
    if (r == 0) {       /* empty sum is 0, empty mean NaN */
        PyObject *fillv = op == AMPC_RED_MEAN ? PyFloat_FromDouble(NAN)
                                              : PyLong_FromLong(0);
        int rc = fillv == NULL ? -1 : fill_value(values, fillv, fn);
        Py_XDECREF(fillv);
        if (rc < 0) {
            goto done;
        }
    }
    else if (outer * inner > 0) {
        reduce_call c = {op, a->dtype, outer, r, inner, x->data,
                         values ? values->data : NULL,
                         indices ? (int64_t *)indices->data : NULL};
        run_reduce(&c);
    }
    if (with_indices) {
        result = PyTuple_Pack(2, values, indices);
    }
    else {
        result = Py_NewRef(want_values ? (PyObject *)values
                                       : (PyObject *)indices);
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(values);
    Py_XDECREF(indices);
    return result;
}

// ----------------------------------------------------------------------------
// cat

static PyObject *
op_cat(PyObject *module, PyObject *args)
{
    PyObject *seq_obj;
    long dim = 0;
    if (!PyArg_ParseTuple(args, "O|l:cat", &seq_obj, &dim)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(seq_obj, "cat(): tensors");
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "cat(): argument 'tensors' must be a sequence of "
                     "Tensors, not %.100s",
                     Py_TYPE(seq_obj)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    AmpcTensorObject *out = NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cat(): expected a non-empty list of Tensors");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!ampc_tensor_check(items[i])) {
            PyErr_Format(PyExc_TypeError,
                         "cat(): expected Tensor as element %zd in argument "
                         "0, but got %.100s",
                         i, Py_TYPE(items[i])->tp_name);
            goto done;
        }
        if (ampc_check_cpu("cat", "tensors", AMPC_TENSOR(items[i])) < 0) {
            goto done;
        }
    }
    AmpcTensorObject *first = AMPC_TENSOR(items[0]);
    if (first->ndim == 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cat(): zero-dimensional tensor (at position 0) "
                        "cannot be concatenated");
        goto done;
    }
    int d = ampc_wrap_dim("cat", dim, first->ndim);
    if (d < 0) {
        goto done;
    }
    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, first->shape, sizeof(int64_t) * first->ndim);
    shape[d] = 0;
    ampc_dtype dt = first->dtype;
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = AMPC_TENSOR(items[i]);
        int ok = t->ndim == first->ndim;
        for (int k = 0; ok && k < t->ndim; k++) {
            ok = k == d || t->shape[k] == first->shape[k];
        }
        if (!ok) {
            char a[256], b[256];
            ampc_format_shape(a, sizeof(a), first->ndim, first->shape);
            ampc_format_shape(b, sizeof(b), t->ndim, t->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "cat(): Sizes of tensors must match except in "
                         "dimension %d. Expected %s (tensor 0), got %s for "
                         "tensor number %zd in the list.",
                         d, a, b, i);
            goto done;
        }
        shape[d] += t->shape[d];
        dt = ampc_promote(dt, t->dtype);
    }
    out = ampc_tensor_empty(first->ndim, shape, dt, first->device);
    if (out == NULL) {
        goto done;
    }
    int64_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = AMPC_TENSOR(items[i]);
        int64_t part[AMPC_MAX_DIMS];
        memcpy(part, out->shape, sizeof(int64_t) * out->ndim);
        part[d] = t->shape[d];
        AmpcTensorObject *slice = ampc_tensor_view(
            out, out->ndim, part, out->strides,
            out->data + at * out->strides[d] * (int64_t)ampc_dtype_size[dt]);
        if (slice == NULL || ampc_copy_into(slice, t) < 0) {
            Py_XDECREF(slice);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(slice);
        at += t->shape[d];
    }
done:
    Py_DECREF(seq);
    return (PyObject *)out;
}

// ----------------------------------------------------------------------------
// random numbers

static const char *const random_names[] = {"uniform", "normal", "randint",
                                           "bernoulli"};

static PyObject *
op_random_(PyObject *module, PyObject *args)
{
    PyObject *t_obj, *name;
    double lo = 0.0, hi = 1.0;
    if (!PyArg_ParseTuple(args, "OO|dd:random_", &t_obj, &name, &lo, &hi) ||
        check_tensor("random_", "self", t_obj) < 0) {
        return NULL;
    }
    int kind = lookup_name(random_names, 4, name, "random_");
    if (kind < 0) {
        return NULL;
    }
    AmpcTensorObject *t = AMPC_TENSOR(t_obj);
    if (!ampc_is_contiguous(t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "random_(): the tensor must be contiguous");
        return NULL;
    }
    if (kind == AMPC_RAND_UNIFORM && !(lo <= hi)) {
        PyErr_Format(PyExc_RuntimeError,
                     "uniform_(): expects to return a [from, to) range, but "
                     "found from=%g > to=%g",
                     lo, hi);
        return NULL;
    }
    if (kind == AMPC_RAND_NORMAL && !(hi >= 0.0)) {
        PyErr_Format(PyExc_RuntimeError,
                     "normal_(): expects std >= 0.0, but found std %g", hi);
        return NULL;
    }
    if (kind == AMPC_RAND_INT && !(lo < hi)) {
        PyErr_Format(PyExc_RuntimeError,
                     "random_(): expects 'from' to be less than 'to', but "
                     "got from=%g >= to=%g",
                     lo, hi);
        return NULL;
    }
    if (kind == AMPC_RAND_BERNOULLI && !(lo >= 0.0 && lo <= 1.0)) {
        PyErr_Format(PyExc_RuntimeError,
                     "bernoulli_(): expects p to be in [0, 1], but got p=%g",
                     lo);
        return NULL;
    }
    if (kind == AMPC_RAND_INT && t->dtype == AMPC_BOOL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "randint(): bool tensors are not supported");
        return NULL;
    }
    ampc_state *st = ampc_get_state();
    int64_t n = ampc_numel(t);
    uint64_t offset = st->offset;
    /* each element owns one counter; keep offsets 4-aligned for Philox */
    st->offset += ((uint64_t)n + 3) & ~(uint64_t)3;
    ampc_cpu.random((ampc_random_kind)kind, t->dtype, n, t->data, st->seed,
                    offset, lo, hi);
    t->storage->version++;
    return Py_NewRef(t_obj);
}

static PyObject *
op_manual_seed(PyObject *module, PyObject *arg)
{
    PyObject *idx = PyNumber_Index(arg);
    if (idx == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "manual_seed(): seed must be an int, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    /* like PyTorch: any int in [-2^63, 2^64) */
    uint64_t seed = PyLong_AsUnsignedLongLongMask(idx);
    Py_DECREF(idx);
    if (seed == (uint64_t)-1 && PyErr_Occurred()) {
        return NULL;
    }
    ampc_state *st = ampc_get_state();
    st->seed = seed;
    st->offset = 0;
    Py_RETURN_NONE;
}

static PyObject *
op_initial_seed(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(ampc_get_state()->seed);
}

static PyObject *
op_get_rng_state(PyObject *module, PyObject *unused)
{
    ampc_state *st = ampc_get_state();
    return Py_BuildValue("(KK)", (unsigned long long)st->seed,
                         (unsigned long long)st->offset);
}

static PyObject *
op_set_rng_state(PyObject *module, PyObject *args)
{
    unsigned long long seed, offset;
    if (!PyArg_ParseTuple(args, "(KK):set_rng_state", &seed, &offset)) {
        return NULL;
    }
    ampc_state *st = ampc_get_state();
    st->seed = seed;
    st->offset = offset;
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------
// memory statistics

static PyObject *
memory_query(PyObject *arg, const char *fn, int what)
{
    ampc_device dev = {AMPC_DEV_CPU, 0};
    if (arg != NULL && arg != Py_None) {
        const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
        if (s == NULL ||
            (strcmp(s, "cpu") != 0 && strncmp(s, "cuda", 4) != 0)) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): device must be 'cpu' or 'cuda', got %R", fn,
                         arg);
            return NULL;
        }
        if (s[0] == 'c' && s[1] == 'u') {
            dev.type = AMPC_DEV_CUDA;
        }
    }
    switch (what) {
    case 0:
        return PyLong_FromLongLong(ampc_memory_allocated(dev));
    case 1:
        return PyLong_FromLongLong(ampc_max_memory_allocated(dev));
    default:
        ampc_reset_peak_memory(dev);
        Py_RETURN_NONE;
    }
}

static PyObject *
op_memory_allocated(PyObject *module, PyObject *args)
{
    PyObject *dev = NULL;
    if (!PyArg_ParseTuple(args, "|O:memory_allocated", &dev)) {
        return NULL;
    }
    return memory_query(dev, "memory_allocated", 0);
}

static PyObject *
op_max_memory_allocated(PyObject *module, PyObject *args)
{
    PyObject *dev = NULL;
    if (!PyArg_ParseTuple(args, "|O:max_memory_allocated", &dev)) {
        return NULL;
    }
    return memory_query(dev, "max_memory_allocated", 1);
}

static PyObject *
op_reset_peak_memory_stats(PyObject *module, PyObject *args)
{
    PyObject *dev = NULL;
    if (!PyArg_ParseTuple(args, "|O:reset_peak_memory_stats", &dev)) {
        return NULL;
    }
    return memory_query(dev, "reset_peak_memory_stats", 2);
}

static PyObject *
op_empty_cache(PyObject *module, PyObject *unused)
{
    ampc_empty_cache();
    Py_RETURN_NONE;
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
     "copy_(dst, src) -> dst, src broadcast and cast into dst"},
    {"fill_", op_fill_, METH_VARARGS, "fill_(t, value) -> t"},
    {"binary", (PyCFunction)(void (*)(void))op_binary,
     METH_VARARGS | METH_KEYWORDS,
     "binary(op, a, b, out=None): add sub mul div maximum minimum pow"},
    {"compare", op_compare, METH_VARARGS,
     "compare(op, a, b) -> bool tensor: eq ne lt le gt ge"},
    {"result_type", op_result_type, METH_VARARGS,
     "result_type(a, b) -> the promoted dtype"},
    {"unary", (PyCFunction)(void (*)(void))op_unary,
     METH_VARARGS | METH_KEYWORDS,
     "unary(op, a, out=None): neg abs sqrt exp log relu sign isfinite"},
    {"clamp", (PyCFunction)(void (*)(void))op_clamp,
     METH_VARARGS | METH_KEYWORDS, "clamp(a, min=None, max=None, out=None)"},
    {"reduce", (PyCFunction)(void (*)(void))op_reduce,
     METH_VARARGS | METH_KEYWORDS,
     "reduce(op, a, dim=None, keepdim=False): sum mean max min argmax "
     "argmin max_dim min_dim"},
    {"cat", op_cat, METH_VARARGS, "cat(tensors, dim=0) -> tensor"},
    {"random_", op_random_, METH_VARARGS,
     "random_(t, kind, a=0, b=1): uniform normal randint bernoulli"},
    {"manual_seed", op_manual_seed, METH_O, "manual_seed(seed)"},
    {"initial_seed", op_initial_seed, METH_NOARGS, "the current seed"},
    {"get_rng_state", op_get_rng_state, METH_NOARGS,
     "(seed, offset) of the generator"},
    {"set_rng_state", op_set_rng_state, METH_VARARGS,
     "set_rng_state((seed, offset))"},
    {"memory_allocated", op_memory_allocated, METH_VARARGS,
     "bytes of live tensor storage on a device"},
    {"max_memory_allocated", op_max_memory_allocated, METH_VARARGS,
     "peak bytes of tensor storage since the last reset"},
    {"reset_peak_memory_stats", op_reset_peak_memory_stats, METH_VARARGS,
     "resets the peak to the live bytes"},
    {"empty_cache", op_empty_cache, METH_NOARGS,
     "returns the CPU allocator's cached free blocks to the system"},
    {NULL},
};
