/* autocast.c - ampc.autocast, the context manager of torch.autocast, in C:
 *
 *     with ampc.autocast(device_type="cpu", dtype=ampc.bfloat16):
 *         out = model(x)          # conv2d/linear in bfloat16, losses float32
 *
 * The state (per device type: enabled and dtype; cache_enabled; nesting) is
 * an immutable snapshot held in a context variable, as _decimal keeps its
 * context: __enter__ sets a new snapshot and keeps the one before, __exit__
 * sets a copy of the current one with its device's values (and the cache
 * flag) put back and the nesting count one lower, as PyTorch's __exit__
 * does.  Exceptions and threads (a new thread starts from the default)
 * then work without further code.  The op policy that reads
 * this state at every op's entry is in autocast_policy.c.
 */
#include "autocast.h"
#include "structmember.h"

// ----------------------------------------------------------------------------
// the state snapshot

typedef struct {
    PyObject_HEAD
    int device;                 /* ampc_device_type */
    ampc_dtype fast_dtype;
    char enabled;
    char cache_enabled;
    PyObject *tokens;           /* list: the states before each __enter__,
                                 * a stack, so re-entrant use works */
} AmpcAutocastObject;

typedef struct {
    PyObject_HEAD
    PyObject *ctx;              /* the autocast instance */
    PyObject *func;
    PyObject *dict;             /* functools.update_wrapper's attributes */
} AutocastWrapper;

/* NOTE: process-wide, like the kernel table (see module.c); the cast cache
 * is process-global in PyTorch too. */
static PyTypeObject *state_type, *autocast_type, *wrapper_type;
static PyObject *state_var;     /* the context variable */

AutocastState *
ampc_autocast_state(void)
{
    PyObject *value;
    if (PyContextVar_Get(state_var, NULL, &value) < 0) {
        return NULL;
    }
    return (AutocastState *)value;
}

AutocastState *
ampc_autocast_copy_state(const AutocastState *src)
{
    AutocastState *st = PyObject_New(AutocastState, state_type);
    if (st == NULL) {
        return NULL;
    }
    memcpy(st->enabled, src->enabled, sizeof(st->enabled));
    memcpy(st->dtype, src->dtype, sizeof(st->dtype));
    st->cache_enabled = src->cache_enabled;
    st->nesting = src->nesting;
    return st;
}

static void
state_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot state_slots[] = {
    {Py_tp_dealloc, state_dealloc},
    {0, NULL},
};

static PyType_Spec state_spec = {
    .name = "ampc._C._AutocastState",
    .basicsize = sizeof(AutocastState),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION |
             Py_TPFLAGS_IMMUTABLETYPE,
    .slots = state_slots,
};

/* Make st the current state, for good (the setters of autocast_state.c;
 * an enclosing autocast context still restores its own at exit). */
int
ampc_autocast_set_state(AutocastState *st)
{
    PyObject *token = PyContextVar_Set(state_var, (PyObject *)st);
    Py_XDECREF(token);
    return token == NULL ? -1 : 0;
}

// ----------------------------------------------------------------------------
// device types

/* Parses a device_type string; -1 with PyTorch's errors otherwise. */
int
ampc_autocast_device_type(PyObject *obj, const char *fn)
{
    if (!PyUnicode_Check(obj)) {
        PyObject *tn = PyObject_Str((PyObject *)Py_TYPE(obj));
        PyErr_Format(PyExc_ValueError,
                     "Expected `device_type` of type `str`, got: `%S`",
                     tn ? tn : Py_None);
        Py_XDECREF(tn);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8(obj);
    if (s == NULL) {
        return -1;
    }
    if (strcmp(s, "cpu") == 0) {
        return AMPC_DEV_CPU;
    }
    if (strcmp(s, "cuda") == 0) {
        return AMPC_DEV_CUDA;
    }
    static const char *const others[] = {"xpu", "mps", "hpu", "xla",
                                         "meta", "mtia", "maia", "ipu"};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        if (strcmp(s, others[i]) == 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "User specified an unsupported autocast "
                         "device_type '%s' (ampc supports 'cpu' and 'cuda')",
                         s);
            return -1;
        }
    }
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): Invalid device string: '%s' (expected 'cpu' or "
                 "'cuda')",
                 fn, s);
    return -1;
}

static const char *const device_names[AMPC_NUM_DEVICE_TYPES] = {"cpu",
                                                                "cuda"};

// ----------------------------------------------------------------------------
// the autocast type

static PyObject *
autocast_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"device_type", "dtype", "enabled",
                             "cache_enabled", NULL};
    PyObject *device_obj = NULL, *dtype_obj = Py_None;
    PyObject *enabled_obj = Py_True, *cache_obj = Py_None;
    if (kwds != NULL && PyDict_GetItemString(kwds, "device") != NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "autocast() got an unexpected keyword argument "
                        "'device': autocast takes a device type, not a "
                        "device. Write autocast(device_type='cuda') or "
                        "autocast('cpu')");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOO:autocast", kwlist,
                                     &device_obj, &dtype_obj, &enabled_obj,
                                     &cache_obj)) {
        return NULL;
    }
    int device = ampc_autocast_device_type(device_obj, "autocast");
    if (device < 0) {
        return NULL;
    }
    int enabled = PyObject_IsTrue(enabled_obj);
    if (enabled < 0) {
        return NULL;
    }
    AutocastState *st = ampc_autocast_state();
    if (st == NULL) {
        return NULL;
    }
    ampc_dtype dt = st->dtype[device];
    int cache_enabled = st->cache_enabled;
    Py_DECREF(st);
    if (dtype_obj != Py_None) {
        if (ampc_dtype_from_object(dtype_obj, &dt, "autocast", "dtype") < 0) {
            return NULL;
        }
        if (!ampc_dtype_is_float(dt)) {
            PyErr_Format(PyExc_TypeError,
                         "autocast(): dtype must be a floating point dtype "
                         "to run ops in, ampc.float16 or ampc.bfloat16 (got "
                         "ampc.%s). Write autocast(device_type='%s', "
                         "dtype=ampc.float16)",
                         ampc_dtype_name(dt), device_names[device]);
            return NULL;
        }
    }
    if (cache_obj != Py_None) {
        cache_enabled = PyObject_IsTrue(cache_obj);
        if (cache_enabled < 0) {
            return NULL;
        }
    }
    if (enabled && device == AMPC_DEV_CUDA && ampc_cuda_count() <= 0) {
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "User provided device_type of 'cuda', but CUDA is "
                         "not available. Disabling autocast.",
                         1) < 0) {
            return NULL;
        }
        enabled = 0;
    }
    if (enabled && device == AMPC_DEV_CPU && dt == AMPC_FLOAT32) {
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "In CPU autocast, but the target dtype is not "
                         "supported. Disabling autocast.\nCPU Autocast only "
                         "supports dtypes of ampc.bfloat16, ampc.float16 "
                         "currently.",
                         1) < 0) {
            return NULL;
        }
        enabled = 0;
    }
    AmpcAutocastObject *self = (AmpcAutocastObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->device = device;
    self->fast_dtype = dt;
    self->enabled = (char)enabled;
    self->cache_enabled = (char)cache_enabled;
    self->tokens = PyList_New(0);
    if (self->tokens == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
autocast_traverse(AmpcAutocastObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->tokens);
    return 0;
}

static int
autocast_clear(AmpcAutocastObject *self)
{
    Py_CLEAR(self->tokens);
    return 0;
}

static void
autocast_dealloc(AmpcAutocastObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    autocast_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int
autocast_do_enter(AmpcAutocastObject *self)
{
    AutocastState *st = ampc_autocast_state();
    if (st == NULL) {
        return -1;
    }
    AutocastState *next = ampc_autocast_copy_state(st);
    if (next == NULL) {
        Py_DECREF(st);
        return -1;
    }
    next->enabled[self->device] = self->enabled;
    next->dtype[self->device] = self->fast_dtype;
    next->cache_enabled = self->cache_enabled;
    next->nesting++;
    /* the state before, whose values for this device __exit__ puts back */
    int rc = PyList_Append(self->tokens, (PyObject *)st);
    Py_DECREF(st);
    if (rc == 0 && ampc_autocast_set_state(next) < 0) {
        Py_ssize_t n = PyList_GET_SIZE(self->tokens);
        (void)PyList_SetSlice(self->tokens, n - 1, n, NULL);
        rc = -1;
    }
    Py_DECREF(next);
    return rc;
}

static int
autocast_do_exit(AmpcAutocastObject *self)
{
    Py_ssize_t n = PyList_GET_SIZE(self->tokens);
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "autocast.__exit__() called without a matching "
                        "__enter__()");
        return -1;
    }
    AutocastState *prev = (AutocastState *)Py_NewRef(
        PyList_GET_ITEM(self->tokens, n - 1));
    if (PyList_SetSlice(self->tokens, n - 1, n, NULL) < 0) {
        Py_DECREF(prev);
        return -1;
    }
    /* PyTorch's __exit__: the nesting count goes down by one, and this
     * device's enabled flag and dtype and the cache flag go back to their
     * values at __enter__; what the state functions set inside for the
     * other device, or the nesting count they moved, stays */
    AutocastState *st = ampc_autocast_state();
    AutocastState *next = st == NULL ? NULL : ampc_autocast_copy_state(st);
    Py_XDECREF(st);
    if (next == NULL) {
        Py_DECREF(prev);
        return -1;
    }
    next->enabled[self->device] = prev->enabled[self->device];
    next->dtype[self->device] = prev->dtype[self->device];
    next->cache_enabled = prev->cache_enabled;
    Py_DECREF(prev);
    if (next->nesting > 0) {
        next->nesting--;
    }
    int outermost = next->nesting == 0;
    int rc = ampc_autocast_set_state(next);
    Py_DECREF(next);
    if (rc < 0) {
        return -1;
    }
    /* leaving the outermost context drops the weight-cast cache */
    if (outermost) {
        ampc_autocast_clear_cache();
    }
    return 0;
}

static PyObject *
autocast_enter(AmpcAutocastObject *self, PyObject *unused)
{
    if (autocast_do_enter(self) < 0) {
        return NULL;
    }
    return Py_NewRef(self);
}

static PyObject *
autocast_exit(AmpcAutocastObject *self, PyObject *args)
{
    if (autocast_do_exit(self) < 0) {
        return NULL;
    }
    Py_RETURN_FALSE;            /* exceptions propagate */
}

/* Used as a decorator: a wrapper that runs func inside this context. */
static PyObject *
autocast_call(AmpcAutocastObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *func;
    if (!PyArg_ParseTuple(args, "O:autocast", &func)) {
        return NULL;
    }
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError,
                     "autocast(): can only decorate a callable, got %.100s",
                     Py_TYPE(func)->tp_name);
        return NULL;
    }
    AutocastWrapper *w = (AutocastWrapper *)wrapper_type->tp_alloc(
        wrapper_type, 0);
    if (w == NULL) {
        return NULL;
    }
    w->ctx = Py_NewRef(self);
    w->func = Py_NewRef(func);
    PyObject *functools = PyImport_ImportModule("functools");
    PyObject *res = functools == NULL
                        ? NULL
                        : PyObject_CallMethod(functools, "update_wrapper",
                                              "OO", (PyObject *)w, func);
    Py_XDECREF(functools);
    if (res == NULL) {
        Py_DECREF(w);
        return NULL;
    }
    Py_DECREF(res);
    return (PyObject *)w;
}

static PyObject *
autocast_repr(AmpcAutocastObject *self)
{
    return PyUnicode_FromFormat(
        "ampc.autocast(device_type='%s', dtype=ampc.%s, enabled=%s, "
        "cache_enabled=%s)",
        device_names[self->device], ampc_dtype_name(self->fast_dtype),
        self->enabled ? "True" : "False",
        self->cache_enabled ? "True" : "False");
}

static PyObject *
autocast_get_device(AmpcAutocastObject *self, void *closure)
{
    return PyUnicode_FromString(device_names[self->device]);
}

static PyObject *
autocast_get_fast_dtype(AmpcAutocastObject *self, void *closure)
{
    return Py_NewRef(ampc_dtype_object(self->fast_dtype));
}

static PyObject *
autocast_get_enabled(AmpcAutocastObject *self, void *closure)
{
    return PyBool_FromLong(self->enabled);
}

static PyObject *
autocast_get_cache_enabled(AmpcAutocastObject *self, void *closure)
{
    return PyBool_FromLong(self->cache_enabled);
}

static PyGetSetDef autocast_getset[] = {
    {"device", (getter)autocast_get_device, NULL, "the device type", NULL},
    {"fast_dtype", (getter)autocast_get_fast_dtype, NULL,
     "the lower-precision dtype", NULL},
    {"_enabled", (getter)autocast_get_enabled, NULL, NULL, NULL},
    {"_cache_enabled", (getter)autocast_get_cache_enabled, NULL, NULL, NULL},
    {NULL},
};

static PyMethodDef autocast_methods[] = {
    {"__enter__", (PyCFunction)autocast_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)autocast_exit, METH_VARARGS, NULL},
    {NULL},
};

static PyType_Slot autocast_slots[] = {
    {Py_tp_new, autocast_new},
    {Py_tp_dealloc, autocast_dealloc},
    {Py_tp_traverse, autocast_traverse},
    {Py_tp_clear, autocast_clear},
    {Py_tp_call, autocast_call},
    {Py_tp_repr, autocast_repr},
    {Py_tp_getset, autocast_getset},
    {Py_tp_methods, autocast_methods},
    {Py_tp_doc,
     "autocast(device_type, dtype=None, enabled=True, cache_enabled=None)\n"
     "\n"
     "Context manager and decorator that runs the ops of a region in mixed "
     "precision, like torch.autocast: conv2d, linear and matmul in dtype "
     "(default float16 on cuda, bfloat16 on cpu), losses in float32.\n"
     "\n"
     ">>> import ampc\n"
     ">>> with ampc.autocast('cpu'):\n"
     "...     y = ampc.ones(2, 3) @ ampc.ones(3, 2)\n"
     ">>> y.dtype\n"
     "ampc.bfloat16\n"},
    {0, NULL},
};

static PyType_Spec autocast_spec = {
    .name = "ampc.autocast",
    .basicsize = sizeof(AmpcAutocastObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = autocast_slots,
};

// ----------------------------------------------------------------------------
// the decorator's wrapper

static PyObject *
wrapper_call(AutocastWrapper *self, PyObject *args, PyObject *kwds)
{
    AmpcAutocastObject *ctx = (AmpcAutocastObject *)self->ctx;
    if (autocast_do_enter(ctx) < 0) {
        return NULL;
    }
    PyObject *result = PyObject_Call(self->func, args, kwds);
    /* exit even when func raised, keeping func's exception */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int rc = autocast_do_exit(ctx);
    if (type != NULL) {
        if (rc < 0) {
            PyErr_Clear();
        }
        PyErr_Restore(type, value, tb);
        Py_XDECREF(result);
        return NULL;
    }
    if (rc < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    return result;
}

/* Methods decorated with autocast bind like functions. */
static PyObject *
wrapper_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static int
wrapper_traverse(AutocastWrapper *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->ctx);
    Py_VISIT(self->func);
    Py_VISIT(self->dict);
    return 0;
}

static int
wrapper_clear(AutocastWrapper *self)
{
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->func);
    Py_CLEAR(self->dict);
    return 0;
}

static void
wrapper_dealloc(AutocastWrapper *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    wrapper_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMemberDef wrapper_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(AutocastWrapper, dict), READONLY,
     NULL},
    {NULL},
};

static PyGetSetDef wrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL,
     NULL},
    {NULL},
};

static PyType_Slot wrapper_slots[] = {
    {Py_tp_getset, wrapper_getset},
    {Py_tp_call, wrapper_call},
    {Py_tp_descr_get, wrapper_get},
    {Py_tp_dealloc, wrapper_dealloc},
    {Py_tp_traverse, wrapper_traverse},
    {Py_tp_clear, wrapper_clear},
    {Py_tp_members, wrapper_members},
    {0, NULL},
};

static PyType_Spec wrapper_spec = {
    .name = "ampc._C._AutocastWrapper",
    .basicsize = sizeof(AutocastWrapper),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = wrapper_slots,
};

// ----------------------------------------------------------------------------
// queries

static PyObject *
ac_is_autocast_enabled(PyObject *module, PyObject *args)
{
    PyObject *dev_obj = NULL;
    if (!PyArg_ParseTuple(args, "|O:is_autocast_enabled", &dev_obj)) {
        return NULL;
    }
    /* no argument: CUDA, PyTorch's legacy meaning */
    int device = dev_obj == NULL ? AMPC_DEV_CUDA
                                 : ampc_autocast_device_type(dev_obj,
                                                     "is_autocast_enabled");
    if (device < 0) {
        return NULL;
    }
    AutocastState *st = ampc_autocast_state();
    if (st == NULL) {
        return NULL;
    }
    PyObject *res = PyBool_FromLong(st->enabled[device]);
    Py_DECREF(st);
    return res;
}

static PyObject *
ac_get_autocast_dtype(PyObject *module, PyObject *dev_obj)
{
    int device = ampc_autocast_device_type(dev_obj, "get_autocast_dtype");
    if (device < 0) {
        return NULL;
    }
    AutocastState *st = ampc_autocast_state();
    if (st == NULL) {
        return NULL;
    }
    PyObject *res = Py_NewRef(ampc_dtype_object(st->dtype[device]));
    Py_DECREF(st);
    return res;
}

static PyObject *
ac_is_autocast_cache_enabled(PyObject *module, PyObject *unused)
{
    AutocastState *st = ampc_autocast_state();
    if (st == NULL) {
        return NULL;
    }
    PyObject *res = PyBool_FromLong(st->cache_enabled);
    Py_DECREF(st);
    return res;
}

/* True when autocast is on for some device: the fast test that
 * Function.apply makes before anything else. */
static PyObject *
ac_autocast_active(PyObject *module, PyObject *unused)
{
    AutocastState *st = ampc_autocast_state();
    if (st == NULL) {
        return NULL;
    }
    int on = 0;
    for (int d = 0; d < AMPC_NUM_DEVICE_TYPES; d++) {
        on |= st->enabled[d];
    }
    Py_DECREF(st);
    return PyBool_FromLong(on);
}

PyMethodDef ampc_autocast_functions[] = {
    {"is_autocast_enabled", ac_is_autocast_enabled, METH_VARARGS,
     "is_autocast_enabled(device_type='cuda') -> bool"},
    {"get_autocast_dtype", ac_get_autocast_dtype, METH_O,
     "get_autocast_dtype(device_type) -> the autocast dtype"},
    {"is_autocast_cache_enabled", ac_is_autocast_cache_enabled, METH_NOARGS,
     "whether autocast caches weight casts"},
    {"autocast_active", ac_autocast_active, METH_NOARGS,
     "True when autocast is enabled for some device"},
    {NULL},
};

int
ampc_autocast_init(PyObject *module)
{
    state_type = (PyTypeObject *)PyType_FromModuleAndSpec(module,
                                                          &state_spec, NULL);
    wrapper_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &wrapper_spec, NULL);
    autocast_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &autocast_spec, NULL);
    if (state_type == NULL || wrapper_type == NULL || autocast_type == NULL ||
        PyModule_AddObjectRef(module, "autocast",
                              (PyObject *)autocast_type) < 0) {
        return -1;
    }
    AutocastState *def = PyObject_New(AutocastState, state_type);
    if (def == NULL) {
        return -1;
    }
    def->enabled[AMPC_DEV_CPU] = 0;
    def->enabled[AMPC_DEV_CUDA] = 0;
    def->dtype[AMPC_DEV_CPU] = AMPC_BFLOAT16;
    def->dtype[AMPC_DEV_CUDA] = AMPC_FLOAT16;
    def->cache_enabled = 1;
    def->nesting = 0;
    state_var = PyContextVar_New("ampc.autocast_state", (PyObject *)def);
    Py_DECREF(def);
    if (state_var == NULL || ampc_autocast_policy_init() < 0) {
        return -1;
    }
    return 0;
}
