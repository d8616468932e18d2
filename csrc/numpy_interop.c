/* numpy_interop.c - NumPy arrays to and from tensors through the NumPy C
 * API: from_numpy and Tensor.numpy() share memory (float16 is
 * numpy.float16), tensor_from_array copies, and the raw-bits helpers let
 * tests build bfloat16 tensors from uint16 patterns.  The only file that
 * includes NumPy's headers.
 */
#include "ampc.h"

#define PY_ARRAY_UNIQUE_SYMBOL ampc_ARRAY_API
#include <numpy/arrayobject.h>

int
ampc_numpy_init(void)
{
    import_array1(-1);
    return 0;
}

static int
npy_type_of(ampc_dtype dt)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return NPY_FLOAT32;
    case AMPC_FLOAT16:
        return NPY_FLOAT16;
    case AMPC_INT64:
        return NPY_INT64;
    case AMPC_BOOL:
        return NPY_BOOL;
    default:
        return -1;
    }
}

static int
dtype_of_npy(int type, ampc_dtype *dt)
{
    switch (type) {
    case NPY_FLOAT32:
        *dt = AMPC_FLOAT32;
        return 0;
    case NPY_FLOAT16:
        *dt = AMPC_FLOAT16;
        return 0;
    case NPY_INT64:
        *dt = AMPC_INT64;
        return 0;
    case NPY_BOOL:
        *dt = AMPC_BOOL;
        return 0;
    default:
        return -1;
    }
}

/* Checks that arr can back a tensor and returns its dtype, or -1. */
static int
check_array(const char *fn, PyObject *obj, ampc_dtype *dt)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): expected np.ndarray (got %.100s)",
                     fn, Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyArrayObject *arr = (PyArrayObject *)obj;
    if (dtype_of_npy(PyArray_TYPE(arr), dt) < 0) {
        PyObject *name = PyObject_Str((PyObject *)PyArray_DESCR(arr));
        PyErr_Format(PyExc_TypeError,
                     "%s(): can't convert np.ndarray of type numpy.%S. The "
                     "only supported types are: float32, float16, int64 and "
                     "bool.",
                     fn, name ? name : Py_None);
        Py_XDECREF(name);
        return -1;
    }
    if (!PyArray_ISNOTSWAPPED(arr)) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): the array's byte order is not native; use "
                     "a.astype(a.dtype.newbyteorder('='))",
                     fn);
        return -1;
    }
    if (PyArray_NDIM(arr) > AMPC_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): at most %d dimensions are supported", fn,
                     AMPC_MAX_DIMS);
        return -1;
    }
    return 0;
}

/* from_numpy(a): a tensor over a's memory, keeping a alive. */
static PyObject *
np_from_numpy(PyObject *module, PyObject *obj)
{
    ampc_dtype dt;
    if (check_array("from_numpy", obj, &dt) < 0) {
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)obj;
    int nd = PyArray_NDIM(arr);
    npy_intp itemsize = PyArray_ITEMSIZE(arr);
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        npy_intp st = PyArray_STRIDES(arr)[d];
        shape[d] = PyArray_DIMS(arr)[d];
        if (st < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "from_numpy(): At least one stride in the given "
                            "numpy array is negative, and tensors with "
                            "negative strides are not currently supported. "
                            "(You can probably work around this by making a "
                            "copy of your array  with array.copy().)");
            return NULL;
        }
        if (st % itemsize != 0) {
            PyErr_SetString(PyExc_ValueError,
                            "from_numpy(): given numpy array strides not a "
                            "multiple of the element byte size. Copy the "
                            "numpy array to reallocate the memory.");
            return NULL;
        }
        strides[d] = st / itemsize;
    }
    if (!PyArray_ISALIGNED(arr)) {
        PyErr_SetString(PyExc_ValueError,
                        "from_numpy(): the array's data is not aligned; "
                        "copy it with a.copy()");
        return NULL;
    }
    /* the extent the tensor may touch, for as_strided's bounds check */
    size_t extent = (size_t)itemsize;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 0) {
            extent = 0;
            break;
        }
        extent += (size_t)((shape[d] - 1) * strides[d]) * (size_t)itemsize;
    }
    ampc_storage *s = ampc_storage_borrow(obj, PyArray_DATA(arr), extent);
    if (s == NULL) {
        return NULL;
    }
    AmpcTensorObject *t = (AmpcTensorObject *)ampc_get_state()
                              ->tensor_class->tp_alloc(
                                  ampc_get_state()->tensor_class, 0);
    if (t == NULL) {
        ampc_storage_decref(s);
        return NULL;
    }
    t->storage = s;
    t->data = s->data;
    t->ndim = nd;
    t->dtype = dt;
    t->device = (ampc_device){AMPC_DEV_CPU, 0};
    memcpy(t->shape, shape, sizeof(int64_t) * nd);
    memcpy(t->strides, strides, sizeof(int64_t) * nd);
    return (PyObject *)t;
}

/* tensor_from_array(a, dtype, device): a copy of a, cast to dtype. */
static PyObject *
np_tensor_from_array(PyObject *module, PyObject *args)
{
    PyObject *arr_obj, *dt_obj, *dev_obj = Py_None;
    ampc_dtype dt;
    ampc_device dev;
    if (!PyArg_ParseTuple(args, "OO|O:tensor_from_array", &arr_obj, &dt_obj,
                          &dev_obj) ||
        ampc_dtype_from_object(dt_obj, &dt, "tensor", "dtype") < 0 ||
        ampc_parse_device(dev_obj, &dev, "tensor") < 0) {
        return NULL;
    }
    PyObject *src = np_from_numpy(module, arr_obj);
    if (src == NULL) {
        return NULL;
    }
    AmpcTensorObject *s = AMPC_TENSOR(src);
    AmpcTensorObject *out = ampc_tensor_empty(s->ndim, s->shape, dt, dev);
    if (out != NULL && ampc_copy_into(out, s) < 0) {
        Py_CLEAR(out);
    }
    Py_DECREF(src);
    return (PyObject *)out;
}

/* Tensor._numpy(): an ndarray over the tensor's memory; its base is the
 * tensor, so the memory lives as long as either. */
static PyObject *
np_tensor_numpy(AmpcTensorObject *self, PyObject *unused)
{
    if (self->device.type != AMPC_DEV_CPU) {
        PyErr_Format(PyExc_TypeError,
                     "can't convert cuda:%d device type tensor to numpy. "
                     "Use Tensor.cpu() to copy the tensor to host memory "
                     "first.",
                     self->device.index);
        return NULL;
    }
    if (self->requires_grad) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Can't call numpy() on Tensor that requires grad. "
                        "Use tensor.detach().numpy() instead.");
        return NULL;
    }
    int type = npy_type_of(self->dtype);
    if (type < 0) {
        PyErr_SetString(PyExc_TypeError,
                        "Got unsupported ScalarType BFloat16 (NumPy has no "
                        "bfloat16; convert first, e.g. t.float().numpy())");
        return NULL;
    }
    npy_intp dims[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    npy_intp itemsize = (npy_intp)ampc_dtype_size[self->dtype];
    for (int d = 0; d < self->ndim; d++) {
        dims[d] = (npy_intp)self->shape[d];
        strides[d] = (npy_intp)self->strides[d] * itemsize;
    }
    PyObject *arr = PyArray_New(&PyArray_Type, self->ndim, dims, type,
                                strides, self->data, (int)itemsize,
                                NPY_ARRAY_WRITEABLE, NULL);
    if (arr == NULL) {
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr,
                              Py_NewRef((PyObject *)self)) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* to_bits(t): a uint16 ndarray copy of a float16/bfloat16 tensor's bits. */
static PyObject *
np_to_bits(PyObject *module, PyObject *obj)
{
    if (!ampc_tensor_check(obj) ||
        ampc_dtype_size[AMPC_TENSOR(obj)->dtype] != 2) {
        PyErr_SetString(PyExc_TypeError,
                        "to_bits(): expected a float16 or bfloat16 Tensor");
        return NULL;
    }
    AmpcTensorObject *c = ampc_contiguous(AMPC_TENSOR(obj));
    if (c == NULL) {
        return NULL;
    }
    npy_intp dims[AMPC_MAX_DIMS];
    for (int d = 0; d < c->ndim; d++) {
        dims[d] = (npy_intp)c->shape[d];
    }
    PyObject *arr = PyArray_SimpleNew(c->ndim, dims, NPY_UINT16);
    if (arr != NULL &&
        ampc_read_to_host("to_bits", c, PyArray_DATA((PyArrayObject *)arr),
                          (size_t)ampc_numel(c) * 2) < 0) {
        Py_CLEAR(arr);
    }
    Py_DECREF(c);
    return arr;
}

/* from_bits(a, dtype): a float16/bfloat16 tensor from a uint16 array. */
static PyObject *
np_from_bits(PyObject *module, PyObject *args)
{
    PyObject *arr_obj, *dt_obj;
    ampc_dtype dt;
    if (!PyArg_ParseTuple(args, "OO:from_bits", &arr_obj, &dt_obj) ||
        ampc_dtype_from_object(dt_obj, &dt, "from_bits", "dtype") < 0) {
        return NULL;
    }
    if (ampc_dtype_size[dt] != 2 || !PyArray_Check(arr_obj) ||
        PyArray_TYPE((PyArrayObject *)arr_obj) != NPY_UINT16) {
        PyErr_SetString(PyExc_TypeError,
                        "from_bits(): expected a uint16 np.ndarray and "
                        "dtype float16 or bfloat16");
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)PyArray_GETCONTIGUOUS(
        (PyArrayObject *)arr_obj);
    if (arr == NULL) {
        return NULL;
    }
    int nd = PyArray_NDIM(arr);
    int64_t shape[AMPC_MAX_DIMS];
    for (int d = 0; d < nd && d < AMPC_MAX_DIMS; d++) {
        shape[d] = PyArray_DIMS(arr)[d];
    }
    AmpcTensorObject *t = nd > AMPC_MAX_DIMS
                              ? NULL
                              : ampc_tensor_empty(nd, shape, dt,
                                                  (ampc_device){0, 0});
    if (t != NULL) {
        memcpy(t->data, PyArray_DATA(arr), (size_t)ampc_numel(t) * 2);
    }
    else if (nd > AMPC_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "from_bits(): too many dims");
    }
    Py_DECREF(arr);
    return (PyObject *)t;
}

PyMethodDef ampc_numpy_methods[] = {
    {"_numpy", (PyCFunction)np_tensor_numpy, METH_NOARGS,
     "an ndarray sharing this tensor's memory"},
    {NULL},
};

PyMethodDef ampc_numpy_functions[] = {
    {"from_numpy", np_from_numpy, METH_O,
     "from_numpy(a) -> a tensor sharing a's memory"},
    {"tensor_from_array", np_tensor_from_array, METH_VARARGS,
     "tensor_from_array(a, dtype, device=None) -> a copy of a as dtype"},
    {"to_bits", np_to_bits, METH_O,
     "to_bits(t) -> uint16 ndarray of a float16/bfloat16 tensor's bits"},
    {"from_bits", np_from_bits, METH_VARARGS,
     "from_bits(a, dtype) -> float16/bfloat16 tensor from uint16 bits"},
    {NULL},
};
