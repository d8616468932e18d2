/* deterministic.c - ampc.use_deterministic_algorithms's process-wide
 * setting, PyTorch's: the mode and warn_only (set with the GIL held, read
 * by the ops).  In the mode the ops whose CUDA kernels have a faster
 * nondeterministic form take their deterministic one: index_put_ (an
 * accumulation, or a repeated index without one: sorted by destination,
 * each destination written by one thread in index order), scatter_reduce
 * (float sum, mean and prod, likewise) and conv2d (deterministic cuDNN
 * algorithms only).  Every other ampc kernel is deterministic already, so
 * none is left to refuse and warn_only changes nothing but what is
 * reported back.
 */
#include "ampc.h"

static int deterministic_mode = 0;
static int deterministic_warn_only = 0;

int
ampc_deterministic_algorithms(void)
{
    return deterministic_mode;
}

/* a bool argument, with PyTorch's TypeError */
static int
parse_bool(PyObject *obj, const char *what, int *out)
{
    if (!PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "_set_deterministic_algorithms(): argument %s must be "
                     "bool, not %.100s",
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = obj == Py_True;
    return 0;
}

static PyObject *
set_deterministic(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"mode", "warn_only", NULL};
    PyObject *mode_obj, *warn_obj = Py_False;
    int mode, warn_only;
    if (!PyArg_ParseTupleAndKeywords(args, kwds,
                                     "O|$O:_set_deterministic_algorithms",
                                     kwlist, &mode_obj, &warn_obj) ||
        parse_bool(mode_obj, "'mode' (position 1)", &mode) < 0 ||
        parse_bool(warn_obj, "'warn_only'", &warn_only) < 0) {
        return NULL;
    }
    deterministic_mode = mode;
    deterministic_warn_only = warn_only;
    Py_RETURN_NONE;
}

static PyObject *
get_deterministic(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("(OO)", deterministic_mode ? Py_True : Py_False,
                         deterministic_warn_only ? Py_True : Py_False);
}

PyMethodDef ampc_deterministic_methods[] = {
    {"_set_deterministic_algorithms",
     (PyCFunction)(void (*)(void))set_deterministic,
     METH_VARARGS | METH_KEYWORDS,
     "_set_deterministic_algorithms(mode, *, warn_only=False)"},
    {"_deterministic_algorithms", get_deterministic, METH_NOARGS,
     "_deterministic_algorithms() -> (mode, warn_only)"},
    {NULL},
};
