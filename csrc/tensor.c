/* tensor.c - TensorBase, the C half of ampc.Tensor (like torch._C.TensorBase):
 * storage, dtype, device, shape and strides, and the autograd fields that
 * ampc/autograd.py reads and writes (requires_grad, grad, grad_fn).  The
 * Python subclass ampc.Tensor adds operators and autograd; C never walks a
 * graph.  View methods live in views.c, NumPy interop in numpy_interop.c.
 */
#include "ampc.h"
#include "structmember.h"

// ----------------------------------------------------------------------------
// construction helpers

int
ampc_tensor_check(PyObject *op)
{
    return PyObject_TypeCheck(op, ampc_get_state()->tensor_base_type);
}

int64_t
ampc_numel(const AmpcTensorObject *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        n *= t->shape[d];
    }
    return n;
}

int
ampc_is_contiguous(const AmpcTensorObject *t)
{
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expected) {
            return 0;
        }
        expected *= t->shape[d];
    }
    return 1;
}

static AmpcTensorObject *
tensor_alloc(PyTypeObject *type)
{
    AmpcTensorObject *t = (AmpcTensorObject *)type->tp_alloc(type, 0);
    if (t == NULL) {
        return NULL;
    }
    /* tp_alloc zero-fills: no storage, no grad, not requiring grad */
    return t;
}

AmpcTensorObject *
ampc_tensor_empty(int ndim, const int64_t *shape, ampc_dtype dt,
                  ampc_device dev)
{
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            PyErr_Format(PyExc_ValueError,
                         "ampc: negative dimension %lld in a tensor shape",
                         (long long)shape[d]);
            return NULL;
        }
        if (shape[d] != 0 && numel > INT64_MAX / 16 / shape[d]) {
            PyErr_SetString(PyExc_ValueError,
                            "ampc: tensor shape is too large");
            return NULL;
        }
        numel *= shape[d];
    }
    AmpcTensorObject *t = tensor_alloc(ampc_get_state()->tensor_class);
    if (t == NULL) {
        return NULL;
    }
    t->storage = ampc_storage_new(dev, (size_t)numel * ampc_dtype_size[dt]);
    if (t->storage == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    t->data = t->storage->data;
    t->ndim = ndim;
    t->dtype = dt;
    t->device = dev;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t->shape[d] = shape[d];
        t->strides[d] = stride;
        stride *= shape[d] > 0 ? shape[d] : 1;
    }
    return t;
}

AmpcTensorObject *
ampc_tensor_view(AmpcTensorObject *base, int ndim, const int64_t *shape,
                 const int64_t *strides, char *data)
{
    AmpcTensorObject *t = tensor_alloc(Py_TYPE(base));
    if (t == NULL) {
        return NULL;
    }
    t->storage = base->storage;
    t->storage->refcnt++;
    t->base = Py_NewRef(base->base != NULL ? base->base : (PyObject *)base);
    t->data = data;
    t->ndim = ndim;
    t->dtype = base->dtype;
    t->device = base->device;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->strides[d] = strides[d];
    }
    return t;
}

AmpcTensorObject *
ampc_contiguous(AmpcTensorObject *t)
{
    if (ampc_is_contiguous(t)) {
        Py_INCREF(t);
        return t;
    }
    AmpcTensorObject *out = ampc_tensor_empty(t->ndim, t->shape, t->dtype,
                                              t->device);
    if (out == NULL) {
        return NULL;
    }
    if (ampc_copy_into(out, t) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

void
ampc_format_shape(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t pos = 0;
    pos += (size_t)snprintf(buf + pos, size - pos, "[");
    for (int d = 0; d < ndim && pos < size; d++) {
        pos += (size_t)snprintf(buf + pos, size - pos, d ? ", %lld" : "%lld",
                                (long long)shape[d]);
    }
    if (pos < size) {
        snprintf(buf + pos, size - pos, "]");
    }
}

// ----------------------------------------------------------------------------
// type slots

static int
tensor_traverse(AmpcTensorObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->grad);
    Py_VISIT(self->grad_fn);
    Py_VISIT(self->base);
    if (self->storage != NULL) {
        Py_VISIT(self->storage->owner);
    }
    return 0;
}

static int
tensor_clear(AmpcTensorObject *self)
{
    Py_CLEAR(self->grad);
    Py_CLEAR(self->grad_fn);
    Py_CLEAR(self->base);
    return 0;
}

static void
tensor_dealloc(AmpcTensorObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    tensor_clear(self);
    ampc_storage_decref(self->storage);
    self->storage = NULL;
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* TensorBase() from Python makes an empty float32 CPU tensor of shape (0,),
 * so that subclasses can be instantiated; ampc.tensor() is the real API. */
static PyObject *
tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    AmpcTensorObject *t = tensor_alloc(type);
    if (t == NULL) {
        return NULL;
    }
    t->storage = ampc_storage_new((ampc_device){AMPC_DEV_CPU, 0}, 0);
    if (t->storage == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    t->data = t->storage->data;
    t->ndim = 1;
    t->shape[0] = 0;
    t->strides[0] = 1;
    t->dtype = AMPC_FLOAT32;
    return (PyObject *)t;
}

// ----------------------------------------------------------------------------
// properties

static PyObject *
tuple_from_i64(int n, const int64_t *v)
{
    PyObject *tup = PyTuple_New(n);
    if (tup == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, x);
    }
    return tup;
}

static PyObject *
tensor_get_shape(AmpcTensorObject *self, void *closure)
{
    PyObject *tup = tuple_from_i64(self->ndim, self->shape);
    PyObject *size_class = ampc_get_state()->size_class;
    if (tup == NULL || size_class == NULL) {
        return tup;
    }
    PyObject *size = PyObject_CallOneArg(size_class, tup);
    Py_DECREF(tup);
    return size;
}

static PyObject *
tensor_get_dtype(AmpcTensorObject *self, void *closure)
{
    return Py_NewRef(ampc_dtype_object(self->dtype));
}

static PyObject *
tensor_get_device_type(AmpcTensorObject *self, void *closure)
{
    return PyUnicode_FromString(self->device.type == AMPC_DEV_CPU ? "cpu"
                                                                  : "cuda");
}

static PyObject *
tensor_get_device_index(AmpcTensorObject *self, void *closure)
{
    return PyLong_FromLong(self->device.index);
}

static PyObject *
tensor_get_ndim(AmpcTensorObject *self, void *closure)
{
    return PyLong_FromLong(self->ndim);
}

static PyObject *
tensor_get_requires_grad(AmpcTensorObject *self, void *closure)
{
    return PyBool_FromLong(self->requires_grad);
}

static int
tensor_set_requires_grad(AmpcTensorObject *self, PyObject *value,
                         void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "cannot delete requires_grad");
        return -1;
    }
    int flag = PyObject_IsTrue(value);
    if (flag < 0) {
        return -1;
    }
    if (flag && !ampc_dtype_is_float(self->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "only Tensors of floating point dtype can require "
                     "gradients (got ampc.%s)",
                     ampc_dtype_name(self->dtype));
        return -1;
    }
    if (self->grad_fn != NULL && self->grad_fn != Py_None && !flag) {
        PyErr_SetString(PyExc_RuntimeError,
                        "you can only change requires_grad flags of leaf "
                        "variables. If you want to use a computed variable "
                        "in a subgraph that doesn't require differentiation "
                        "use var_no_grad = var.detach().");
        return -1;
    }
    self->requires_grad = (char)flag;
    return 0;
}

static PyObject *
tensor_get_grad(AmpcTensorObject *self, void *closure)
{
    return Py_NewRef(self->grad != NULL ? self->grad : Py_None);
}

static int
tensor_set_grad(AmpcTensorObject *self, PyObject *value, void *closure)
{
    if (value == NULL || value == Py_None) {
        Py_CLEAR(self->grad);
        return 0;
    }
    if (!ampc_tensor_check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "assigned grad expected to be a Tensor or None but got "
                     "%.100s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    AmpcTensorObject *g = AMPC_TENSOR(value);
    if (g->dtype != self->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "assigned grad has data of type ampc.%s that differs "
                     "from the tensor's ampc.%s",
                     ampc_dtype_name(g->dtype), ampc_dtype_name(self->dtype));
        return -1;
    }
    if (g->device.type != self->device.type ||
        g->device.index != self->device.index) {
        PyErr_SetString(PyExc_RuntimeError,
                        "assigned grad has data located on a different "
                        "device than the tensor");
        return -1;
    }
    int same = g->ndim == self->ndim;
    for (int d = 0; same && d < g->ndim; d++) {
        same = g->shape[d] == self->shape[d];
    }
    if (!same) {
        char a[256], b[256];
        ampc_format_shape(a, sizeof(a), g->ndim, g->shape);
        ampc_format_shape(b, sizeof(b), self->ndim, self->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "assigned grad has data of a different size: got %s, "
                     "expected %s",
                     a, b);
        return -1;
    }
    Py_XSETREF(self->grad, Py_NewRef(value));
    return 0;
}

static PyObject *
tensor_get_grad_fn(AmpcTensorObject *self, void *closure)
{
    return Py_NewRef(self->grad_fn != NULL ? self->grad_fn : Py_None);
}

static int
tensor_set_grad_fn(AmpcTensorObject *self, PyObject *value, void *closure)
{
    if (value == NULL || value == Py_None) {
        Py_CLEAR(self->grad_fn);
    }
    else {
        Py_XSETREF(self->grad_fn, Py_NewRef(value));
    }
    return 0;
}

static PyObject *
tensor_get_is_leaf(AmpcTensorObject *self, void *closure)
{
    return PyBool_FromLong(self->grad_fn == NULL);
}

static PyObject *
tensor_get_retains_grad(AmpcTensorObject *self, void *closure)
{
    return PyBool_FromLong(self->retains_grad);
}

static int
tensor_set_retains_grad(AmpcTensorObject *self, PyObject *value,
                        void *closure)
{
    int flag = value == NULL ? 0 : PyObject_IsTrue(value);
    if (flag < 0) {
        return -1;
    }
    self->retains_grad = (char)flag;
    return 0;
}

static PyObject *
tensor_get_base(AmpcTensorObject *self, void *closure)
{
    return Py_NewRef(self->base != NULL ? self->base : Py_None);
}

static PyObject *
tensor_get_version(AmpcTensorObject *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->storage->version);
}

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_get_shape, NULL, "the shape, an ampc.Size",
     NULL},
    {"dtype", (getter)tensor_get_dtype, NULL, "the element type", NULL},
    {"device_type", (getter)tensor_get_device_type, NULL,
     "'cpu' or 'cuda'", NULL},
    {"device_index", (getter)tensor_get_device_index, NULL,
     "the device index", NULL},
    {"ndim", (getter)tensor_get_ndim, NULL, "number of dimensions", NULL},
    {"requires_grad", (getter)tensor_get_requires_grad,
     (setter)tensor_set_requires_grad, "whether autograd records ops on it",
     NULL},
    {"grad", (getter)tensor_get_grad, (setter)tensor_set_grad,
     "the accumulated gradient, or None", NULL},
    {"grad_fn", (getter)tensor_get_grad_fn, (setter)tensor_set_grad_fn,
     "the autograd node that produced it, or None", NULL},
    {"is_leaf", (getter)tensor_get_is_leaf, NULL,
     "True when no autograd node produced it", NULL},
    {"_retains_grad", (getter)tensor_get_retains_grad,
     (setter)tensor_set_retains_grad, NULL, NULL},
    {"_base", (getter)tensor_get_base, NULL,
     "the tensor this view was made from, or None", NULL},
    {"_version", (getter)tensor_get_version, NULL,
     "in-place write counter, shared by views", NULL},
    {NULL},
};

// ----------------------------------------------------------------------------
// small methods

static PyObject *
tensor_numel(AmpcTensorObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(ampc_numel(self));
}

static PyObject *
tensor_stride(AmpcTensorObject *self, PyObject *args)
{
    int dim = INT32_MIN;
    if (!PyArg_ParseTuple(args, "|i:stride", &dim)) {
        return NULL;
    }
    if (dim == INT32_MIN) {
        return tuple_from_i64(self->ndim, self->strides);
    }
    int d = ampc_wrap_dim("stride", dim, self->ndim);
    if (d < 0) {
        return NULL;
    }
    return PyLong_FromLongLong(self->strides[d]);
}

static PyObject *
tensor_storage_offset(AmpcTensorObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(
        (self->data - self->storage->data) /
        (int64_t)ampc_dtype_size[self->dtype]);
}

static PyObject *
tensor_is_contiguous(AmpcTensorObject *self, PyObject *unused)
{
    return PyBool_FromLong(ampc_is_contiguous(self));
}

static PyObject *
tensor_data_ptr(AmpcTensorObject *self, PyObject *unused)
{
    return PyLong_FromVoidPtr(self->data);
}

static PyObject *
tensor_element_size(AmpcTensorObject *self, PyObject *unused)
{
    return PyLong_FromSize_t(ampc_dtype_size[self->dtype]);
}

static PyObject *
tensor_item(AmpcTensorObject *self, PyObject *unused)
{
    if (ampc_numel(self) != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "a Tensor with %lld elements cannot be converted to "
                     "Scalar",
                     (long long)ampc_numel(self));
        return NULL;
    }
    /* a host read: waits for the GPU when self is on one */
    char buf[8];
    if (ampc_read_to_host("item", self, buf,
                          ampc_dtype_size[self->dtype]) < 0) {
        return NULL;
    }
    return ampc_scalar_to_python(self->dtype, buf);
}

/* _set_data(other): self now holds other's storage, shape, strides and
 * dtype (PyTorch's `t.data = other`), keeping its identity and autograd
 * fields, so a module cast with .half() keeps its Parameter objects. */
static PyObject *
tensor_set_data(AmpcTensorObject *self, PyObject *other_obj)
{
    if (!ampc_tensor_check(other_obj)) {
        PyErr_Format(PyExc_TypeError,
                     "data: expected a Tensor, got %.100s",
                     Py_TYPE(other_obj)->tp_name);
        return NULL;
    }
    AmpcTensorObject *other = AMPC_TENSOR(other_obj);
    if (self->requires_grad && !ampc_dtype_is_float(other->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "data: a tensor that requires grad cannot hold "
                     "ampc.%s data",
                     ampc_dtype_name(other->dtype));
        return NULL;
    }
    if (other == self) {
        Py_RETURN_NONE;
    }
    other->storage->refcnt++;
    ampc_storage_decref(self->storage);
    self->storage = other->storage;
    self->data = other->data;
    self->ndim = other->ndim;
    self->dtype = other->dtype;
    self->device = other->device;
    memcpy(self->shape, other->shape, sizeof(self->shape));
    memcpy(self->strides, other->strides, sizeof(self->strides));
    Py_XSETREF(self->base, Py_XNewRef(other->base));
    Py_RETURN_NONE;
}

extern PyMethodDef ampc_view_methods[];
extern PyMethodDef ampc_numpy_methods[];

static PyMethodDef tensor_methods[] = {
    {"numel", (PyCFunction)tensor_numel, METH_NOARGS,
     "numel() -> the number of elements"},
    {"stride", (PyCFunction)tensor_stride, METH_VARARGS,
     "stride(dim=None) -> strides in elements"},
    {"storage_offset", (PyCFunction)tensor_storage_offset, METH_NOARGS,
     "the first element's offset into the storage, in elements"},
    {"is_contiguous", (PyCFunction)tensor_is_contiguous, METH_NOARGS,
     "True when the elements are laid out in row-major order"},
    {"data_ptr", (PyCFunction)tensor_data_ptr, METH_NOARGS,
     "the address of the first element"},
    {"element_size", (PyCFunction)tensor_element_size, METH_NOARGS,
     "bytes per element"},
    {"item", (PyCFunction)tensor_item, METH_NOARGS,
     "the value of a one-element tensor as a Python number"},
    {"_set_data", (PyCFunction)tensor_set_data, METH_O,
     "_set_data(other): take other's storage, shape and dtype in place"},
    {NULL},
};

/* The type's method table: the small methods above plus views.c's and
 * numpy_interop.c's, joined once at module init. */
static PyMethodDef all_methods[64];

static PyMemberDef weaklist_members[] = {
    {"__weaklistoffset__", T_PYSSIZET,
     offsetof(AmpcTensorObject, weakreflist), READONLY, NULL},
    {NULL},
};

static PyType_Slot tensor_slots[] = {
    {Py_tp_members, weaklist_members},
    {Py_tp_new, tensor_new},
    {Py_tp_dealloc, tensor_dealloc},
    {Py_tp_traverse, tensor_traverse},
    {Py_tp_clear, tensor_clear},
    {Py_tp_getset, tensor_getset},
    {Py_tp_methods, all_methods},
    {Py_tp_doc, "The C base of ampc.Tensor: storage, dtype, device, shape, "
                "strides and the autograd fields."},
    {0, NULL},
};

PyType_Spec ampc_tensor_spec = {
    .name = "ampc._C.TensorBase",
    .basicsize = sizeof(AmpcTensorObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = tensor_slots,
};

int
ampc_tensor_type_prepare(void)
{
    size_t n = 0;
    const PyMethodDef *tables[] = {tensor_methods, ampc_view_methods,
                                   ampc_numpy_methods};
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        for (const PyMethodDef *m = tables[t]; m->ml_name != NULL; m++) {
            if (n + 1 >= sizeof(all_methods) / sizeof(all_methods[0])) {
                PyErr_SetString(PyExc_SystemError,
                                "ampc: TensorBase method table is full");
                return -1;
            }
            all_methods[n++] = *m;
        }
    }
    return 0;
}
