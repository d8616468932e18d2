/* autocast_policy.c - autocast's op policy at the entry of every op: the
 * one list in autocast_ops.def, the casts it asks for (a tensor that
 * requires grad through autograd's Cast, so gradients flow back in the
 * source dtype; any other directly in C), and the
 * cache of float32 leaf weights cast to the autocast dtype, kept until the
 * outermost autocast context exits (PyTorch's cached_cast).  A weight with
 * a kept cast (weight_casts.h) is not cast at all: its kept copy is used.
 */
#include "autocast.h"
#include "ops.h"
#include "weight_casts.h"

typedef enum {
    POLICY_NONE = 0,
    POLICY_LOWER,
    POLICY_FP32,
    POLICY_PROMOTE,
    POLICY_BANNED
} autocast_policy;

static const char *const policy_names[] = {NULL, "lower", "fp32",
                                           "promote", "banned"};

/* PyTorch's message for its one banned op, binary_cross_entropy */
static const char banned_message[] =
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are "
    "unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy "
    "layer.\n"
    "In this case, combine the two layers using "
    "torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and "
    "BCEWithLogits are\n"
    "safe to autocast.";

typedef struct {
    const char *op;
    autocast_policy policy[AMPC_NUM_DEVICE_TYPES];
} policy_entry;

static const policy_entry policy_table[] = {
#define AMPC_AUTOCAST(op, cpu, cuda) {#op, {POLICY_##cpu, POLICY_##cuda}},
#include "autocast_ops.def"
#undef AMPC_AUTOCAST
};

#define NUM_POLICIES (sizeof(policy_table) / sizeof(policy_table[0]))

/* NOTE: process-wide; the cast cache is process-global in PyTorch too. */
static PyObject *cast_cache;    /* id(weight) -> (weakref, cast tensor) */
static PyObject *cast_fn;       /* ampc's autograd Cast.apply(t, dtype),
                                 * for tensors that require grad */

int
ampc_autocast_policy_init(void)
{
    cast_cache = PyDict_New();
    return cast_cache == NULL ? -1 : 0;
}

void
ampc_autocast_clear_cache(void)
{
    PyDict_Clear(cast_cache);
}

// ----------------------------------------------------------------------------
// queries

static PyObject *
ac_clear_autocast_cache(PyObject *module, PyObject *unused)
{
    PyDict_Clear(cast_cache);
    Py_RETURN_NONE;
}

static PyObject *
ac_autocast_cache_size(PyObject *module, PyObject *unused)
{
    return PyLong_FromSsize_t(PyDict_Size(cast_cache));
}

/* The cached casts.  (Each keeps its weight alive through its grad_fn,
 * so none outlives its weight.) */
static PyObject *
ac_autocast_cache_tensors(PyObject *module, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    PyObject *key, *entry;
    Py_ssize_t pos = 0;
    while (list != NULL && PyDict_Next(cast_cache, &pos, &key, &entry)) {
        if (PyList_Append(list, PyTuple_GET_ITEM(entry, 1)) < 0) {
            Py_CLEAR(list);
        }
    }
    return list;
}

static const policy_entry *
find_policy(PyObject *op)
{
    const char *name = PyUnicode_Check(op) ? PyUnicode_AsUTF8(op) : NULL;
    for (size_t i = 0; name != NULL && i < NUM_POLICIES; i++) {
        if (strcmp(name, policy_table[i].op) == 0) {
            return &policy_table[i];
        }
    }
    return NULL;
}

static PyObject *
ac_autocast_policy(PyObject *module, PyObject *args)
{
    PyObject *op, *dev_obj;
    if (!PyArg_ParseTuple(args, "OO:autocast_policy", &op, &dev_obj)) {
        return NULL;
    }
    int device = ampc_autocast_device_type(dev_obj, "autocast_policy");
    if (device < 0) {
        return NULL;
    }
    const policy_entry *e = find_policy(op);
    if (e == NULL || e->policy[device] == POLICY_NONE) {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromString(policy_names[e->policy[device]]);
}

static PyObject *
ac_autocast_ops(PyObject *module, PyObject *unused)
{
    PyObject *list = PyList_New((Py_ssize_t)NUM_POLICIES);
    for (size_t i = 0; list != NULL && i < NUM_POLICIES; i++) {
        PyObject *s = PyUnicode_FromString(policy_table[i].op);
        if (s == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    return list;
}

static PyObject *
ac_set_cast_fn(PyObject *module, PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_autocast_cast_fn(): expected a callable");
        return NULL;
    }
    Py_XSETREF(cast_fn, Py_NewRef(fn));
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------
// the policy at op entry

static int
eligible(PyObject *v, int device)
{
    if (!ampc_tensor_check(v)) {
        return 0;
    }
    AmpcTensorObject *t = AMPC_TENSOR(v);
    return t->device.type == device && ampc_dtype_is_float(t->dtype);
}

/* The cast of one argument (new reference): cached for float32 leaf
 * weights cast to the autocast dtype, as PyTorch's cached_cast. */
static PyObject *
cast_one(PyObject *v, ampc_dtype to, int device, const AutocastState *st,
         int grad_enabled)
{
    if (!eligible(v, device) || AMPC_TENSOR(v)->dtype == to) {
        return Py_NewRef(v);
    }
    AmpcTensorObject *t = AMPC_TENSOR(v);
    int cacheable = to == st->dtype[device] && t->dtype == AMPC_FLOAT32 &&
                    t->requires_grad && t->grad_fn == NULL &&
                    t->base == NULL && st->cache_enabled && grad_enabled;
    PyObject *key = NULL;
    if (cacheable) {
        key = PyLong_FromVoidPtr(v);
        if (key == NULL) {
            return NULL;
        }
        PyObject *hit = PyDict_GetItemWithError(cast_cache, key);
        if (hit != NULL) {
            PyObject *alive = PyWeakref_GetObject(PyTuple_GET_ITEM(hit, 0));
            if (alive == v) {
                Py_DECREF(key);
                return Py_NewRef(PyTuple_GET_ITEM(hit, 1));
            }
        }
        else if (PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
    }
    /* a kept cast (weight_casts.h) stands in for the cast */
    ampc_kept_cast *k = NULL;
    if (to == st->dtype[device] && t->dtype == AMPC_FLOAT32 &&
        t->grad_fn == NULL && t->base == NULL) {
        k = ampc_kept_cast_find(t);
    }
    if (k != NULL && k->cast->dtype != to) {
        k = NULL;
    }
    if (k != NULL && !ampc_kept_cast_fresh(k, t) &&
        ampc_kept_cast_refresh(k, t) < 0) {
        Py_XDECREF(key);
        return NULL;
    }
    if (k != NULL) {
        ampc_kept_cast_note_use(k);
    }
    PyObject *cast;
    if (grad_enabled && t->requires_grad) {
        /* Cast.apply(t, dtype[, kept]): without a kept cast the NULL ends
         * the argument list early */
        cast = PyObject_CallFunctionObjArgs(cast_fn, v, ampc_dtype_object(to),
                                            (PyObject *)(k != NULL ? k->cast
                                                                   : NULL),
                                            NULL);
    }
    else if (k != NULL) {
        /* a view of its own, so that the kept tensor is never handed out */
        cast = (PyObject *)ampc_tensor_view(k->cast, k->cast->ndim,
                                            k->cast->shape, k->cast->strides,
                                            k->cast->data);
    }
    else {
        /* nothing for autograd to record: the cast without Python */
        cast = (PyObject *)ampc_as_dtype(t, to);
    }
    if (cast != NULL && key != NULL) {
        PyObject *ref = PyWeakref_NewRef(v, NULL);
        PyObject *entry = ref == NULL ? NULL : PyTuple_Pack(2, ref, cast);
        Py_XDECREF(ref);
        if (entry == NULL || PyDict_SetItem(cast_cache, key, entry) < 0) {
            Py_CLEAR(cast);
        }
        Py_XDECREF(entry);
    }
    Py_XDECREF(key);
    return cast;
}

/* Applies f to v, or to each item of a list/tuple v (cat's argument). */
static PyObject *
map_args(PyObject *v, ampc_dtype to, int device, const AutocastState *st,
         int grad_enabled)
{
    if (!PyList_Check(v) && !PyTuple_Check(v)) {
        return cast_one(v, to, device, st, grad_enabled);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    PyObject *out = PyList_Check(v) ? PyList_New(n) : PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *c = cast_one(PySequence_Fast_GET_ITEM(v, i), to, device,
                               st, grad_enabled);
        if (c == NULL) {
            Py_CLEAR(out);
            break;
        }
        if (PyList_Check(out)) {
            PyList_SET_ITEM(out, i, c);
        }
        else {
            PyTuple_SET_ITEM(out, i, c);
        }
    }
    return out;
}

/* Fold for the promote policy over tensor args (one level of lists). */
static int
promote_fold(PyObject *v, int device, ampc_dtype lower, ampc_dtype *cur)
{
    if (PyList_Check(v) || PyTuple_Check(v)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {
            if (promote_fold(PySequence_Fast_GET_ITEM(v, i), device, lower,
                             cur) < 0) {
                return -1;
            }
        }
        return 0;
    }
    if (!eligible(v, device)) {
        return 0;
    }
    ampc_dtype next = AMPC_TENSOR(v)->dtype;
    if (*cur == AMPC_FLOAT32 || next == AMPC_FLOAT32) {
        *cur = AMPC_FLOAT32;
    }
    else if (next != lower) {
        PyErr_Format(PyExc_RuntimeError,
                     "Unexpected floating ScalarType in autocast promote: "
                     "ampc.%s inputs in an ampc.%s autocast region",
                     ampc_dtype_name(next), ampc_dtype_name(lower));
        return -1;
    }
    return 0;
}

/* autocast_cast_args(op, args, grad_enabled) -> args with op's policy
 * applied for the device of its first tensor argument. */
static PyObject *
ac_autocast_cast_args(PyObject *module, PyObject *fargs)
{
    PyObject *op, *args;
    int grad_enabled;
    if (!PyArg_ParseTuple(fargs, "OO!p:autocast_cast_args", &op,
                          &PyTuple_Type, &args, &grad_enabled)) {
        return NULL;
    }
    const policy_entry *e = find_policy(op);
    if (e == NULL) {
        return Py_NewRef(args);
    }
    int device = -1;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n && device < 0; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if ((PyList_Check(a) || PyTuple_Check(a)) &&
            PySequence_Fast_GET_SIZE(a) > 0) {
            a = PySequence_Fast_GET_ITEM(a, 0);
        }
        if (ampc_tensor_check(a)) {
            device = AMPC_TENSOR(a)->device.type;
        }
    }
    AutocastState *st = device < 0 ? NULL : ampc_autocast_state();
    if (st == NULL) {
        return device < 0 ? Py_NewRef(args) : NULL;
    }
    autocast_policy policy = e->policy[device];
    if (!st->enabled[device] || policy == POLICY_NONE) {
        Py_DECREF(st);
        return Py_NewRef(args);
    }
    if (policy == POLICY_BANNED) {
        Py_DECREF(st);
        PyErr_SetString(PyExc_RuntimeError, banned_message);
        return NULL;
    }
    if (cast_fn == NULL) {
        Py_DECREF(st);
        PyErr_SetString(PyExc_RuntimeError,
                        "autocast: ampc's cast function is not registered");
        return NULL;
    }
    ampc_dtype to = policy == POLICY_FP32 ? AMPC_FLOAT32 : st->dtype[device];
    if (policy == POLICY_PROMOTE) {
        for (Py_ssize_t i = 0; i < n; i++) {
            if (promote_fold(PyTuple_GET_ITEM(args, i), device,
                             st->dtype[device], &to) < 0) {
                Py_DECREF(st);
                return NULL;
            }
        }
    }
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *c = map_args(PyTuple_GET_ITEM(args, i), to, device, st,
                               grad_enabled);
        if (c == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, c);
    }
    Py_DECREF(st);
    return out;
}

PyMethodDef ampc_autocast_policy_functions[] = {
    {"clear_autocast_cache", ac_clear_autocast_cache, METH_NOARGS,
     "drops the cached weight casts"},
    {"_autocast_cache_tensors", ac_autocast_cache_tensors, METH_NOARGS,
     "the weight casts cached now"},
    {"_autocast_cache_size", ac_autocast_cache_size, METH_NOARGS,
     "the number of cached weight casts"},
    {"autocast_policy", ac_autocast_policy, METH_VARARGS,
     "autocast_policy(op, device_type) -> 'lower'|'fp32'|'promote'|None"},
    {"autocast_ops", ac_autocast_ops, METH_NOARGS,
     "the ops autocast_ops.def lists"},
    {"autocast_cast_args", ac_autocast_cast_args, METH_VARARGS,
     "autocast_cast_args(op, args, grad_enabled) -> args cast per policy"},
    {"_set_autocast_cast_fn", ac_set_cast_fn, METH_O,
     "registers ampc's autograd-aware cast(t, dtype)"},
    {NULL},
};
