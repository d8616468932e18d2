/* weight_casts.c - the registry of kept weight casts (weight_casts.h) and
 * its Python functions, which ampc/amp/weight_casts.py builds
 * keep_weight_casts on.
 *
 * The registry maps a parameter's address to a capsule holding its
 * ampc_kept_cast.  The entry holds the parameter weakly: a callback drops
 * it when the parameter dies, so a kept cast never outlives its weight.
 */
#include "weight_casts.h"

#include "ops.h"

/* NOTE: process-wide, as autocast's weight-cast cache is. */
static PyObject *registry;      /* {address: capsule(ampc_kept_cast)} */
static uint64_t replays;        /* CUDA graph replays so far */
static PyObject *captured;      /* while a graph is captured: the copies
                                 * it uses (a list), else NULL */

#define CAPSULE_NAME "ampc.kept_cast"

static void
kept_cast_free(PyObject *capsule)
{
    ampc_kept_cast *k = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    if (k == NULL) {
        PyErr_Clear();
        return;
    }
    Py_XDECREF(k->ref);
    Py_XDECREF(k->cast);
    PyMem_Free(k);
}

static ampc_kept_cast *
entry_of(PyObject *capsule)
{
    return PyCapsule_GetPointer(capsule, CAPSULE_NAME);
}

ampc_kept_cast *
ampc_kept_cast_find(AmpcTensorObject *param)
{
    if (registry == NULL || PyDict_GET_SIZE(registry) == 0) {
        return NULL;
    }
    PyObject *key = PyLong_FromVoidPtr(param);
    if (key == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *capsule = PyDict_GetItemWithError(registry, key);
    Py_DECREF(key);
    if (capsule == NULL) {
        PyErr_Clear();
        return NULL;
    }
    ampc_kept_cast *k = entry_of(capsule);
    /* the address may have been reused before the callback ran */
    if (k == NULL || PyWeakref_GetObject(k->ref) != (PyObject *)param) {
        PyErr_Clear();
        return NULL;
    }
    return k;
}

int
ampc_kept_cast_writable(ampc_kept_cast *k,
                        AmpcTensorObject *param)
{
    return ampc_same_device(k->cast, param) &&
           ampc_numel(k->cast) == ampc_numel(param);
}

int
ampc_kept_cast_fresh(ampc_kept_cast *k, AmpcTensorObject *param)
{
    if (k->source_id != param->storage->id ||
        k->source_data != param->data ||
        k->version != param->storage->version || k->replays != replays ||
        !ampc_same_device(k->cast, param) || k->cast->ndim != param->ndim) {
        return 0;
    }
    for (int d = 0; d < param->ndim; d++) {
        if (k->cast->shape[d] != param->shape[d] ||
            k->source_strides[d] != param->strides[d]) {
            return 0;
        }
    }
    return 1;
}

static void
note_source(ampc_kept_cast *k, AmpcTensorObject *param)
{
    k->source_id = param->storage->id;
    k->source_data = param->data;
    memcpy(k->source_strides, param->strides,
           sizeof(int64_t) * (size_t)param->ndim);
    k->version = param->storage->version;
    k->replays = replays;
}

int
ampc_kept_cast_refresh(ampc_kept_cast *k, AmpcTensorObject *param)
{
    int same_shape = ampc_same_device(k->cast, param) &&
                     k->cast->ndim == param->ndim;
    for (int d = 0; same_shape && d < param->ndim; d++) {
        same_shape = k->cast->shape[d] == param->shape[d];
    }
    if (!same_shape) {
        /* the parameter moved or was given a new shape: a new copy (the
         * old one may still be saved by a graph) */
        AmpcTensorObject *c = ampc_tensor_empty(param->ndim, param->shape,
                                                k->cast->dtype,
                                                param->device);
        if (c == NULL) {
            return -1;
        }
        Py_SETREF(k->cast, c);
    }
    if (ampc_copy_into(k->cast, param) < 0) {
        return -1;
    }
    note_source(k, param);
    return 0;
}

void
ampc_kept_cast_stepped(AmpcTensorObject *param, AmpcTensorObject *cast,
                       int was_fresh)
{
    cast->storage->version++;
    /* the entry may have been released, or given a new copy, while the
     * step ran without the GIL */
    ampc_kept_cast *k = ampc_kept_cast_find(param);
    if (k != NULL && k->cast == cast && was_fresh) {
        k->version = param->storage->version;
    }
}

void
ampc_kept_cast_note_use(ampc_kept_cast *k)
{
    if (captured != NULL && PyList_Append(captured, (PyObject *)k->cast) <
                                0) {
        /* NOTE: without memory to note it, the graph may outlive the copy;
         * nothing else can be done from here */
        PyErr_Clear();
    }
}

void
ampc_kept_casts_capture_begin(void)
{
    Py_XSETREF(captured, PyList_New(0));
    PyErr_Clear();
}

PyObject *
ampc_kept_casts_capture_end(void)
{
    PyObject *list = captured;
    captured = NULL;
    return list != NULL ? list : PyList_New(0);
}

void
ampc_kept_casts_replayed(void)
{
    replays++;
}

// ----------------------------------------------------------------------------
// Python functions

/* The weakref callback: self is the registry key. */
static PyObject *
param_died(PyObject *key, PyObject *ref)
{
    PyObject *capsule = PyDict_GetItemWithError(registry, key);
    if (capsule == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    ampc_kept_cast *k = entry_of(capsule);
    if (k != NULL && k->ref == ref && PyDict_DelItem(registry, key) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef param_died_def = {"_kept_cast_param_died", param_died,
                                     METH_O, NULL};

static AmpcTensorObject *
param_arg(const char *fn, PyObject *obj)
{
    AmpcTensorObject *p = ampc_arg_tensor(fn, "param", obj);
    if (p == NULL) {
        return NULL;
    }
    if (p->dtype != AMPC_FLOAT32 || p->grad_fn != NULL || p->base != NULL) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): param must be a float32 leaf tensor that is "
                     "not a view (a weight), got a%s %s tensor",
                     fn, p->grad_fn != NULL ? " non-leaf"
                         : p->base != NULL ? " view of a" : "",
                     ampc_dtype_name(p->dtype));
        return NULL;
    }
    return p;
}

/* _keep_weight_cast(param, dtype) -> the kept cast, made now (or the one
 * kept already in that dtype). */
static PyObject *
wc_keep(PyObject *module, PyObject *args)
{
    static const char *fn = "keep_weight_casts";
    PyObject *p_obj, *dt_obj;
    ampc_dtype dt;
    if (!PyArg_ParseTuple(args, "OO:_keep_weight_cast", &p_obj, &dt_obj) ||
        ampc_dtype_from_object(dt_obj, &dt, fn, "dtype") < 0) {
        return NULL;
    }
    AmpcTensorObject *p = param_arg(fn, p_obj);
    if (p == NULL) {
        return NULL;
    }
    if (dt != AMPC_FLOAT16 && dt != AMPC_BFLOAT16) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): dtype must be ampc.float16 or ampc.bfloat16 "
                     "(autocast's dtypes), got ampc.%s",
                     fn, ampc_dtype_name(dt));
        return NULL;
    }
    ampc_kept_cast *k = ampc_kept_cast_find(p);
    if (k != NULL) {
        if (k->cast->dtype != dt) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): this parameter already keeps an ampc.%s "
                         "cast; release() that one before keeping an "
                         "ampc.%s one",
                         fn, ampc_dtype_name(k->cast->dtype),
                         ampc_dtype_name(dt));
            return NULL;
        }
        if (!ampc_kept_cast_fresh(k, p) && ampc_kept_cast_refresh(k, p) < 0) {
            return NULL;
        }
        return Py_NewRef((PyObject *)k->cast);
    }
    PyObject *key = PyLong_FromVoidPtr(p);
    PyObject *cb = key == NULL ? NULL
                               : PyCFunction_NewEx(&param_died_def, key,
                                                   NULL);
    k = cb == NULL ? NULL : PyMem_Calloc(1, sizeof(*k));
    PyObject *capsule = k == NULL ? NULL
                                  : PyCapsule_New(k, CAPSULE_NAME,
                                                  kept_cast_free);
    if (capsule == NULL) {
        if (k == NULL && cb != NULL) {
            PyErr_NoMemory();
        }
        PyMem_Free(k);
        Py_XDECREF(cb);
        Py_XDECREF(key);
        return NULL;
    }
    k->ref = PyWeakref_NewRef(p_obj, cb);
    Py_DECREF(cb);
    k->cast = k->ref == NULL ? NULL
                             : ampc_tensor_empty(p->ndim, p->shape, dt,
                                                 p->device);
    if (k->cast == NULL || ampc_kept_cast_refresh(k, p) < 0 ||
        PyDict_SetItem(registry, key, capsule) < 0) {
        Py_DECREF(capsule);
        Py_DECREF(key);
        return NULL;
    }
    Py_DECREF(capsule);
    Py_DECREF(key);
    return Py_NewRef((PyObject *)k->cast);
}

/* _kept_weight_cast(param) -> its kept cast as it is (stale or not), or
 * None */
static PyObject *
wc_kept(PyObject *module, PyObject *obj)
{
    ampc_kept_cast *k = ampc_tensor_check(obj)
                            ? ampc_kept_cast_find(AMPC_TENSOR(obj))
                            : NULL;
    return Py_NewRef(k != NULL ? (PyObject *)k->cast : Py_None);
}

/* _kept_weight_casts() -> every kept cast */
static PyObject *
wc_all(PyObject *module, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    PyObject *key, *capsule;
    Py_ssize_t pos = 0;
    while (list != NULL && PyDict_Next(registry, &pos, &key, &capsule)) {
        ampc_kept_cast *k = entry_of(capsule);
        if (k == NULL || PyList_Append(list, (PyObject *)k->cast) < 0) {
            Py_CLEAR(list);
        }
    }
    return list;
}

/* _kept_weight_cast_is_fresh(param) -> whether its kept cast holds its
 * values now (None without one) */
static PyObject *
wc_is_fresh(PyObject *module, PyObject *obj)
{
    ampc_kept_cast *k = ampc_tensor_check(obj)
                            ? ampc_kept_cast_find(AMPC_TENSOR(obj))
                            : NULL;
    if (k == NULL) {
        Py_RETURN_NONE;
    }
    return PyBool_FromLong(ampc_kept_cast_fresh(k, AMPC_TENSOR(obj)));
}

/* _release_weight_cast(param) -> whether it kept a cast */
static PyObject *
wc_release(PyObject *module, PyObject *obj)
{
    if (!ampc_tensor_check(obj) || ampc_kept_cast_find(AMPC_TENSOR(obj)) ==
                                       NULL) {
        Py_RETURN_FALSE;
    }
    PyObject *key = PyLong_FromVoidPtr(obj);
    int rc = key == NULL ? -1 : PyDict_DelItem(registry, key);
    Py_XDECREF(key);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyObject *
wc_count(PyObject *module, PyObject *unused)
{
    return PyLong_FromSsize_t(PyDict_GET_SIZE(registry));
}

int
ampc_weight_casts_init(void)
{
    Py_XSETREF(registry, PyDict_New());
    return registry == NULL ? -1 : 0;
}

PyMethodDef ampc_weight_cast_functions[] = {
    {"_keep_weight_cast", wc_keep, METH_VARARGS,
     "_keep_weight_cast(param, dtype) -> its kept float16/bfloat16 cast"},
    {"_kept_weight_cast", wc_kept, METH_O,
     "_kept_weight_cast(param) -> its kept cast as it is, or None"},
    {"_kept_weight_casts", wc_all, METH_NOARGS,
     "_kept_weight_casts() -> every kept cast"},
    {"_kept_weight_cast_is_fresh", wc_is_fresh, METH_O,
     "_kept_weight_cast_is_fresh(param) -> True/False, None without one"},
    {"_release_weight_cast", wc_release, METH_O,
     "_release_weight_cast(param) -> whether a kept cast was dropped"},
    {"_kept_weight_cast_count", wc_count, METH_NOARGS,
     "the number of parameters that keep a cast"},
    {NULL},
};
