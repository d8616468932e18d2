/* memory_ops.c - ampc._C's memory functions: the per-device statistics of
 * live tensor storage (memory_allocated, max_memory_allocated,
 * reset_peak_memory_stats), empty_cache, and pinned host memory
 * (pin_memory, is_pinned).
 */
#include "ampc.h"

#include "ops.h"

// ----------------------------------------------------------------------------
// memory statistics

static PyObject *
memory_query(PyObject *arg, const char *fn, int what)
{
    ampc_device dev;
    if (ampc_parse_device(arg, &dev, fn) < 0) {
        return NULL;
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
    if (ampc_cuda.empty_cache != NULL && ampc_cuda_count() > 0) {
        int rc = ampc_cuda.empty_cache();
        if (rc != 0) {
            return ampc_cuda_raise("empty_cache", rc);
        }
    }
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------
// pinned memory

/* pin_memory(t) -> a contiguous copy of CPU tensor t in pinned memory. */
static PyObject *
op_pin_memory(PyObject *module, PyObject *t_obj)
{
    if (ampc_check_tensor_any("pin_memory", "self", t_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *t = AMPC_TENSOR(t_obj);
    if (ampc_is_cuda(t)) {
        char d[16];
        ampc_device_str(d, sizeof(d), t->device);
        PyErr_Format(PyExc_RuntimeError,
                     "pin_memory(): cannot pin '%s' memory: only CPU "
                     "tensors can be pinned",
                     d);
        return NULL;
    }
    ampc_storage *st = ampc_storage_new_pinned(
        (size_t)ampc_numel(t) * ampc_dtype_size[t->dtype]);
    if (st == NULL) {
        return NULL;
    }
    /* an empty tensor re-pointed at the pinned storage */
    int64_t zero = 0;
    AmpcTensorObject *out = ampc_tensor_empty(1, &zero, t->dtype, t->device);
    if (out == NULL) {
        ampc_storage_decref(st);
        return NULL;
    }
    ampc_storage_decref(out->storage);
    out->storage = st;
    out->data = st->data;
    out->ndim = t->ndim;
    int64_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        out->shape[d] = t->shape[d];
        out->strides[d] = stride;
        stride *= t->shape[d] > 0 ? t->shape[d] : 1;
    }
    if (ampc_copy_into(out, t) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

static PyObject *
op_is_pinned(PyObject *module, PyObject *t_obj)
{
    if (ampc_check_tensor_any("is_pinned", "self", t_obj) < 0) {
        return NULL;
    }
    return PyBool_FromLong(AMPC_TENSOR(t_obj)->storage->pinned);
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_memory_methods[] = {
    {"memory_allocated", op_memory_allocated, METH_VARARGS,
     "bytes of live tensor storage on a device"},
    {"max_memory_allocated", op_max_memory_allocated, METH_VARARGS,
     "peak bytes of tensor storage since the last reset"},
    {"reset_peak_memory_stats", op_reset_peak_memory_stats, METH_VARARGS,
     "resets the peak to the live bytes"},
    {"empty_cache", op_empty_cache, METH_NOARGS,
     "returns the cached free blocks (CPU, and every GPU's) to the system"},
    {"pin_memory", op_pin_memory, METH_O,
     "pin_memory(t) -> a contiguous copy of CPU tensor t in pinned memory"},
    {"is_pinned", op_is_pinned, METH_O,
     "is_pinned(t) -> True when t's storage is pinned host memory"},
    {NULL},
};
