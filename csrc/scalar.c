/* scalar.c - single elements between Python numbers and tensor storage,
 * and PyTorch's type promotion (result_type) for tensors and scalars.
 */
#include "ampc.h"

#include <math.h>

#include "amp_math.h"

PyObject *
ampc_scalar_to_python(ampc_dtype dt, const char *p)
{
    switch (dt) {
    case AMPC_FLOAT32: {
        float v;
        memcpy(&v, p, 4);
        return PyFloat_FromDouble(v);
    }
    case AMPC_FLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return PyFloat_FromDouble(ampc_f16_to_f32(h));
    }
    case AMPC_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return PyFloat_FromDouble(ampc_bf16_to_f32(h));
    }
    case AMPC_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        return PyLong_FromLongLong(v);
    }
    default:
        return PyBool_FromLong(*(const uint8_t *)p != 0);
    }
}

/* The value of a float element as a double (ints and bools too). */
double
ampc_scalar_as_double(ampc_dtype dt, const char *p)
{
    switch (dt) {
    case AMPC_FLOAT32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case AMPC_FLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return ampc_f16_to_f32(h);
    }
    case AMPC_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return ampc_bf16_to_f32(h);
    }
    case AMPC_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    default:
        return *(const uint8_t *)p != 0;
    }
}

int
ampc_is_python_scalar(PyObject *v)
{
    return PyFloat_Check(v) || PyLong_Check(v);    /* bool is a PyLong */
}

int
ampc_scalar_from_python(PyObject *v, ampc_dtype dt, char *p, const char *fn,
                        const char *arg)
{
    if (!PyFloat_Check(v) && !PyLong_Check(v) && !PyIndex_Check(v) &&
        !PyNumber_Check(v)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a number, not %.100s", fn,
                     arg, Py_TYPE(v)->tp_name);
        return -1;
    }
    if (dt == AMPC_BOOL) {
        int b = PyObject_IsTrue(v);
        if (b < 0) {
            return -1;
        }
        *(uint8_t *)p = (uint8_t)b;
        return 0;
    }
    if (dt == AMPC_INT64) {
        int64_t i;
        if (PyFloat_Check(v)) {
            double d = PyFloat_AS_DOUBLE(v);
            if (!(d > -9.3e18 && d < 9.3e18)) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s(): value %R of '%s' cannot be converted to "
                             "ampc.int64 without overflow",
                             fn, v, arg);
                return -1;
            }
            i = (int64_t)d;
        }
        else {
            PyObject *idx = PyNumber_Index(v);
            if (idx == NULL) {
                return -1;
            }
            int overflow;
            i = PyLong_AsLongLongAndOverflow(idx, &overflow);
            Py_DECREF(idx);
            if (overflow) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s(): value of '%s' cannot be converted to "
                             "ampc.int64 without overflow",
                             fn, arg);
                return -1;
            }
            if (i == -1 && PyErr_Occurred()) {
                return -1;
            }
        }
        memcpy(p, &i, 8);
        return 0;
    }
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    float f = (float)d;
    if (dt == AMPC_FLOAT32) {
        memcpy(p, &f, 4);
    }
    else {
        uint16_t h = dt == AMPC_FLOAT16 ? ampc_f32_to_f16(f)
                                        : ampc_f32_to_bf16(f);
        memcpy(p, &h, 2);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// type promotion

typedef enum { CAT_BOOL = 0, CAT_INT, CAT_FLOAT } category;

static category
dtype_category(ampc_dtype dt)
{
    return dt == AMPC_BOOL ? CAT_BOOL : dt == AMPC_INT64 ? CAT_INT
                                                         : CAT_FLOAT;
}

ampc_dtype
ampc_promote(ampc_dtype a, ampc_dtype b)
{
    if (a == b) {
        return a;
    }
    if (dtype_category(a) != dtype_category(b)) {
        return dtype_category(a) > dtype_category(b) ? a : b;
    }
    /* two different floats: only float32 holds both */
    return AMPC_FLOAT32;
}

/* PyTorch's three tiers: tensors with dims, 0-d tensors, Python numbers.  A
 * lower tier only matters when its category (bool < int < float) is
 * higher; a Python float then gives float32 and a Python int int64. */
int
ampc_result_type(int n, PyObject *const *operands, ampc_dtype *out)
{
    int have[3] = {0, 0, 0};
    ampc_dtype tier[3] = {AMPC_BOOL, AMPC_BOOL, AMPC_BOOL};
    for (int i = 0; i < n; i++) {
        PyObject *v = operands[i];
        int k;
        ampc_dtype dt;
        if (ampc_tensor_check(v)) {
            AmpcTensorObject *t = AMPC_TENSOR(v);
            k = t->ndim > 0 ? 0 : 1;
            dt = t->dtype;
        }
        else if (PyBool_Check(v)) {
            k = 2;
            dt = AMPC_BOOL;
        }
        else if (PyLong_Check(v)) {
            k = 2;
            dt = AMPC_INT64;
        }
        else if (PyFloat_Check(v)) {
            k = 2;
            dt = AMPC_FLOAT32;
        }
        else {
            return -1;
        }
        tier[k] = have[k] ? ampc_promote(tier[k], dt) : dt;
        have[k] = 1;
    }
    int first = have[0] ? 0 : have[1] ? 1 : 2;
    ampc_dtype r = tier[first];
    for (int k = first + 1; k < 3; k++) {
        if (have[k] && dtype_category(tier[k]) > dtype_category(r)) {
            r = tier[k];
        }
    }
    *out = r;
    return 0;
}

/* PyTorch's canCast: no float -> int/bool and no int -> bool. */
int
ampc_can_cast(ampc_dtype from, ampc_dtype to)
{
    return dtype_category(from) <= dtype_category(to);
}
