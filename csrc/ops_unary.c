/* ops_unary.c - the unary element-wise ops (neg, abs, sqrt, exp, log,
 * relu, sign, sigmoid, tanh, gelu, gelu_tanh, silu and those three's
 * derivatives, pow's shortcuts square, cube, reciprocal_square, rsqrt and
 * reciprocal, the roundings floor, ceil, round, trunc and frac, sin, cos,
 * log1p, expm1, log2, log10, erf, erfc, tan, asin, acos, atan, sinh, cosh,
 * asinh, acosh, atanh, isfinite) as _C.unary(op, a,
 * out=None): an integer or bool
 * input of a float-only op computes in float32, isfinite writes bool.
 * CPU tensors run the CPU table's 1-D kernels per innermost run, CUDA
 * tensors hand the iteration to cuda/elementwise.cu.  ops_elementwise.c's
 * pow calls ampc_unary_into for its shortcuts.
 */
#include "ampc.h"

#include "ops.h"

static const char *const unary_names[AMPC_NUM_UNARY] = {
    "neg", "abs", "sqrt", "exp", "log", "relu", "sign", "sigmoid", "tanh",
    "gelu", "gelu_tanh", "silu", "gelu_grad", "gelu_tanh_grad", "silu_grad",
    "square", "cube", "reciprocal_square", "rsqrt", "reciprocal", "floor",
    "ceil", "round", "trunc", "frac", "sin", "cos", "log1p", "expm1", "log2",
    "log10", "erf", "erfc", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "isfinite"};

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

/* The dtype op computes in and the dtype it returns for input dtype dt:
 * an integer or bool input of a float-only op (sqrt, exp, log, and
 * kernels.h's run from sigmoid to reciprocal) computes in float32,
 * isfinite writes bool.  -1 with RuntimeError (naming fn) for a bool input
 * of an integer op. */
static int
unary_dtypes(const char *fn, ampc_unary_op op, ampc_dtype *dt,
             ampc_dtype *result)
{
    *result = *dt;
    if (op == AMPC_UN_SQRT || op == AMPC_UN_EXP || op == AMPC_UN_LOG ||
        (op >= AMPC_UN_SIGMOID && op < AMPC_UN_ISFINITE)) {
        if (!ampc_dtype_is_float(*dt)) {
            *dt = *result = AMPC_FLOAT32;
        }
    }
    else if (op == AMPC_UN_ISFINITE) {
        *result = AMPC_BOOL;
    }
    else if (*dt == AMPC_BOOL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): not supported for bool tensors; convert with "
                     ".long() or .float() first",
                     fn);
        return -1;
    }
    return 0;
}

/* Runs op from `in` (dtype dt) into target, on its device. */
static int
run_unary(const char *fn, ampc_unary_op op, ampc_dtype dt,
          AmpcTensorObject *target, AmpcTensorObject *in)
{
    AmpcTensorObject *ops[2] = {target, in};
    ampc_iter it;
    ampc_iter_init(&it, 2, ops);
    if (ampc_is_cuda(target)) {
        int code = ampc_cuda.unary(op, dt, &it);
        if (code != 0) {
            ampc_cuda_raise(fn, code);
            return -1;
        }
        return 0;
    }
    unary_ctx c = {op, dt};
    ampc_run_iter(&it, unary_inner, &c, ampc_numel(target));
    return 0;
}

PyObject *
ampc_unary_into(const char *fn, ampc_unary_op op, AmpcTensorObject *a,
                PyObject *out_obj)
{
    if (ampc_cuda_enter(fn, a->device) < 0) {
        return NULL;
    }
    ampc_dtype dt = a->dtype, result;
    if (unary_dtypes(fn, op, &dt, &result) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = ampc_prepare_out(fn, out_obj, a->ndim,
                                             a->shape, result, a->device);
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
        (in = ampc_unalias(cast, target)) == NULL ||
        run_unary(fn, op, dt, target, in) < 0) {
        goto done;
    }
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
    if (ampc_check_tensor_any(fn, "self", a_obj) < 0) {
        return NULL;
    }
    return ampc_unary_into(fn, (ampc_unary_op)op, AMPC_TENSOR(a_obj),
                           out_obj);
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_unary_methods[] = {
    {"unary", (PyCFunction)(void (*)(void))op_unary,
     METH_VARARGS | METH_KEYWORDS,
     "unary(op, a, out=None): neg abs sqrt exp log relu sign sigmoid tanh "
     "gelu gelu_tanh silu gelu_grad gelu_tanh_grad silu_grad square cube "
     "reciprocal_square rsqrt reciprocal floor ceil round trunc frac sin "
     "cos log1p expm1 log2 log10 erf erfc tan asin acos atan sinh cosh "
     "asinh acosh atanh isfinite"},
    {NULL},
};
