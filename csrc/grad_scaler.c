/* grad_scaler.c - ampc.amp.GradScaler, PyTorch's torch.amp.GradScaler
 * written in C (amp_semantics.md §1): dynamic loss scaling with the lazy
 * scale and growth tracker, the per-optimizer READY/UNSCALED/STEPPED state
 * machine, the skip-on-inf step and the growth/backoff update, state_dict
 * and pickling, with PyTorch's error types and texts.  The unscale is one
 * fused kernel call per device over all of an optimizer's gradients
 * (amp_ops.c), which also yields per-tensor inf/NaN/zero/subnormal counts.
 *
 * On CUDA the scale, the growth tracker, every found_inf and the counts
 * live on the device, and the host reads them only where a value must
 * reach Python: step()'s skip decision (one read of found_inf per device:
 * the one host sync per step, as in PyTorch), get_scale(), state_dict(),
 * pickling and stats().  scale(), unscale_(), update() and the
 * _step_supports_amp_scaling path (fused optimizers, which skip on the
 * device) queue work and return, so with a fused optimizer a whole step
 * has no host sync and can be captured in a CUDA graph.  The telemetry
 * that needs host values (the zero-gradient and never-cleared checks, the
 * many-skips diagnosis) runs where those values were read anyway.
 *
 * Beyond PyTorch: stats() (steps, skipped steps, which parameters
 * overflowed, underflow fractions), watch(model) for parameter names, a
 * diagnosis after many skipped steps in a row, and misuse hints (the loss
 * not scaled, zero_grad() between backward and step, clipping scaled
 * gradients, a scaler under bfloat16 autocast).  PyTorch's own messages are
 * kept word for word; ampc's hint follows them in parentheses.
 *
 *     class GradScaler:
 *         def __init__(self, device="cuda", init_scale=2.0**16,
 *                      growth_factor=2.0, backoff_factor=0.5,
 *                      growth_interval=2000, enabled=True): ...
 *         def scale(self, outputs): ...
 *         def unscale_(self, optimizer): ...
 *         def step(self, optimizer, *args, **kwargs): ...
 *         def update(self, new_scale=None): ...
 *
 * This file holds the type itself: construction, the shared helpers, the
 * method table and type spec, and module init; grad_scaler_scale.c has
 * scale(), grad_scaler_attrs.c its attributes (PyTorch's private fields)
 * and the getter and setter methods,
 * grad_scaler_unscale.c unscale_(), grad_scaler_step.c step(),
 * grad_scaler_update.c update() and the telemetry,
 * grad_scaler_state.c state_dict and pickling.
 */
#include "grad_scaler.h"

#include <math.h>
#include <stdlib.h>

#include "structmember.h"

#include "ops.h"

/* module-level objects, one set per process (see module.c's NOTE) */
static PyObject *opt_state_enum;                /* OptState */
PyObject *ampc_gs_stage_ready, *ampc_gs_stage_unscaled;
PyObject *ampc_gs_stage_stepped;
static PyObject *refresh_fn;                    /* state factory */
PyObject *ampc_gs_iterable_abc;                 /* collections.abc.Iterable */
/* The scaler that called scale() last: the one whose loss the gradients
 * being clipped most likely come from.  Borrowed; cleared by dealloc. */
AmpcGradScalerObject *ampc_gs_last_scaler;

static const char *const CHECK_FIX =
    "This may indicate your script did not use scaler.scale(loss or "
    "outputs) earlier in the iteration.";

// ----------------------------------------------------------------------------
// small helpers

int
ampc_gs_is_init(PyObject *field)
{
    return field != NULL && field != Py_None;
}

/* A field as the attribute PyTorch would have: AttributeError when it does
 * not exist.  Borrowed. */
PyObject *
ampc_gs_field_get(AmpcGradScalerObject *self, PyObject *field,
                  const char *name)
{
    if (field == NULL) {
        PyErr_Format(PyExc_AttributeError,
                     "'%.100s' object has no attribute '%s'",
                     Py_TYPE(self)->tp_name, name);
    }
    return field;
}

/* The float32 element of t (1 element, any device) as a float: a host
 * read, which waits for the GPU when t is on one. */
int
ampc_gs_read_scalar(const char *fn, AmpcTensorObject *t, float *dst)
{
    if (!ampc_is_cuda(t)) {
        *dst = *(const float *)t->data;
        return 0;
    }
    if (t->dtype != AMPC_FLOAT32 || ampc_numel(t) != 1) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): expected a 1-element float32 tensor", fn);
        return -1;
    }
    return ampc_read_to_host(fn, t, dst, sizeof(float));
}

/* The scale as a float (a host read on CUDA).  -1 with an exception. */
int
ampc_gs_read_scale(AmpcGradScalerObject *self, float *v)
{
    return ampc_gs_read_scalar("GradScaler.get_scale",
                               AMPC_TENSOR(self->scale), v);
}

/* Writes the element at buf (t's dtype) into the 1-element tensor t on
 * any device.
 * NOTE: on CUDA this is a small host-to-device copy, for set-up paths
 * (lazy init, load_state_dict, update(new_scale=float)) only, never the
 * per-step ones. */
static int
write_scalar_bytes(AmpcTensorObject *t, const void *buf)
{
    size_t size = ampc_dtype_size[t->dtype];
    if (!ampc_is_cuda(t)) {
        memcpy(t->data, buf, size);
        return 0;
    }
    /* a fill kernel, not a copy from the stack: nothing waits, and it is
     * allowed while a CUDA graph is being captured */
    return ampc_device_fill(t, buf, "GradScaler");
}

/* v into the float32 tensor t, or iv into the int64 tensor t. */
int
ampc_gs_write_scalar(AmpcTensorObject *t, double v, int64_t iv)
{
    float f = (float)v;
    return write_scalar_bytes(t, t->dtype == AMPC_INT64 ? (const void *)&iv
                                                        : (const void *)&f);
}

static PyObject *
new_state(PyObject *unused, PyObject *unused2)
{
    return Py_BuildValue("{sOsN}", "stage", ampc_gs_stage_ready,
                         "found_inf_per_device", PyDict_New());
}

static PyMethodDef refresh_def = {
    "_refresh_per_optimizer_state", new_state, METH_NOARGS,
    "a fresh per-optimizer state: READY, no inf checks"};

static PyObject *
new_per_opt_states(void)
{
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL) {
        return NULL;
    }
    PyObject *dd = PyObject_CallMethod(collections, "defaultdict", "O",
                                       refresh_fn);
    Py_DECREF(collections);
    return dd;
}

/* The state dict of `optimizer` (created READY when missing). New ref. */
PyObject *
ampc_gs_opt_state(AmpcGradScalerObject *self, PyObject *optimizer)
{
    PyObject *key = PyLong_FromVoidPtr(optimizer);
    if (key == NULL) {
        return NULL;
    }
    PyObject *st = PyObject_GetItem(self->per_opt, key);
    Py_DECREF(key);
    if (st != NULL &&
        (!PyDict_Check(st) ||
         !PyDict_Check(PyDict_GetItemString(st, "found_inf_per_device")))) {
        PyErr_SetString(PyExc_TypeError,
                        "GradScaler: a per-optimizer state must be a dict "
                        "with a 'found_inf_per_device' dict");
        Py_CLEAR(st);
    }
    return st;
}

/* The scale and the tracker are read and written in place by C: None, or
 * a 1-element tensor of their dtype (CPU or CUDA). */
int
ampc_gs_check_state_tensor(PyObject *v, ampc_dtype dt, const char *name)
{
    if (v == NULL || v == Py_None) {
        return 0;
    }
    if (!ampc_tensor_check(v) || AMPC_TENSOR(v)->dtype != dt ||
        ampc_numel(AMPC_TENSOR(v)) != 1) {
        PyErr_Format(PyExc_TypeError,
                     "GradScaler: %s must be None or a 1-element %s CPU "
                     "tensor (or a CUDA one), not %R",
                     name, ampc_dtype_name(dt), v);
        return -1;
    }
    return 0;
}

PyObject *
ampc_gs_state_stage(PyObject *st)
{
    return PyDict_GetItemString(st, "stage");   /* borrowed */
}

int
ampc_gs_set_stage(PyObject *st, PyObject *stage)
{
    return PyDict_SetItemString(st, "stage", stage);
}

/* The warning machinery's stack level 1 is the Python line that called the
 * scaler's method. */
int
ampc_gs_warn(PyObject *category, const char *msg)
{
    return PyErr_WarnEx(category, msg, 1);
}

/* A 0-d tensor of dt on dev holding v. */
static PyObject *
scalar_tensor(ampc_dtype dt, ampc_device dev, double v)
{
    AmpcTensorObject *t = ampc_tensor_empty(0, NULL, dt, dev);
    if (t == NULL) {
        return NULL;
    }
    if (ampc_gs_write_scalar(t, v, dt == AMPC_INT64 ? (int64_t)v : 0) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
}

/* `obj` as an int64 the way torch.full(..., dtype=int32) takes a number. */
int
ampc_gs_as_i64(PyObject *obj, int64_t *out)
{
    PyObject *i = PyNumber_Long(obj);
    if (i == NULL) {
        return -1;
    }
    long long v = PyLong_AsLongLong(i);
    Py_DECREF(i);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

int
ampc_gs_check_scale_growth_tracker(AmpcGradScalerObject *self,
                                   const char *funcname)
{
    if (!ampc_gs_is_init(self->scale)) {
        PyErr_Format(PyExc_AssertionError,
                     "Attempted %s but _scale is None.  %s", funcname,
                     CHECK_FIX);
        return -1;
    }
    if (!ampc_gs_is_init(self->growth_tracker)) {
        PyErr_Format(PyExc_AssertionError,
                     "Attempted %s but _growth_tracker is None.  %s",
                     funcname, CHECK_FIX);
        return -1;
    }
    return 0;
}

int
ampc_gs_lazy_init(AmpcGradScalerObject *self, ampc_device dev)
{
    if (ampc_gs_is_init(self->growth_tracker)) {
        PyErr_SetString(PyExc_AssertionError,
                        "_growth_tracker initialized before _scale");
        return -1;
    }
    if (ampc_gs_field_get(self, self->init_scale, "_init_scale") == NULL ||
        ampc_gs_field_get(self, self->init_growth_tracker,
                          "_init_growth_tracker") == NULL) {
        return -1;
    }
    double init = PyFloat_AsDouble(self->init_scale);
    int64_t tracker;
    if ((init == -1.0 && PyErr_Occurred()) ||
        ampc_gs_as_i64(self->init_growth_tracker, &tracker) < 0) {
        return -1;
    }
    PyObject *s = scalar_tensor(AMPC_FLOAT32, dev, init);
    if (s == NULL) {
        return -1;
    }
    PyObject *g = (PyObject *)ampc_tensor_empty(0, NULL, AMPC_INT64, dev);
    if (g == NULL || ampc_gs_write_scalar(AMPC_TENSOR(g), 0.0, tracker) < 0) {
        Py_XDECREF(g);
        Py_DECREF(s);
        return -1;
    }
    Py_XSETREF(self->scale, s);
    Py_XSETREF(self->growth_tracker, g);
    return 0;
}

// ----------------------------------------------------------------------------
// construction, GC

static PyObject *
scaler_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    AmpcGradScalerObject *self =
        (AmpcGradScalerObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->device = PyUnicode_FromString("cuda");
    self->enabled = Py_NewRef(Py_True);
    self->is_enabled = 1;
    self->per_opt = new_per_opt_states();
    self->prev_nonfinite = PyDict_New();
    self->cur_nonfinite = PyDict_New();
    self->unscaled = PySet_New(NULL);
    self->dev_counts = PyList_New(0);
    self->warn_after_skips = 10;
    self->min_scale = 0.0;
    self->max_scale = INFINITY;
    self->new_iteration = 1;
    if (self->device == NULL || self->per_opt == NULL ||
        self->prev_nonfinite == NULL || self->cur_nonfinite == NULL ||
        self->unscaled == NULL || self->dev_counts == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
scaler_traverse(AmpcGradScalerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->device);
    Py_VISIT(self->enabled);
    Py_VISIT(self->init_scale);
    Py_VISIT(self->scale);
    Py_VISIT(self->growth_factor);
    Py_VISIT(self->backoff_factor);
    Py_VISIT(self->growth_interval);
    Py_VISIT(self->init_growth_tracker);
    Py_VISIT(self->growth_tracker);
    Py_VISIT(self->per_opt);
    Py_VISIT(self->prev_nonfinite);
    Py_VISIT(self->cur_nonfinite);
    Py_VISIT(self->unscaled);
    Py_VISIT(self->watched);
    Py_VISIT(self->dev_counts);
    Py_VISIT(self->dev_stats);
    return 0;
}

static int
scaler_clear(AmpcGradScalerObject *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->device);
    Py_CLEAR(self->enabled);
    Py_CLEAR(self->init_scale);
    Py_CLEAR(self->scale);
    Py_CLEAR(self->growth_factor);
    Py_CLEAR(self->backoff_factor);
    Py_CLEAR(self->growth_interval);
    Py_CLEAR(self->init_growth_tracker);
    Py_CLEAR(self->growth_tracker);
    Py_CLEAR(self->per_opt);
    Py_CLEAR(self->prev_nonfinite);
    Py_CLEAR(self->cur_nonfinite);
    Py_CLEAR(self->unscaled);
    Py_CLEAR(self->watched);
    Py_CLEAR(self->dev_counts);
    Py_CLEAR(self->dev_stats);
    return 0;
}

static void
scaler_dealloc(AmpcGradScalerObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (ampc_gs_last_scaler == self) {
        ampc_gs_last_scaler = NULL;
    }
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    scaler_clear(self);
    PyMem_Free(self->records);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* Per-iteration bookkeeping back to "nothing recorded". */
int
ampc_gs_reset_iteration(AmpcGradScalerObject *self)
{
    PyObject *fresh = new_per_opt_states();
    if (fresh == NULL) {
        return -1;
    }
    Py_XSETREF(self->per_opt, fresh);
    self->scaled = 0;
    self->loss_nonfinite = 0;
    self->new_iteration = 1;
    self->fused_steps = 0;
    self->host_found_states = 0;
    self->host_found_sum = 0.0;
    return PySet_Clear(self->unscaled);
}

static int
scaler_init(AmpcGradScalerObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"device", "init_scale", "growth_factor",
                             "backoff_factor", "growth_interval", "enabled",
                             "min_scale", "max_scale", NULL};
    PyObject *device = NULL, *init_scale = NULL, *growth = NULL;
    PyObject *backoff = NULL, *interval = NULL, *enabled = Py_True;
    PyObject *lo = Py_None, *hi = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOOOOO$OO:GradScaler",
                                     kwlist, &device, &init_scale, &growth,
                                     &backoff, &interval, &enabled, &lo,
                                     &hi) ||
        ampc_gs_set_bounds(self, lo, hi, "GradScaler") < 0) {
        return -1;
    }
    PyObject *dev = device == NULL ? PyUnicode_FromString("cuda")
                                   : PyObject_Str(device);
    if (dev == NULL) {
        return -1;
    }
    const char *ds = PyUnicode_AsUTF8(dev);
    if (ds == NULL || (strcmp(ds, "cuda") != 0 && strcmp(ds, "cpu") != 0)) {
        if (ds != NULL) {
            PyErr_Format(PyExc_ValueError,
                         "GradScaler(): device must be 'cuda' or 'cpu' (a "
                         "device type), got %R",
                         device);
        }
        Py_DECREF(dev);
        return -1;
    }
    int on = PyObject_IsTrue(enabled);
    if (on < 0) {
        Py_DECREF(dev);
        return -1;
    }
    Py_XSETREF(self->device, dev);
    Py_XSETREF(self->enabled, Py_NewRef(enabled));
    self->is_enabled = on;
    if (strcmp(ds, "cuda") == 0 && on && ampc_cuda_count() <= 0) {
        if (ampc_gs_warn(PyExc_UserWarning,
                         "ampc.cuda.amp.GradScaler is enabled, but CUDA is "
                         "not available.  Disabling.") < 0) {
            return -1;
        }
        Py_XSETREF(self->enabled, Py_NewRef(Py_False));
        self->is_enabled = 0;
    }
    Py_CLEAR(self->init_scale);
    Py_CLEAR(self->scale);
    Py_CLEAR(self->growth_factor);
    Py_CLEAR(self->backoff_factor);
    Py_CLEAR(self->growth_interval);
    Py_CLEAR(self->init_growth_tracker);
    Py_CLEAR(self->growth_tracker);
    if (!self->is_enabled) {
        return 0;
    }

    PyObject *g = growth ? Py_NewRef(growth) : PyFloat_FromDouble(2.0);
    PyObject *b = backoff ? Py_NewRef(backoff) : PyFloat_FromDouble(0.5);
    PyObject *one = PyFloat_FromDouble(1.0);
    int bad_g = -1, bad_b = -1;
    if (g != NULL && b != NULL && one != NULL) {
        bad_g = PyObject_RichCompareBool(g, one, Py_LE);
        bad_b = bad_g == 0 ? PyObject_RichCompareBool(b, one, Py_GE) : -1;
    }
    Py_XDECREF(one);
    if (bad_g != 0 || bad_b != 0) {
        if (bad_g == 1) {
            PyErr_SetString(PyExc_AssertionError,
                            "The growth factor must be > 1.0.");
        }
        else if (bad_b == 1) {
            PyErr_SetString(PyExc_AssertionError,
                            "The backoff factor must be < 1.0.");
        }
        Py_XDECREF(g);
        Py_XDECREF(b);
        return -1;
    }
    self->growth_factor = g;
    self->backoff_factor = b;
    self->init_scale = init_scale ? Py_NewRef(init_scale)
                                  : PyFloat_FromDouble(65536.0);
    self->growth_interval = interval ? Py_NewRef(interval)
                                     : PyLong_FromLong(2000);
    self->init_growth_tracker = PyLong_FromLong(0);
    self->scale = Py_NewRef(Py_None);
    self->growth_tracker = Py_NewRef(Py_None);
    if (self->init_scale == NULL || self->growth_interval == NULL ||
        self->init_growth_tracker == NULL) {
        return -1;
    }
    return ampc_gs_reset_iteration(self);
}

static PyMemberDef scaler_members[] = {
    {"__dictoffset__", T_PYSSIZET,
     offsetof(AmpcGradScalerObject, dict), READONLY},
    {"__weaklistoffset__", T_PYSSIZET,
     offsetof(AmpcGradScalerObject, weakreflist), READONLY},
    {NULL},
};

static PyMethodDef scaler_methods[] = {
    {"scale", (PyCFunction)ampc_gs_scale, METH_O,
     "scale(outputs): outputs * scale (a tensor, or nested lists/tuples and "
     "other iterables of tensors); outputs itself when disabled"},
    {"_apply_scale", (PyCFunction)ampc_gs_apply_scale, METH_O, NULL},
    {"unscale_", (PyCFunction)ampc_gs_unscale_, METH_O,
     "unscale_(optimizer): divides the optimizer's gradients by the scale "
     "in place, one fused pass that also checks for inf/NaN"},
    {"clip_grad_norm_", (PyCFunction)(void (*)(void))ampc_gs_clip_grad_norm_,
     METH_VARARGS | METH_KEYWORDS,
     "clip_grad_norm_(optimizer, max_norm, norm_type=2.0) -> Tensor: "
     "unscale_(optimizer) and clip_grad_norm_ of its gradients in two fused "
     "passes; returns the total norm of the unscaled gradients"},
    {"step", (PyCFunction)(void (*)(void))ampc_gs_step,
     METH_VARARGS | METH_KEYWORDS,
     "step(optimizer, *args, **kwargs): unscale_ if not done yet, then "
     "optimizer.step(*args, **kwargs) unless a gradient was inf/NaN; "
     "returns optimizer.step's value (None when skipped)"},
    {"update", (PyCFunction)(void (*)(void))ampc_gs_update,
     METH_VARARGS | METH_KEYWORDS,
     "update(new_scale=None): backs the scale off after inf/NaN, grows it "
     "after growth_interval clean steps, or sets new_scale"},
    {"get_scale", (PyCFunction)ampc_gs_m_get_scale, METH_NOARGS,
     "the current scale as a Python float (1.0 when disabled)"},
    {"get_growth_factor", (PyCFunction)ampc_gs_m_get_growth_factor,
     METH_NOARGS, "the growth factor"},
    {"set_growth_factor", (PyCFunction)ampc_gs_m_set_growth_factor, METH_O,
     "set_growth_factor(new_factor)"},
    {"get_backoff_factor", (PyCFunction)ampc_gs_m_get_backoff_factor,
     METH_NOARGS, "the backoff factor"},
    {"set_backoff_factor", (PyCFunction)ampc_gs_m_set_backoff_factor, METH_O,
     "set_backoff_factor(new_factor)"},
    {"get_growth_interval", (PyCFunction)ampc_gs_m_get_growth_interval,
     METH_NOARGS, "the growth interval"},
    {"set_growth_interval", (PyCFunction)ampc_gs_m_set_growth_interval, METH_O,
     "set_growth_interval(new_interval)"},
    {"_get_growth_tracker", (PyCFunction)ampc_gs_m_get_growth_tracker,
     METH_NOARGS, "the growth tracker as a Python int"},
    {"_get_scale_async", (PyCFunction)ampc_gs_m_get_scale_async, METH_NOARGS,
     "the scale tensor, or None before the first scale()"},
    {"is_enabled", (PyCFunction)ampc_gs_m_is_enabled, METH_NOARGS,
     "whether this scaler is enabled"},
    {"state_dict", (PyCFunction)ampc_gs_state_dict, METH_NOARGS,
     "{'scale', 'growth_factor', 'backoff_factor', 'growth_interval', "
     "'_growth_tracker'} ({} when disabled)"},
    {"load_state_dict", (PyCFunction)ampc_gs_load_state_dict, METH_O,
     "load_state_dict(state_dict)"},
    {"__getstate__", (PyCFunction)ampc_gs_getstate, METH_NOARGS, NULL},
    {"__setstate__", (PyCFunction)ampc_gs_setstate, METH_O, NULL},
    {"_unscale_grads_", (PyCFunction)ampc_gs_unscale_grads_, METH_VARARGS,
     "_unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16) -> "
     "{device: found_inf}"},
    {"_check_inf_per_device", (PyCFunction)ampc_gs_check_inf_per_device,
     METH_O, "the inf/NaN check of the optimizer's gradients, no unscale"},
    {"_found_inf_per_device", (PyCFunction)ampc_gs_m_found_inf_per_device,
     METH_O, "{device: found_inf} recorded for the optimizer"},
    {"_check_scale_growth_tracker",
     (PyCFunction)ampc_gs_m_check_scale_growth_tracker, METH_O, NULL},
    {"_lazy_init_scale_growth_tracker", (PyCFunction)ampc_gs_m_lazy_init,
     METH_O, NULL},
    {"stats", (PyCFunction)(void (*)(void))ampc_gs_stats,
     METH_VARARGS | METH_KEYWORDS,
     "stats(model=None) -> {'steps', 'skipped_steps', 'last_step_skipped', "
     "'scale', 'growth_tracker', 'overflow', 'underflow'}"},
    {"watch", (PyCFunction)ampc_gs_watch, METH_O,
     "watch(model): name parameters by model.named_parameters() in stats() "
     "and warnings; returns model"},
    {NULL},
};

static PyType_Slot scaler_slots[] = {
    {Py_tp_doc,
     "GradScaler(device='cuda', init_scale=2.0**16, growth_factor=2.0, "
     "backoff_factor=0.5, growth_interval=2000, enabled=True)\n\n"
     "Dynamic loss scaling for float16 training, as torch.amp.GradScaler.\n"
     "\n"
     ">>> import ampc\n"
     ">>> w = ampc.ones(2, requires_grad=True)\n"
     ">>> opt = ampc.optim.SGD([w], lr=0.5)\n"
     ">>> scaler = ampc.amp.GradScaler('cpu', init_scale=8.0)\n"
     ">>> scaler.scale((w * w).sum()).backward()\n"
     ">>> w.grad.tolist()\n"
     "[16.0, 16.0]\n"
     ">>> scaler.step(opt)\n"
     ">>> scaler.update()\n"
     ">>> w.tolist()\n"
     "[0.0, 0.0]"},
    {Py_tp_new, scaler_new},
    {Py_tp_init, scaler_init},
    {Py_tp_dealloc, scaler_dealloc},
    {Py_tp_traverse, scaler_traverse},
    {Py_tp_clear, scaler_clear},
    {Py_tp_methods, scaler_methods},
    {Py_tp_getset, ampc_gs_getset},
    {Py_tp_members, scaler_members},
    {0, NULL},
};

PyType_Spec ampc_grad_scaler_spec = {
    .name = "ampc.amp.GradScaler",
    .basicsize = sizeof(AmpcGradScalerObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = scaler_slots,
};

// ----------------------------------------------------------------------------
// module init

static PyObject *
make_opt_state(void)
{
    PyObject *enum_mod = PyImport_ImportModule("enum");
    if (enum_mod == NULL) {
        return NULL;
    }
    PyObject *members = Py_BuildValue("[(si)(si)(si)]", "READY", 0,
                                      "UNSCALED", 1, "STEPPED", 2);
    PyObject *kw = Py_BuildValue("{ss}", "module", "ampc.amp");
    PyObject *args = members ? Py_BuildValue("(sO)", "OptState", members)
                             : NULL;
    PyObject *cls = NULL;
    if (kw != NULL && args != NULL) {
        PyObject *Enum = PyObject_GetAttrString(enum_mod, "Enum");
        cls = Enum ? PyObject_Call(Enum, args, kw) : NULL;
        Py_XDECREF(Enum);
    }
    Py_XDECREF(members);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_DECREF(enum_mod);
    return cls;
}

int
ampc_grad_scaler_init(PyObject *module)
{
    opt_state_enum = make_opt_state();
    if (opt_state_enum == NULL) {
        return -1;
    }
    ampc_gs_stage_ready = PyObject_GetAttrString(opt_state_enum, "READY");
    ampc_gs_stage_unscaled = PyObject_GetAttrString(opt_state_enum,
                                                    "UNSCALED");
    ampc_gs_stage_stepped = PyObject_GetAttrString(opt_state_enum, "STEPPED");
    refresh_fn = PyCFunction_New(&refresh_def, NULL);
    PyObject *abc = PyImport_ImportModule("collections.abc");
    ampc_gs_iterable_abc =
        abc ? PyObject_GetAttrString(abc, "Iterable") : NULL;
    Py_XDECREF(abc);
    if (ampc_gs_stage_ready == NULL || ampc_gs_stage_unscaled == NULL ||
        ampc_gs_stage_stepped == NULL || refresh_fn == NULL ||
        ampc_gs_iterable_abc == NULL) {
        return -1;
    }
    PyObject *type = PyType_FromModuleAndSpec(module, &ampc_grad_scaler_spec,
                                              NULL);
    if (type == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "GradScaler", type);
    Py_DECREF(type);
    if (rc < 0 ||
        PyModule_AddObjectRef(module, "OptState", opt_state_enum) < 0 ||
        PyModule_AddObjectRef(module, "_refresh_per_optimizer_state",
                              refresh_fn) < 0) {
        return -1;
    }
    return 0;
}
