/* ops_elementwise.c - binary ops (fmod and remainder checked by ops_mod.c
 * too), comparisons and clamp with broadcasting, Python scalars and
 * PyTorch's type promotion; float16 and bfloat16 with a scalar compute in
 * float32 ("opmath", except fmod, remainder and atan2).  CPU tensors run
 * the CPU table's 1-D kernels per innermost run; CUDA tensors hand the
 * whole iteration to the CUDA table (cuda/elementwise.cu), with a scalar
 * operand passed by value.
 */
#include "ampc.h"

#include <math.h>

#include "amp_math.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// binary ops

static const char *const binary_names[AMPC_NUM_BINARY] = {
    "add", "sub", "mul", "div", "maximum", "minimum", "pow", "fmod",
    "remainder", "gelu_backward", "gelu_tanh_backward", "silu_backward",
    "sigmoid_backward", "tanh_backward", "atan2"};
static const char *const compare_names[AMPC_NUM_COMPARE] = {
    "eq", "ne", "lt", "le", "gt", "ge"};

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
        return ampc_as_dtype(AMPC_TENSOR(v), dt);
    }
    if (ampc_scalar_from_python(v, dt, buf, fn, arg) < 0) {
        return NULL;
    }
    ampc_scalar_operand(stand_in, dt, buf);
    return stand_in;
}

static void
release_operand(AmpcTensorObject *t, AmpcTensorObject *stand_in)
{
    if (t != NULL && t != stand_in) {
        Py_DECREF(t);
    }
}

/* A CPU 0-d tensor beside a CUDA tensor acts as a Python number, as in
 * PyTorch; any other pair of devices is an error. */
static int
devices_compatible(AmpcTensorObject *a, AmpcTensorObject *b)
{
    if (ampc_same_device(a, b)) {
        return 1;
    }
    return (!ampc_is_cuda(a) && a->ndim == 0 && ampc_is_cuda(b)) ||
           (!ampc_is_cuda(b) && b->ndim == 0 && ampc_is_cuda(a));
}

static int
check_operands(const char *fn, PyObject *a, PyObject *b)
{
    PyObject *ops[2] = {a, b};
    const char *names[2] = {"self", "other"};
    int tensors = 0;
    for (int i = 0; i < 2; i++) {
        if (ampc_tensor_check(ops[i])) {
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
    if (tensors == 2 &&
        !devices_compatible(AMPC_TENSOR(a), AMPC_TENSOR(b))) {
        return ampc_check_same_device(AMPC_TENSOR(a), AMPC_TENSOR(b));
    }
    return 0;
}

/* Where a binary op runs: on the GPU of a CUDA operand, else the CPU. */
static ampc_device
operands_device(PyObject *a, PyObject *b)
{
    ampc_device dev = {AMPC_DEV_CPU, 0};
    PyObject *ops[2] = {a, b};
    for (int i = 1; i >= 0; i--) {
        if (ampc_tensor_check(ops[i]) &&
            (ampc_is_cuda(AMPC_TENSOR(ops[i])) || dev.type == AMPC_DEV_CPU)) {
            dev = AMPC_TENSOR(ops[i])->device;
        }
    }
    return dev;
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

AmpcTensorObject *
ampc_prepare_out(const char *fn, PyObject *out_obj, int nd,
                 const int64_t *shape, ampc_dtype result, ampc_device dev)
{
    if (out_obj == NULL || out_obj == Py_None) {
        return ampc_tensor_empty(nd, shape, result, dev);
    }
    if (ampc_check_tensor_any(fn, "out", out_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = AMPC_TENSOR(out_obj);
    if (out->device.type != dev.type || out->device.index != dev.index) {
        char a[16], b[16];
        ampc_device_str(a, sizeof(a), dev);
        ampc_device_str(b, sizeof(b), out->device);
        PyErr_Format(PyExc_RuntimeError,
                     "Expected all tensors to be on the same device, but "
                     "found at least two devices, %s and %s!",
                     a, b);
        return NULL;
    }
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
    if (ampc_has_internal_overlap(out)) {
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

/* Whether a float16/bfloat16 tensor with a scalar-like operand computes
 * with the scalar in float32 (add .. pow, as PyTorch's opmath kernels);
 * fmod, remainder and atan2 round it to the tensor's dtype first, as
 * PyTorch's do (fmod(half(2), 1.7) is 2 - half(1.7)). */
static int
scalar_opmath(int op, ampc_dtype dt, PyObject *a, PyObject *b)
{
    return op >= 0 && op != AMPC_BIN_FMOD && op != AMPC_BIN_REMAINDER &&
           op != AMPC_BIN_ATAN2 &&
           (dt == AMPC_FLOAT16 || dt == AMPC_BFLOAT16) &&
           is_scalar_like(a) != is_scalar_like(b);
}

/* A host value (Python number or CPU 0-d tensor) as the CUDA kernels'
 * scalar: the value the CPU path computes with, i.e. rounded to dt, or kept
 * in float32 for float16/bfloat16 opmath.  -1 with an exception. */
static int
host_scalar(PyObject *v, ampc_dtype dt, int opmath, const char *fn,
            const char *arg, ampc_cuda_scalar *sc)
{
    char buf[8];
    ampc_dtype as = opmath ? AMPC_FLOAT32 : dt;
    if (ampc_tensor_check(v)) {
        AmpcTensorObject *t = AMPC_TENSOR(v);
        if (opmath) {
            float f = (float)ampc_scalar_as_double(t->dtype, t->data);
            memcpy(buf, &f, sizeof(f));
        }
        else {
            ampc_cpu.cast(1, t->dtype, t->data, 1, dt, buf, 1);
        }
    }
    else if (ampc_scalar_from_python(v, as, buf, fn, arg) < 0) {
        return -1;
    }
    if (ampc_dtype_is_float(as)) {
        sc->f = ampc_scalar_as_double(as, buf);
    }
    else if (as == AMPC_INT64) {
        memcpy(&sc->i, buf, sizeof(sc->i));
    }
    else {
        sc->i = buf[0] != 0;
    }
    return 0;
}

/* run_binary for an output on a GPU.  A Python number or CPU 0-d tensor
 * goes to the kernel by value; in float16/bfloat16 opmath a CUDA 0-d tensor
 * goes as a float32 in device memory (no host read, so no wait). */
static int
run_binary_cuda(const char *fn, PyObject *a, PyObject *b,
                AmpcTensorObject *out, ampc_dtype dt, int op, int cmp)
{
    PyObject *ops[2] = {a, b};
    const char *names[2] = {"self", "other"};
    int host[2];
    for (int k = 0; k < 2; k++) {
        host[k] = !ampc_tensor_check(ops[k]) ||
                  !ampc_is_cuda(AMPC_TENSOR(ops[k]));
    }
    int opmath = cmp < 0 && scalar_opmath(op, dt, a, b);
    ampc_cuda_scalar sc = {0, 0.0, 0, NULL};
    AmpcTensorObject *f32 = NULL;
    AmpcTensorObject *in[2] = {NULL, NULL};
    int rc = -1;
    int s = -1;                 /* the operand passed as sc */
    if (opmath) {
        s = is_scalar_like(a) ? 0 : 1;
    }
    else if (host[0] || host[1]) {
        s = host[0] ? 0 : 1;
    }
    if (s >= 0 && host[s]) {
        if (host_scalar(ops[s], dt, opmath, fn, names[s], &sc) < 0) {
            return -1;
        }
    }
    else if (s >= 0) {
        f32 = ampc_as_dtype(AMPC_TENSOR(ops[s]), AMPC_FLOAT32);
        if (f32 == NULL) {
            return -1;
        }
        sc.dev_f32 = (const float *)f32->data;
    }
    sc.pos = s + 1;
    int nin = 0;
    AmpcTensorObject *iops[3] = {out, NULL, NULL};
    for (int k = 0; k < 2; k++) {
        if (k == s) {
            continue;
        }
        AmpcTensorObject *t = ampc_as_dtype(AMPC_TENSOR(ops[k]), dt);
        in[k] = t == NULL ? NULL : ampc_unalias(t, out);
        Py_XDECREF(t);
        if (in[k] == NULL) {
            goto done;
        }
        iops[1 + nin++] = in[k];
    }
    ampc_iter it;
    ampc_iter_init(&it, 1 + nin, iops);
    int code = cmp >= 0
                   ? ampc_cuda.compare((ampc_compare_op)cmp, dt, &it, &sc)
                   : ampc_cuda.binary((ampc_binary_op)op, dt, &it, &sc);
    if (code != 0) {
        ampc_cuda_raise(fn, code);
        goto done;
    }
    rc = 0;
done:
    /* NOTE: freeing while the kernel is queued is safe: the caching
     * allocator hands a block only to later work on the same stream */
    Py_XDECREF(in[0]);
    Py_XDECREF(in[1]);
    Py_XDECREF(f32);
    return rc;
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
    if (ampc_is_cuda(out)) {
        return run_binary_cuda(fn, a, b, out, dt, op, cmp);
    }
    /* float16/bfloat16 with a scalar-like operand: float32 opmath */
    if (cmp < 0 && scalar_opmath(op, dt, a, b)) {
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
        AmpcTensorObject *t = ampc_as_dtype(AMPC_TENSOR(tensor), dt);
        AmpcTensorObject *tin = t == NULL ? NULL : ampc_unalias(t, out);
        Py_XDECREF(t);
        if (tin == NULL) {
            return -1;
        }
        AmpcTensorObject *ops[2] = {out, tin};
        ampc_iter it;
        ampc_iter_init(&it, 2, ops);
        ampc_run_iter(&it, binary_scalar_lowp_inner, &c, ampc_numel(out));
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
    ua = ta == &sa ? ta : ampc_unalias(ta, out);
    ub = tb == &sb ? tb : ampc_unalias(tb, out);
    if (ua == NULL || ub == NULL) {
        goto done;
    }
    AmpcTensorObject *ops[3] = {out, ua, ub};
    ampc_iter it;
    ampc_iter_init(&it, 3, ops);
    ampc_run_iter(&it, cmp >= 0 ? compare_inner : binary_inner, &c,
             ampc_numel(out));
    rc = 0;
done:
    release_operand(ua, &sa);
    release_operand(ub, &sb);
    release_operand(ta, &sa);
    release_operand(tb, &sb);
    return rc;
}

/* The smallest of the n >= 1 int64 values of contiguous CUDA tensor c:
 * a reduction on the GPU and one value read back.  -1 with an exception. */
static int
cuda_min_i64(AmpcTensorObject *c, int64_t n, int64_t *lowest)
{
    AmpcTensorObject *m = ampc_tensor_empty(0, NULL, AMPC_INT64, c->device);
    if (m == NULL) {
        return -1;
    }
    int rc = -1;
    int code = ampc_cuda.reduce(AMPC_RED_MIN, AMPC_INT64, 1, n, 1, c->data,
                                m->data, NULL);
    if (code != 0) {
        ampc_cuda_raise("pow", code);
    }
    else {
        rc = ampc_read_to_host("pow", m, lowest, sizeof(*lowest));
    }
    Py_DECREF(m);
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
    if (t->dtype != AMPC_INT64 || ampc_numel(t) == 0) {
        return 0;
    }
    if (ampc_cuda_enter("pow", t->device) < 0) {
        return -1;
    }
    AmpcTensorObject *c = ampc_contiguous(t);
    if (c == NULL) {
        return -1;
    }
    int64_t n = ampc_numel(c);
    int negative = 0;
    if (ampc_is_cuda(c)) {
        int64_t lowest;
        negative = cuda_min_i64(c, n, &lowest) < 0 ? -1 : lowest < 0;
    }
    else {
        const int64_t *v = (const int64_t *)c->data;
        for (int64_t i = 0; i < n && !negative; i++) {
            negative = v[i] < 0;
        }
    }
    Py_DECREF(c);
    return negative;
}

/* PyTorch's cheaper forms of tensor ** e for a Python number e (not bool)
 * and a float result: the unary op that computes it, or -1 for plain pow
 * (a tensor exponent, even 0-d, keeps pow's special values). */
static int
pow_shortcut(PyObject *a, PyObject *b)
{
    if (!ampc_tensor_check(a) || PyBool_Check(b)) {
        return -1;
    }
    double e;
    if (PyLong_Check(b)) {
        int overflow;
        long v = PyLong_AsLongAndOverflow(b, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        e = (double)v;
    }
    else if (PyFloat_Check(b)) {
        e = PyFloat_AS_DOUBLE(b);
    }
    else {
        return -1;
    }
    static const struct {
        double e;
        ampc_unary_op op;
    } forms[] = {
        {2.0, AMPC_UN_SQUARE}, {3.0, AMPC_UN_CUBE},
        {-2.0, AMPC_UN_RECIPROCAL_SQUARE}, {0.5, AMPC_UN_SQRT},
        {-0.5, AMPC_UN_RSQRT}, {-1.0, AMPC_UN_RECIPROCAL}};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        if (e == forms[i].e) {
            return forms[i].op;
        }
    }
    return -1;
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
    int op = ampc_lookup_name(binary_names, AMPC_NUM_BINARY, name, "binary");
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
    if ((op == AMPC_BIN_DIV || op >= AMPC_BIN_GELU_BACKWARD) &&
        !ampc_dtype_is_float(result)) {
        result = AMPC_FLOAT32;          /* true division; float-only ops */
    }
    if (op == AMPC_BIN_POW && ampc_dtype_is_float(result)) {
        int shortcut = pow_shortcut(a, b);
        if (shortcut >= 0) {
            return ampc_unary_into(fn, (ampc_unary_op)shortcut,
                                   AMPC_TENSOR(a), out_obj);
        }
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
    ampc_device dev = operands_device(a, b);
    if (ampc_cuda_enter(fn, dev) < 0) {
        return NULL;
    }
    if ((op == AMPC_BIN_FMOD || op == AMPC_BIN_REMAINDER) &&
        ampc_mod_check(fn, b, result, dev) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = ampc_prepare_out(fn, out_obj, nd, shape, result, dev);
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
    int cmp = ampc_lookup_name(compare_names, AMPC_NUM_COMPARE, name,
                               "compare");
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
    ampc_device dev = operands_device(a, b);
    if (ampc_cuda_enter(fn, dev) < 0) {
        return NULL;
    }
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
// clamp

/* clamp(a, min=None, max=None, out=None): maximum with min, then minimum
 * with max, both in place on the output (NaN propagates, like PyTorch). */
static PyObject *
op_clamp(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"a", "min", "max", "out", NULL};
    PyObject *a_obj, *lo = Py_None, *hi = Py_None, *out_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOO:clamp", kwlist,
                                     &a_obj, &lo, &hi, &out_obj) ||
        ampc_check_tensor_any("clamp", "self", a_obj) < 0 ||
        ampc_cuda_enter("clamp", AMPC_TENSOR(a_obj)->device) < 0) {
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
    AmpcTensorObject *out = ampc_prepare_out("clamp", out_obj, a->ndim,
                                             a->shape,
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

PyMethodDef ampc_elementwise_methods[] = {
    {"binary", (PyCFunction)(void (*)(void))op_binary,
     METH_VARARGS | METH_KEYWORDS,
     "binary(op, a, b, out=None): add sub mul div maximum minimum pow fmod "
     "remainder atan2"},
    {"compare", op_compare, METH_VARARGS,
     "compare(op, a, b) -> bool tensor: eq ne lt le gt ge"},
    {"result_type", op_result_type, METH_VARARGS,
     "result_type(a, b) -> the promoted dtype"},
    {"clamp", (PyCFunction)(void (*)(void))op_clamp,
     METH_VARARGS | METH_KEYWORDS, "clamp(a, min=None, max=None, out=None)"},
    {NULL},
};
