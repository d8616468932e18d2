/* dtype.c - the dtype type, like torch.dtype: five immutable singletons
 * (ampc.float32, float16, bfloat16, int64, bool) with .is_floating_point,
 * .itemsize and .name, picklable by name.
 */
#include "ampc.h"

static const char *const dtype_names[AMPC_NUM_DTYPES] = {
    "float32", "float16", "bfloat16", "int64", "bool"};

const char *
ampc_dtype_name(ampc_dtype dt)
{
    return dtype_names[dt];
}

PyObject *
ampc_dtype_object(ampc_dtype dt)
{
    return ampc_get_state()->dtypes[dt];
}

int
ampc_dtype_from_object(PyObject *obj, ampc_dtype *dt, const char *fn,
                       const char *arg)
{
    ampc_state *st = ampc_get_state();
    if (!PyObject_TypeCheck(obj, st->dtype_type)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be an ampc.dtype "
                     "(e.g. ampc.float16), not %.100s",
                     fn, arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *dt = ((AmpcDtypeObject *)obj)->dtype;
    return 0;
}

static PyObject *
dtype_repr(AmpcDtypeObject *self)
{
    return PyUnicode_FromFormat("ampc.%s", dtype_names[self->dtype]);
}

static PyObject *
dtype_get_name(AmpcDtypeObject *self, void *closure)
{
    return PyUnicode_FromString(dtype_names[self->dtype]);
}

static PyObject *
dtype_get_is_floating_point(AmpcDtypeObject *self, void *closure)
{
    return PyBool_FromLong(ampc_dtype_is_float(self->dtype));
}

static PyObject *
dtype_get_itemsize(AmpcDtypeObject *self, void *closure)
{
    return PyLong_FromSize_t(ampc_dtype_size[self->dtype]);
}

/* Pickled as the global name "float32" of module "ampc". */
static PyObject *
dtype_reduce(AmpcDtypeObject *self, PyObject *unused)
{
    return PyUnicode_FromString(dtype_names[self->dtype]);
}

static void
dtype_dealloc(AmpcDtypeObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef dtype_getset[] = {
    {"name", (getter)dtype_get_name, NULL, "the dtype's name", NULL},
    {"is_floating_point", (getter)dtype_get_is_floating_point, NULL,
     "True for float32, float16 and bfloat16", NULL},
    {"itemsize", (getter)dtype_get_itemsize, NULL, "bytes per element",
     NULL},
    {NULL},
};

static PyMethodDef dtype_methods[] = {
    {"__reduce__", (PyCFunction)dtype_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyType_Slot dtype_slots[] = {
    {Py_tp_repr, dtype_repr},
    {Py_tp_getset, dtype_getset},
    {Py_tp_methods, dtype_methods},
    {Py_tp_dealloc, dtype_dealloc},
    {Py_tp_doc, "A tensor element type, like torch.dtype: ampc.float32, "
                "ampc.float16, ampc.bfloat16, ampc.int64, ampc.bool."},
    {0, NULL},
};

PyType_Spec ampc_dtype_spec = {
    .name = "ampc.dtype",
    .basicsize = sizeof(AmpcDtypeObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = dtype_slots,
};

/* Creates the singletons into the module state and the module. */
int
ampc_dtype_init(PyObject *module, ampc_state *st)
{
    for (int i = 0; i < AMPC_NUM_DTYPES; i++) {
        AmpcDtypeObject *d = PyObject_New(AmpcDtypeObject, st->dtype_type);
        if (d == NULL) {
            return -1;
        }
        d->dtype = (ampc_dtype)i;
        st->dtypes[i] = (PyObject *)d;
        if (PyModule_AddObjectRef(module, dtype_names[i], (PyObject *)d) <
            0) {
            return -1;
        }
    }
    return 0;
}
