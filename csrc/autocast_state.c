/* autocast_state.c - PyTorch's imperative autocast state functions, for
 * code that manages the state by hand instead of through `with autocast`:
 *
 *     ampc.set_autocast_enabled("cpu", True)
 *     ampc.set_autocast_dtype("cpu", ampc.bfloat16)
 *     ampc.autocast_increment_nesting()
 *     ...
 *     if ampc.autocast_decrement_nesting() == 0:
 *         ampc.clear_autocast_cache()
 *
 * Each setter replaces the context's state snapshot (autocast.c) with a
 * changed copy; an enclosing `with autocast` restores its own at exit, as
 * PyTorch's __exit__ restores the values it saved.
 */
#include "autocast.h"

/* The current snapshot, copied for a change; NULL on error. */
static AutocastState *
state_to_change(void)
{
    AutocastState *st = ampc_autocast_state();
    if (st == NULL) {
        return NULL;
    }
    AutocastState *next = ampc_autocast_copy_state(st);
    Py_DECREF(st);
    return next;
}

static PyObject *
commit(AutocastState *next)
{
    int rc = ampc_autocast_set_state(next);
    Py_DECREF(next);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* PyTorch's message for a non-bool flag; -1 with it set. */
static int
bool_arg(PyObject *obj, const char *fn, const char *name, int pos)
{
    if (!PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' (position %d) must be bool, not %s",
                     fn, name, pos, Py_TYPE(obj)->tp_name);
        return -1;
    }
    return obj == Py_True;
}

/* set_autocast_enabled(device_type, enabled), or the legacy
 * set_autocast_enabled(enabled), which means CUDA. */
static PyObject *
as_set_autocast_enabled(PyObject *module, PyObject *args)
{
    static const char *fn = "set_autocast_enabled";
    PyObject *a, *b = NULL;
    if (!PyArg_UnpackTuple(args, fn, 1, 2, &a, &b)) {
        return NULL;
    }
    int device = AMPC_DEV_CUDA;
    PyObject *flag = a;
    if (b != NULL) {
        device = ampc_autocast_device_type(a, fn);
        flag = b;
    }
    if (device < 0) {
        return NULL;
    }
    int enabled = bool_arg(flag, fn, "enabled", b != NULL ? 2 : 1);
    if (enabled < 0) {
        return NULL;
    }
    AutocastState *next = state_to_change();
    if (next == NULL) {
        return NULL;
    }
    next->enabled[device] = (char)enabled;
    return commit(next);
}

static PyObject *
as_set_autocast_dtype(PyObject *module, PyObject *args)
{
    static const char *fn = "set_autocast_dtype";
    PyObject *dev_obj, *dtype_obj;
    if (!PyArg_UnpackTuple(args, fn, 2, 2, &dev_obj, &dtype_obj)) {
        return NULL;
    }
    int device = ampc_autocast_device_type(dev_obj, fn);
    if (device < 0) {
        return NULL;
    }
    ampc_dtype dt;
    if (ampc_dtype_from_object(dtype_obj, &dt, fn, "dtype") < 0) {
        return NULL;
    }
    if (!ampc_dtype_is_float(dt)) {
        PyErr_Format(PyExc_TypeError,
                     "set_autocast_dtype(): dtype must be a floating point "
                     "dtype to run ops in, ampc.float16 or ampc.bfloat16 "
                     "(got ampc.%s)",
                     ampc_dtype_name(dt));
        return NULL;
    }
    AutocastState *next = state_to_change();
    if (next == NULL) {
        return NULL;
    }
    next->dtype[device] = dt;
    return commit(next);
}

static PyObject *
as_set_autocast_cache_enabled(PyObject *module, PyObject *arg)
{
    int enabled = bool_arg(arg, "set_autocast_cache_enabled", "enabled", 1);
    if (enabled < 0) {
        return NULL;
    }
    AutocastState *next = state_to_change();
    if (next == NULL) {
        return NULL;
    }
    next->cache_enabled = (char)enabled;
    return commit(next);
}

/* The nesting count after adding `by` to it. */
static PyObject *
change_nesting(int by)
{
    AutocastState *next = state_to_change();
    if (next == NULL) {
        return NULL;
    }
    if (next->nesting + by < 0) {
        Py_DECREF(next);
        PyErr_SetString(PyExc_RuntimeError,
                        "autocast_decrement_nesting(): the autocast nesting "
                        "is already 0 (more decrements than increments, or "
                        "than autocast contexts entered)");
        return NULL;
    }
    next->nesting += by;
    long nesting = next->nesting;
    if (ampc_autocast_set_state(next) < 0) {
        Py_DECREF(next);
        return NULL;
    }
    Py_DECREF(next);
    return PyLong_FromLong(nesting);
}

static PyObject *
as_autocast_increment_nesting(PyObject *module, PyObject *unused)
{
    return change_nesting(1);
}

static PyObject *
as_autocast_decrement_nesting(PyObject *module, PyObject *unused)
{
    return change_nesting(-1);
}

PyMethodDef ampc_autocast_state_functions[] = {
    {"set_autocast_enabled", as_set_autocast_enabled, METH_VARARGS,
     "set_autocast_enabled(device_type, enabled), or (enabled) for CUDA"},
    {"set_autocast_dtype", as_set_autocast_dtype, METH_VARARGS,
     "set_autocast_dtype(device_type, dtype)"},
    {"set_autocast_cache_enabled", as_set_autocast_cache_enabled, METH_O,
     "set_autocast_cache_enabled(enabled): whether weight casts are cached"},
    {"autocast_increment_nesting", as_autocast_increment_nesting,
     METH_NOARGS, "autocast_increment_nesting() -> the new nesting count"},
    {"autocast_decrement_nesting", as_autocast_decrement_nesting,
     METH_NOARGS, "autocast_decrement_nesting() -> the new nesting count"},
    {NULL},
};
