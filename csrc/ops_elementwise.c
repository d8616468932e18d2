/* ops_elementwise.c - binary ops, comparisons, unary ops and clamp with
 * broadcasting, Python scalars and PyTorch's type promotion; float16 and
 * bfloat16 with a scalar compute in float32 ("opmath").
 */
#include "ampc.h"

#include <math.h>

#include "amp_math.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// binary ops

static const char *const binary_names[AMPC_NUM_BINARY] = {
    "add", "sub", "mul", "div", "maximum", "minimum", "pow"};
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
    if (tensors == 2 && !ampc_same_device(AMPC_TENSOR(a), AMPC_TENSOR(b))) {
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
    if (ampc_check_tensor(fn, "out", out_obj) < 0) {
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
    int cmp = ampc_lookup_name(compare_names, AMPC_NUM_COMPARE, name, "compare");
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
    int op = ampc_lookup_name(unary_names, AMPC_NUM_UNARY, name, "unary");
    if (op < 0) {
        return NULL;
    }
    const char *fn = unary_names[op];
    if (ampc_check_tensor(fn, "self", a_obj) < 0) {
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
    if (target == NULL || (cast = ampc_as_dtype(a, dt)) == NULL ||
        (in = ampc_unalias(cast, target)) == NULL) {
        goto done;
    }
    AmpcTensorObject *ops[2] = {target, in};
    ampc_iter it;
    ampc_iter_init(&it, 2, ops);
    unary_ctx c = {(ampc_unary_op)op, dt};
    ampc_run_iter(&it, unary_inner, &c, ampc_numel(target));
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
        ampc_check_tensor("clamp", "self", a_obj) < 0) {
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

PyMethodDef ampc_elementwise_methods[] = {
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
    {NULL},
};
