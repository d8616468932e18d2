/* views.c - TensorBase's view methods: tensors that share storage with a
 * new shape, strides or offset (view, reshape, transpose, permute, expand,
 * unsqueeze, squeeze, flatten, basic indexing, detach).  The leading
 * underscore marks them raw: ampc.Tensor wraps each with autograd.
 */
#include "ampc.h"

int
ampc_wrap_dim(const char *fn, long dim, int ndim)
{
    int n = ndim > 0 ? ndim : 1;    /* a 0-d tensor accepts dims -1 and 0 */
    if (dim < -n || dim >= n) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): Dimension out of range (expected to be in range "
                     "of [%d, %d], but got %ld)",
                     fn, -n, n - 1, dim);
        return -1;
    }
    return (int)(dim < 0 ? dim + n : dim);
}

#define SHAPE_ANY_INTS (-2)     /* parse_shape: plain ints, negatives too */
#define SHAPE_NONNEG (-1)       /* parse_shape: non-negative ints */

/* Parses a tuple or list of ints into shape.  numel >= 0: a shape for that
 * many elements, one -1 inferred; else SHAPE_NONNEG or SHAPE_ANY_INTS.
 * Returns the number of ints or -1. */
static int
parse_shape(const char *fn, PyObject *obj, int64_t numel, int64_t *shape)
{
    PyObject *seq = PySequence_Fast(obj, "shape must be a sequence");
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): shape must be a tuple of ints, not %.100s", fn,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > AMPC_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): at most %d dimensions are supported, got %zd", fn,
                     AMPC_MAX_DIMS, n);
        Py_DECREF(seq);
        return -1;
    }
    int infer = -1;
    int64_t known = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(item) && !PyIndex_Check(item)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): shape must be a tuple of ints, but element "
                         "%zd is %.100s",
                         fn, i, Py_TYPE(item)->tp_name);
            Py_DECREF(seq);
            return -1;
        }
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (v == -1 && numel >= 0) {
            if (infer >= 0) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s(): only one dimension can be inferred", fn);
                Py_DECREF(seq);
                return -1;
            }
            infer = (int)i;
        }
        else if (v < 0 && numel != SHAPE_ANY_INTS) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): invalid shape dimension %lld", fn, v);
            Py_DECREF(seq);
            return -1;
        }
        else {
            known *= v;
        }
        shape[i] = v;
    }
    Py_DECREF(seq);
    if (numel >= 0) {
        if (infer >= 0) {
            if (known == 0 || numel % known != 0) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s(): shape '%S' is invalid for input of size "
                             "%lld",
                             fn, obj, (long long)numel);
                return -1;
            }
            shape[infer] = numel / known;
        }
        else if (known != numel) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): shape '%S' is invalid for input of size %lld",
                         fn, obj, (long long)numel);
            return -1;
        }
    }
    return (int)n;
}

/* Strides for viewing (shape, strides) as new_shape without copying, or 0
 * when the memory layout does not allow it (PyTorch's rule: each run of
 * dims that is contiguous in memory may be re-split freely). */
static int
compute_view_strides(int nd, const int64_t *shape, const int64_t *strides,
                     int new_nd, const int64_t *new_shape,
                     int64_t *new_strides)
{
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) {
        numel *= shape[d];
    }
    if (numel == 0 || nd == 0) {
        int64_t s = 1;
        for (int d = new_nd - 1; d >= 0; d--) {
            new_strides[d] = s;
            s *= new_shape[d] > 0 ? new_shape[d] : 1;
        }
        return 1;
    }
    int view_d = new_nd - 1;
    int64_t chunk_base = strides[nd - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = nd - 1; d >= 0; d--) {
        tensor_numel *= shape[d];
        if (d == 0 ||
            (shape[d - 1] != 1 &&
             strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 &&
                   (view_numel < tensor_numel || new_shape[view_d] == 1)) {
                new_strides[view_d] = view_numel * chunk_base;
                view_numel *= new_shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) {
                return 0;
            }
            if (d > 0) {
                chunk_base = strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static PyObject *
view_impl(AmpcTensorObject *self, PyObject *shape_obj, const char *fn,
          int copy_if_needed)
{
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    int nd = parse_shape(fn, shape_obj, ampc_numel(self), shape);
    if (nd < 0) {
        return NULL;
    }
    if (compute_view_strides(self->ndim, self->shape, self->strides, nd,
                             shape, strides)) {
        return (PyObject *)ampc_tensor_view(self, nd, shape, strides,
                                            self->data);
    }
    if (!copy_if_needed) {
        PyErr_SetString(PyExc_RuntimeError,
                        "view size is not compatible with input tensor's "
                        "size and stride (at least one dimension spans "
                        "across two contiguous subspaces). Use "
                        ".reshape(...) instead.");
        return NULL;
    }
    AmpcTensorObject *c = ampc_contiguous(self);
    if (c == NULL) {
        return NULL;
    }
    compute_view_strides(c->ndim, c->shape, c->strides, nd, shape, strides);
    AmpcTensorObject *out = ampc_tensor_view(c, nd, shape, strides,
                                             c->data);
    Py_DECREF(c);
    if (out != NULL) {
        Py_CLEAR(out->base);    /* a copy, not a view of self */
    }
    return (PyObject *)out;
}

static PyObject *
tensor_view(AmpcTensorObject *self, PyObject *shape)
{
    return view_impl(self, shape, "view", 0);
}

static PyObject *
tensor_reshape(AmpcTensorObject *self, PyObject *shape)
{
    return view_impl(self, shape, "reshape", 1);
}

static PyObject *
tensor_flatten(AmpcTensorObject *self, PyObject *args)
{
    long start = 0, end = -1;
    if (!PyArg_ParseTuple(args, "|ll:flatten", &start, &end)) {
        return NULL;
    }
    int s = ampc_wrap_dim("flatten", start, self->ndim);
    int e = s < 0 ? -1 : ampc_wrap_dim("flatten", end, self->ndim);
    if (s < 0 || e < 0) {
        return NULL;
    }
    if (s > e) {
        PyErr_SetString(PyExc_RuntimeError,
                        "flatten() has invalid args: start_dim cannot come "
                        "after end_dim");
        return NULL;
    }
    if (self->ndim == 0) {
        int64_t one = 1;
        return (PyObject *)ampc_tensor_view(self, 1, &one, &one, self->data);
    }
    PyObject *shape = PyTuple_New(self->ndim - (e - s));
    if (shape == NULL) {
        return NULL;
    }
    int j = 0;
    int64_t merged = 1;
    for (int d = 0; d < self->ndim; d++) {
        if (d >= s && d <= e) {
            merged *= self->shape[d];
            if (d < e) {
                continue;
            }
            PyTuple_SET_ITEM(shape, j++, PyLong_FromLongLong(merged));
        }
        else {
            PyTuple_SET_ITEM(shape, j++, PyLong_FromLongLong(self->shape[d]));
        }
    }
    PyObject *out = view_impl(self, shape, "flatten", 1);
    Py_DECREF(shape);
    return out;
}

static PyObject *
tensor_transpose(AmpcTensorObject *self, PyObject *args)
{
    long d0, d1;
    if (!PyArg_ParseTuple(args, "ll:transpose", &d0, &d1)) {
        return NULL;
    }
    int a = ampc_wrap_dim("transpose", d0, self->ndim);
    int b = a < 0 ? -1 : ampc_wrap_dim("transpose", d1, self->ndim);
    if (a < 0 || b < 0) {
        return NULL;
    }
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    memcpy(shape, self->shape, sizeof(shape));
    memcpy(strides, self->strides, sizeof(strides));
    if (self->ndim > 0) {
        shape[a] = self->shape[b];
        shape[b] = self->shape[a];
        strides[a] = self->strides[b];
        strides[b] = self->strides[a];
    }
    return (PyObject *)ampc_tensor_view(self, self->ndim, shape, strides,
                                        self->data);
}

static PyObject *
tensor_permute(AmpcTensorObject *self, PyObject *dims)
{
    int64_t perm[AMPC_MAX_DIMS];
    int n = parse_shape("permute", dims, SHAPE_ANY_INTS, perm);
    if (n < 0) {
        return NULL;
    }
    if (n != self->ndim) {
        PyErr_Format(PyExc_RuntimeError,
                     "permute(sparse_coo): number of dimensions in the "
                     "tensor input does not match the length of the desired "
                     "ordering of dimensions i.e. input.dim() = %d is not "
                     "equal to len(dims) = %d",
                     self->ndim, n);
        return NULL;
    }
    int seen[AMPC_MAX_DIMS] = {0};
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int d = ampc_wrap_dim("permute", (long)perm[i], self->ndim);
        if (d < 0) {
            return NULL;
        }
        if (seen[d]++) {
            PyErr_SetString(PyExc_RuntimeError,
                            "permute(): duplicate dims are not allowed.");
            return NULL;
        }
        shape[i] = self->shape[d];
        strides[i] = self->strides[d];
    }
    return (PyObject *)ampc_tensor_view(self, n, shape, strides, self->data);
}

static PyObject *
tensor_expand(AmpcTensorObject *self, PyObject *shape_obj)
{
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    int n = parse_shape("expand", shape_obj, SHAPE_ANY_INTS, shape);
    if (n < 0) {
        return NULL;
    }
    if (n < self->ndim) {
        PyErr_Format(PyExc_RuntimeError,
                     "expand(): the number of sizes provided (%d) must be "
                     "greater or equal to the number of dimensions in the "
                     "tensor (%d)",
                     n, self->ndim);
        return NULL;
    }
    int lead = n - self->ndim;
    for (int i = n - 1; i >= 0; i--) {
        int d = i - lead;
        if (d < 0) {
            if (shape[i] < 0) {
                PyErr_SetString(PyExc_RuntimeError,
                                "expand(): -1 is not allowed in a leading, "
                                "non-existing dimension");
                return NULL;
            }
            strides[i] = 0;
            continue;
        }
        if (shape[i] == -1) {
            shape[i] = self->shape[d];
        }
        if (shape[i] == self->shape[d]) {
            strides[i] = self->strides[d];
        }
        else if (self->shape[d] == 1 && shape[i] >= 0) {
            strides[i] = 0;
        }
        else {
            char a[256], b[256];
            ampc_format_shape(a, sizeof(a), n, shape);
            ampc_format_shape(b, sizeof(b), self->ndim, self->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "The expanded size of the tensor (%lld) must match "
                         "the existing size (%lld) at non-singleton "
                         "dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                         (long long)shape[i], (long long)self->shape[d], i, a,
                         b);
            return NULL;
        }
    }
    return (PyObject *)ampc_tensor_view(self, n, shape, strides, self->data);
}

static PyObject *
tensor_unsqueeze(AmpcTensorObject *self, PyObject *arg)
{
    long dim = PyLong_AsLong(arg);
    if (dim == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (self->ndim >= AMPC_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "unsqueeze(): too many dims");
        return NULL;
    }
    int d = ampc_wrap_dim("unsqueeze", dim, self->ndim + 1);
    if (d < 0) {
        return NULL;
    }
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    for (int i = 0, j = 0; i <= self->ndim; i++) {
        if (i == d) {
            shape[i] = 1;
            strides[i] = j < self->ndim ? self->shape[j] * self->strides[j]
                                        : 1;
            continue;
        }
        shape[i] = self->shape[j];
        strides[i] = self->strides[j];
        j++;
    }
    return (PyObject *)ampc_tensor_view(self, self->ndim + 1, shape, strides,
                                        self->data);
}

static PyObject *
tensor_squeeze(AmpcTensorObject *self, PyObject *args)
{
    PyObject *dim_obj = Py_None;
    if (!PyArg_ParseTuple(args, "|O:squeeze", &dim_obj)) {
        return NULL;
    }
    int only = -1;
    if (dim_obj != Py_None) {
        long dim = PyLong_AsLong(dim_obj);
        if (dim == -1 && PyErr_Occurred()) {
            return NULL;
        }
        only = ampc_wrap_dim("squeeze", dim, self->ndim);
        if (only < 0) {
            return NULL;
        }
    }
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < self->ndim; d++) {
        int drop = self->shape[d] == 1 && (only < 0 || only == d);
        if (!drop) {
            shape[n] = self->shape[d];
            strides[n] = self->strides[d];
            n++;
        }
    }
    return (PyObject *)ampc_tensor_view(self, n, shape, strides, self->data);
}

/* Basic indexing: ints, slices (step > 0), None and Ellipsis. */
static PyObject *
tensor_getitem(AmpcTensorObject *self, PyObject *index)
{
    PyObject *items;
    if (PyTuple_Check(index)) {
        items = Py_NewRef(index);
    }
    else {
        items = PyTuple_Pack(1, index);
        if (items == NULL) {
            return NULL;
        }
    }
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    int consumed = 0, ellipsis = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GET_ITEM(items, i);
        if (it == Py_Ellipsis) {
            if (ellipsis >= 0) {
                Py_DECREF(items);
                PyErr_SetString(PyExc_IndexError,
                                "an index can only have a single ellipsis "
                                "('...')");
                return NULL;
            }
            ellipsis = (int)i;
        }
        else if (it != Py_None) {
            consumed++;
        }
    }
    if (consumed > self->ndim) {
        Py_DECREF(items);
        PyErr_Format(PyExc_IndexError,
                     "too many indices for tensor of dimension %d",
                     self->ndim);
        return NULL;
    }
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    int out_nd = 0, d = 0;
    char *data = self->data;
    size_t isz = ampc_dtype_size[self->dtype];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GET_ITEM(items, i);
        if (out_nd >= AMPC_MAX_DIMS) {
            PyErr_SetString(PyExc_IndexError, "too many dimensions");
            goto error;
        }
        if (it == Py_Ellipsis) {
            int skip = self->ndim - consumed;
            for (int k = 0; k < skip; k++, d++) {
                shape[out_nd] = self->shape[d];
                strides[out_nd++] = self->strides[d];
            }
        }
        else if (it == Py_None) {
            shape[out_nd] = 1;
            strides[out_nd++] = 0;
        }
        else if (PySlice_Check(it)) {
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(it, &start, &stop, &step) < 0) {
                goto error;
            }
            if (step <= 0) {
                PyErr_SetString(PyExc_ValueError,
                                "step must be greater than zero");
                goto error;
            }
            Py_ssize_t len = PySlice_AdjustIndices(
                (Py_ssize_t)self->shape[d], &start, &stop, step);
            data += (int64_t)start * self->strides[d] * (int64_t)isz;
            shape[out_nd] = len;
            strides[out_nd++] = self->strides[d] * step;
            d++;
        }
        else if (PyIndex_Check(it) && !PyBool_Check(it)) {
            Py_ssize_t k = PyNumber_AsSsize_t(it, PyExc_IndexError);
            if (k == -1 && PyErr_Occurred()) {
                goto error;
            }
            if (k < -self->shape[d] || k >= self->shape[d]) {
                PyErr_Format(PyExc_IndexError,
                             "index %zd is out of bounds for dimension %d "
                             "with size %lld",
                             k, d, (long long)self->shape[d]);
                goto error;
            }
            if (k < 0) {
                k += self->shape[d];
            }
            data += (int64_t)k * self->strides[d] * (int64_t)isz;
            d++;
        }
        else {
            PyErr_Format(PyExc_TypeError,
                         "ampc tensors support indexing with ints, slices, "
                         "None, Ellipsis, and int64 or bool tensors, lists "
                         "and arrays, not %.100s",
                         Py_TYPE(it)->tp_name);
            goto error;
        }
    }
    for (; d < self->ndim; d++) {
        if (out_nd >= AMPC_MAX_DIMS) {
            PyErr_SetString(PyExc_IndexError, "too many dimensions");
            goto error;
        }
        shape[out_nd] = self->shape[d];
        strides[out_nd++] = self->strides[d];
    }
    Py_DECREF(items);
    return (PyObject *)ampc_tensor_view(self, out_nd, shape, strides, data);

error:
    Py_DECREF(items);
    return NULL;
}

/* Shares storage but not history: no _base, so autograd never routes a
 * write through the detached tensor back into self's graph. */
static PyObject *
tensor_detach(AmpcTensorObject *self, PyObject *unused)
{
    AmpcTensorObject *t = ampc_tensor_view(self, self->ndim, self->shape,
                                           self->strides, self->data);
    if (t != NULL) {
        Py_CLEAR(t->base);
    }
    return (PyObject *)t;
}

static PyObject *
tensor_contiguous(AmpcTensorObject *self, PyObject *unused)
{
    return (PyObject *)ampc_contiguous(self);
}

/* as_strided(shape, strides, offset): checked against the storage bounds,
 * so no view can reach outside its memory. */
static PyObject *
tensor_as_strided(AmpcTensorObject *self, PyObject *args)
{
    PyObject *shape_obj, *strides_obj;
    long long offset = 0;
    if (!PyArg_ParseTuple(args, "OO|L:as_strided", &shape_obj, &strides_obj,
                          &offset)) {
        return NULL;
    }
    int64_t shape[AMPC_MAX_DIMS], strides[AMPC_MAX_DIMS];
    int n = parse_shape("as_strided", shape_obj, SHAPE_NONNEG, shape);
    int m = n < 0 ? -1 : parse_shape("as_strided", strides_obj, SHAPE_ANY_INTS, strides);
    if (n < 0 || m < 0) {
        return NULL;
    }
    if (n != m) {
        PyErr_Format(PyExc_RuntimeError,
                     "as_strided(): mismatch in length of strides and shape "
                     "(%d vs %d)",
                     m, n);
        return NULL;
    }
    /* the lowest and highest elements reached: a negative stride reaches
     * below the offset, which must stay inside the storage too (a kernel
     * would read or write out of bounds) */
    int64_t first = offset, last = offset, numel = 1;
    for (int d = 0; d < n; d++) {
        numel *= shape[d];
        if (strides[d] < 0) {
            first += (shape[d] - 1) * strides[d];
        }
        else {
            last += (shape[d] - 1) * strides[d];
        }
    }
    int64_t cap = (int64_t)(self->storage->nbytes /
                            ampc_dtype_size[self->dtype]);
    if (numel > 0 && (first < 0 || last >= cap)) {
        PyErr_Format(PyExc_RuntimeError,
                     "as_strided(): setStorage: sizes and strides need "
                     "elements %lld to %lld but the storage holds %lld",
                     (long long)first, (long long)last, (long long)cap);
        return NULL;
    }
    return (PyObject *)ampc_tensor_view(
        self, n, shape, strides,
        self->storage->data + offset * (int64_t)ampc_dtype_size[self->dtype]);
}

PyMethodDef ampc_view_methods[] = {
    {"_view", (PyCFunction)tensor_view, METH_O, NULL},
    {"_reshape", (PyCFunction)tensor_reshape, METH_O, NULL},
    {"_flatten", (PyCFunction)tensor_flatten, METH_VARARGS, NULL},
    {"_transpose", (PyCFunction)tensor_transpose, METH_VARARGS, NULL},
    {"_permute", (PyCFunction)tensor_permute, METH_O, NULL},
    {"_expand", (PyCFunction)tensor_expand, METH_O, NULL},
    {"_unsqueeze", (PyCFunction)tensor_unsqueeze, METH_O, NULL},
    {"_squeeze", (PyCFunction)tensor_squeeze, METH_VARARGS, NULL},
    {"_getitem", (PyCFunction)tensor_getitem, METH_O, NULL},
    {"_detach", (PyCFunction)tensor_detach, METH_NOARGS, NULL},
    {"_contiguous", (PyCFunction)tensor_contiguous, METH_NOARGS, NULL},
    {"_as_strided", (PyCFunction)tensor_as_strided, METH_VARARGS, NULL},
    {NULL},
};
