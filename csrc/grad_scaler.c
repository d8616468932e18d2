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
 */
#include "ampc.h"

#include <math.h>
#include <stdlib.h>

#include "structmember.h"

#include "amp_math.h"

/* A scalar output with more elements than this is not checked for inf/NaN
 * by scale() (the check reads it; a loss has one element). */
#define LOSS_CHECK_MAX 64

/* warn-once flags */
enum {
    WARN_BF16 = 1,
    WARN_UNSCALED_LOSS = 2,
    WARN_ZERO_GRADS = 4,
    WARN_SKIPS = 8,
    WARN_CLIP = 16,
};

/* What one unscale saw in one parameter's gradient (for stats()). */
typedef struct {
    uintptr_t opt;          /* id(optimizer) */
    uintptr_t param;        /* id(param) */
    int opt_rank;           /* order of the optimizer in this iteration */
    int group;
    Py_ssize_t index;
    int64_t numel;
    ampc_amp_counts c;      /* valid when dev_src < 0 */
    Py_ssize_t dev_src;     /* CUDA: c is row dev_row of dev_counts[dev_src],
                             * still on the device; -1: c is on the host */
    Py_ssize_t dev_row;
} scaler_record;

typedef struct AmpcGradScalerObject {
    PyObject_HEAD
    PyObject *dict;
    PyObject *weakreflist;
    /* PyTorch's attributes, as the Python objects it keeps.  NULL: the
     * attribute does not exist (a scaler disabled at construction never
     * gets them); Py_None for _scale and _growth_tracker: not created. */
    PyObject *device;
    PyObject *enabled;
    int is_enabled;
    PyObject *init_scale;
    PyObject *scale;                /* 0-d float32 tensor */
    PyObject *growth_factor;
    PyObject *backoff_factor;
    PyObject *growth_interval;
    PyObject *init_growth_tracker;
    PyObject *growth_tracker;       /* 0-d int64 tensor */
    PyObject *per_opt;              /* defaultdict: id(opt) -> state dict */
    /* beyond PyTorch */
    int64_t steps;
    int64_t skipped_steps;
    int last_skipped;
    int64_t consecutive_skips;      /* update()s in a row that backed off */
    int64_t warn_after_skips;
    int64_t loss_streak;            /* ... of which the loss was not finite */
    int64_t stale_streak;           /* ... of which the infs persisted */
    int scaled;                     /* scale() ran since the last update() */
    int loss_nonfinite;             /* ... and saw a non-finite output */
    int stale_seen, stale_all;      /* persistence test of this iteration */
    int new_iteration;              /* the next unscale starts new records */
    int opt_count;                  /* optimizers recorded this iteration */
    int warned;
    scaler_record *records;
    Py_ssize_t n_records, cap_records;
    PyObject *prev_nonfinite;       /* id(param) -> (weakref(grad), count)
                                     * of the last iteration's inf/NaN */
    PyObject *cur_nonfinite;        /* ... of this iteration's */
    PyObject *unscaled;             /* set of data pointers unscaled */
    PyObject *watched;              /* a module, for parameter names */
    /* CUDA */
    PyObject *dev_counts;           /* list: the records' device counts */
    PyObject *dev_stats;            /* int64 AMPC_AMP_NUM_STATS on the
                                     * scale's device, or NULL */
    int64_t fused_steps;            /* CUDA fused steps this iteration */
    int last_fused;                 /* the last step() was a fused one */
    Py_ssize_t host_found_states;   /* optimizers whose found_inf step()
                                     * read this iteration ... */
    double host_found_sum;          /* ... and their sum */
} AmpcGradScalerObject;

/* module-level objects, one set per process (see module.c's NOTE) */
static PyObject *opt_state_enum;                /* OptState */
static PyObject *stage_ready, *stage_unscaled, *stage_stepped;
static PyObject *refresh_fn;                    /* state factory */
static PyObject *iterable_abc;                  /* collections.abc.Iterable */
/* The scaler that called scale() last: the one whose loss the gradients
 * being clipped most likely come from.  Borrowed; cleared by dealloc. */
static AmpcGradScalerObject *last_scaler;

static const char *const CHECK_FIX =
    "This may indicate your script did not use scaler.scale(loss or "
    "outputs) earlier in the iteration.";

// ----------------------------------------------------------------------------
// small helpers

static int
is_init(PyObject *field)
{
    return field != NULL && field != Py_None;
}

/* A field as the attribute PyTorch would have: AttributeError when it does
 * not exist.  Borrowed. */
static PyObject *
field_get(AmpcGradScalerObject *self, PyObject *field, const char *name)
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
static int
read_scalar(const char *fn, AmpcTensorObject *t, float *dst)
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
static int
read_scale(AmpcGradScalerObject *self, float *v)
{
    return read_scalar("GradScaler.get_scale", AMPC_TENSOR(self->scale), v);
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
    if (ampc_cuda_enter("GradScaler", t->device) < 0) {
        return -1;
    }
    int rc = ampc_cuda.memcpy(t->data, buf, size, AMPC_COPY_H2D);
    if (rc != 0) {
        ampc_cuda_raise("GradScaler", rc);
        return -1;
    }
    return 0;
}

/* v into the float32 tensor t, or iv into the int64 tensor t. */
static int
write_scalar(AmpcTensorObject *t, double v, int64_t iv)
{
    float f = (float)v;
    return write_scalar_bytes(t, t->dtype == AMPC_INT64 ? (const void *)&iv
                                                        : (const void *)&f);
}

static PyObject *
new_state(PyObject *unused, PyObject *unused2)
{
    return Py_BuildValue("{sOsN}", "stage", stage_ready,
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
static PyObject *
opt_state(AmpcGradScalerObject *self, PyObject *optimizer)
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
static int
check_state_tensor(PyObject *v, ampc_dtype dt, const char *name)
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

static PyObject *
state_stage(PyObject *st)
{
    return PyDict_GetItemString(st, "stage");   /* borrowed */
}

static int
set_stage(PyObject *st, PyObject *stage)
{
    return PyDict_SetItemString(st, "stage", stage);
}

/* The warning machinery's stack level 1 is the Python line that called the
 * scaler's method. */
static int
warn(PyObject *category, const char *msg)
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
    if (write_scalar(t, v, dt == AMPC_INT64 ? (int64_t)v : 0) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
}

/* `obj` as an int64 the way torch.full(..., dtype=int32) takes a number. */
static int
as_i64(PyObject *obj, int64_t *out)
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

static int
check_scale_growth_tracker(AmpcGradScalerObject *self, const char *funcname)
{
    if (!is_init(self->scale)) {
        PyErr_Format(PyExc_AssertionError,
                     "Attempted %s but _scale is None.  %s", funcname,
                     CHECK_FIX);
        return -1;
    }
    if (!is_init(self->growth_tracker)) {
        PyErr_Format(PyExc_AssertionError,
                     "Attempted %s but _growth_tracker is None.  %s",
                     funcname, CHECK_FIX);
        return -1;
    }
    return 0;
}

static int
lazy_init(AmpcGradScalerObject *self, ampc_device dev)
{
    if (is_init(self->growth_tracker)) {
        PyErr_SetString(PyExc_AssertionError,
                        "_growth_tracker initialized before _scale");
        return -1;
    }
    if (field_get(self, self->init_scale, "_init_scale") == NULL ||
        field_get(self, self->init_growth_tracker,
                  "_init_growth_tracker") == NULL) {
        return -1;
    }
    double init = PyFloat_AsDouble(self->init_scale);
    int64_t tracker;
    if ((init == -1.0 && PyErr_Occurred()) ||
        as_i64(self->init_growth_tracker, &tracker) < 0) {
        return -1;
    }
    PyObject *s = scalar_tensor(AMPC_FLOAT32, dev, init);
    if (s == NULL) {
        return -1;
    }
    PyObject *g = (PyObject *)ampc_tensor_empty(0, NULL, AMPC_INT64, dev);
    if (g == NULL || write_scalar(AMPC_TENSOR(g), 0.0, tracker) < 0) {
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
    if (last_scaler == self) {
        last_scaler = NULL;
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
static int
reset_iteration(AmpcGradScalerObject *self)
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
                             NULL};
    PyObject *device = NULL, *init_scale = NULL, *growth = NULL;
    PyObject *backoff = NULL, *interval = NULL, *enabled = Py_True;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOOOOO:GradScaler",
                                     kwlist, &device, &init_scale, &growth,
                                     &backoff, &interval, &enabled)) {
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
        if (warn(PyExc_UserWarning,
                 "ampc.cuda.amp.GradScaler is enabled, but CUDA is not "
                 "available.  Disabling.") < 0) {
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
    return reset_iteration(self);
}

// ----------------------------------------------------------------------------
// scale

/* The bfloat16-autocast check: GradScaler is for float16. */
static int
check_bf16_autocast(AmpcGradScalerObject *self, AmpcTensorObject *t)
{
    if (self->warned & WARN_BF16) {
        return 0;
    }
    PyObject *ampc = PyImport_ImportModule("ampc");
    if (ampc == NULL) {
        return -1;
    }
    PyObject *enabled_fn = PyObject_GetAttrString(ampc, "is_autocast_enabled");
    PyObject *dtype_fn = PyObject_GetAttrString(ampc, "get_autocast_dtype");
    Py_DECREF(ampc);
    if (enabled_fn == NULL || dtype_fn == NULL) {
        /* autocast not built yet: nothing to check */
        Py_XDECREF(enabled_fn);
        Py_XDECREF(dtype_fn);
        PyErr_Clear();
        return 0;
    }
    const char *dev = t->device.type == AMPC_DEV_CUDA ? "cuda" : "cpu";
    int rc = 0;
    PyObject *on = PyObject_CallFunction(enabled_fn, "s", dev);
    PyObject *dt = NULL;
    if (on == NULL) {
        rc = -1;
    }
    else if (PyObject_IsTrue(on) == 1) {
        dt = PyObject_CallFunction(dtype_fn, "s", dev);
        if (dt == NULL) {
            rc = -1;
        }
        else if (dt == ampc_dtype_object(AMPC_BFLOAT16)) {
            self->warned |= WARN_BF16;
            rc = warn(PyExc_UserWarning,
                      "GradScaler is not needed with bfloat16 autocast: "
                      "bfloat16 has float32's exponent range, so gradients "
                      "do not underflow and loss scaling only costs time.  "
                      "Drop the scaler (or create it with enabled=False); "
                      "it is meant for float16.");
        }
    }
    Py_XDECREF(on);
    Py_XDECREF(dt);
    Py_DECREF(enabled_fn);
    Py_DECREF(dtype_fn);
    return rc;
}

/* Notes whether a small output (the loss) is inf or NaN: after many
 * skipped steps this tells a forward-pass problem from an overflow. */
static void
check_loss(AmpcGradScalerObject *self, AmpcTensorObject *t)
{
    int64_t n = ampc_numel(t);
    if (t->device.type != AMPC_DEV_CPU || n > LOSS_CHECK_MAX ||
        !ampc_dtype_is_float(t->dtype) || !ampc_is_contiguous(t)) {
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float v;
        if (t->dtype == AMPC_FLOAT32) {
            v = ((const float *)t->data)[i];
        }
        else if (t->dtype == AMPC_FLOAT16) {
            v = ampc_f16_to_f32(((const uint16_t *)t->data)[i]);
        }
        else {
            v = ampc_bf16_to_f32(((const uint16_t *)t->data)[i]);
        }
        if (!ampc_f32_isfinite(v)) {
            self->loss_nonfinite = 1;
        }
    }
}

/* One tensor: outputs * scale (out of place, recorded by autograd). */
static PyObject *
scale_tensor(AmpcGradScalerObject *self, PyObject *val)
{
    AmpcTensorObject *t = AMPC_TENSOR(val);
    if (!is_init(self->scale) && lazy_init(self, t->device) < 0) {
        return NULL;
    }
    if (check_bf16_autocast(self, t) < 0) {
        return NULL;
    }
    check_loss(self, t);
    self->scaled = 1;
    last_scaler = self;
    AmpcTensorObject *s = AMPC_TENSOR(self->scale);
    if (s->device.type != t->device.type ||
        s->device.index != t->device.index) {
        PyObject *dev = PyObject_GetAttrString(val, "device");
        PyObject *moved = dev ? PyObject_CallMethod(self->scale, "to", "O",
                                                    dev)
                              : NULL;
        Py_XDECREF(dev);
        if (moved == NULL) {
            return NULL;
        }
        PyObject *out = PyNumber_Multiply(val, moved);
        Py_DECREF(moved);
        return out;
    }
    return PyNumber_Multiply(val, self->scale);
}

static PyObject *
scaler_apply_scale(AmpcGradScalerObject *self, PyObject *val)
{
    if (ampc_tensor_check(val)) {
        return scale_tensor(self, val);
    }
    int iterable = PyObject_IsInstance(val, iterable_abc);
    if (iterable < 0) {
        return NULL;
    }
    if (!iterable) {
        PyErr_SetString(PyExc_ValueError,
                        "outputs must be a Tensor or an iterable of Tensors");
        return NULL;
    }
    PyObject *fn = PyObject_GetAttrString((PyObject *)self, "_apply_scale");
    if (fn == NULL) {
        return NULL;
    }
    PyObject *mapped = PyObject_CallFunctionObjArgs(
        (PyObject *)&PyMap_Type, fn, val, NULL);
    Py_DECREF(fn);
    if (mapped == NULL || !(PyList_Check(val) || PyTuple_Check(val))) {
        /* other iterables get the lazy map, as in PyTorch */
        return mapped;
    }
    /* a list or tuple keeps its type */
    PyObject *out = PyObject_CallOneArg((PyObject *)Py_TYPE(val), mapped);
    Py_DECREF(mapped);
    return out;
}

static PyObject *
scaler_scale(AmpcGradScalerObject *self, PyObject *outputs)
{
    if (!self->is_enabled) {
        return Py_NewRef(outputs);
    }
    return scaler_apply_scale(self, outputs);
}

// ----------------------------------------------------------------------------
// unscale: one fused kernel call per device over an optimizer's gradients

typedef struct {
    AmpcTensorObject *grad;     /* new reference */
    uintptr_t param;
    int group;
    Py_ssize_t index;
} grad_item;

static void
items_free(grad_item *items, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(items[i].grad);
    }
    PyMem_Free(items);
}

/* Every .grad of the optimizer's parameters, in param_groups order; the
 * FP16 check comes before any gradient is touched, as in PyTorch. */
static grad_item *
collect_grads(PyObject *optimizer, int allow_fp16, Py_ssize_t *count)
{
    grad_item *items = NULL;
    Py_ssize_t n = 0, cap = 0;
    PyObject *groups = PyObject_GetAttrString(optimizer, "param_groups");
    PyObject *git = groups ? PyObject_GetIter(groups) : NULL;
    PyObject *group = NULL, *params = NULL, *pit = NULL, *param = NULL;
    int gi = 0;
    Py_XDECREF(groups);
    if (git == NULL) {
        return NULL;
    }
    while ((group = PyIter_Next(git)) != NULL) {
        params = PyMapping_GetItemString(group, "params");
        if (params == NULL || (pit = PyObject_GetIter(params)) == NULL) {
            goto error;
        }
        Py_ssize_t pi = 0;
        while ((param = PyIter_Next(pit)) != NULL) {
            if (!ampc_tensor_check(param)) {
                PyErr_Format(PyExc_AssertionError,
                             "expected param to be a Tensor, got %.100s",
                             Py_TYPE(param)->tp_name);
                goto error;
            }
            PyObject *grad = PyObject_GetAttrString(param, "grad");
            if (grad == NULL) {
                goto error;
            }
            if (grad == Py_None) {
                Py_DECREF(grad);
                Py_CLEAR(param);
                pi++;
                continue;
            }
            if (!ampc_tensor_check(grad)) {
                PyErr_Format(PyExc_TypeError,
                             "GradScaler: param_groups[%d]['params'][%zd]"
                             ".grad must be a Tensor, not %.100s",
                             gi, pi, Py_TYPE(grad)->tp_name);
                Py_DECREF(grad);
                goto error;
            }
            if (!allow_fp16 && AMPC_TENSOR(grad)->dtype == AMPC_FLOAT16) {
                PyErr_SetString(
                    PyExc_ValueError,
                    "Attempting to unscale FP16 gradients. (ampc: "
                    "GradScaler unscales float32 master gradients: keep the "
                    "parameters in float32 and let autocast run the float16 "
                    "math)");
                Py_DECREF(grad);
                goto error;
            }
            if (!ampc_dtype_is_float(AMPC_TENSOR(grad)->dtype)) {
                PyErr_Format(PyExc_RuntimeError,
                             "GradScaler: param_groups[%d]['params'][%zd]"
                             ".grad is %s; expected float32, float16 or "
                             "bfloat16",
                             gi, pi,
                             ampc_dtype_name(AMPC_TENSOR(grad)->dtype));
                Py_DECREF(grad);
                goto error;
            }
            if (n == cap) {
                Py_ssize_t ncap = cap ? 2 * cap : 16;
                grad_item *bigger = PyMem_Realloc(items,
                                                  ncap * sizeof(grad_item));
                if (bigger == NULL) {
                    PyErr_NoMemory();
                    Py_DECREF(grad);
                    goto error;
                }
                items = bigger;
                cap = ncap;
            }
            items[n].grad = AMPC_TENSOR(grad);
            items[n].param = (uintptr_t)param;
            items[n].group = gi;
            items[n].index = pi;
            n++;
            Py_CLEAR(param);
            pi++;
        }
        Py_CLEAR(pit);
        Py_CLEAR(params);
        Py_CLEAR(group);
        if (PyErr_Occurred()) {
            goto error;
        }
        gi++;
    }
    if (PyErr_Occurred()) {
        goto error;
    }
    Py_DECREF(git);
    *count = n;
    if (items == NULL) {
        items = PyMem_Malloc(sizeof(grad_item));
        if (items == NULL) {
            PyErr_NoMemory();
        }
    }
    return items;
error:
    Py_XDECREF(param);
    Py_XDECREF(pit);
    Py_XDECREF(params);
    Py_XDECREF(group);
    Py_DECREF(git);
    items_free(items, n);
    return NULL;
}

static int
records_reserve(AmpcGradScalerObject *self, Py_ssize_t more)
{
    if (self->n_records + more <= self->cap_records) {
        return 0;
    }
    Py_ssize_t cap = self->cap_records ? self->cap_records : 16;
    while (cap < self->n_records + more) {
        cap *= 2;
    }
    scaler_record *r = PyMem_Realloc(self->records,
                                     cap * sizeof(scaler_record));
    if (r == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->records = r;
    self->cap_records = cap;
    return 0;
}

/* The persistence test behind the "never cleared" diagnosis: a gradient
 * that had inf/NaN at the last iteration's unscale and has them again, in
 * at least the same number, in the very same tensor object, was probably
 * never zeroed.  The gradient is held by a weak reference only. */
static int
track_nonfinite(AmpcGradScalerObject *self, grad_item *items,
                ampc_amp_counts *counts, const Py_ssize_t *on_device,
                Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (on_device[i] >= 0) {
            /* CUDA counts stay on the device: reading them here would
             * make the host wait every step */
            continue;
        }
        int64_t bad = counts[i].inf + counts[i].nan;
        PyObject *key = PyLong_FromVoidPtr((void *)items[i].param);
        if (key == NULL) {
            return -1;
        }
        PyObject *prev = PyDict_GetItemWithError(self->prev_nonfinite, key);
        if (prev == NULL && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        if (prev != NULL) {
            PyObject *ref = PyTuple_GET_ITEM(prev, 0);
            long long before = PyLong_AsLongLong(PyTuple_GET_ITEM(prev, 1));
            PyObject *obj = ref == Py_None ? NULL : PyWeakref_GetObject(ref);
            self->stale_seen = 1;
            if (obj != (PyObject *)items[i].grad || bad < before) {
                self->stale_all = 0;
            }
        }
        if (bad > 0) {
            PyObject *ref = PyWeakref_NewRef((PyObject *)items[i].grad, NULL);
            if (ref == NULL) {
                PyErr_Clear();
                ref = Py_NewRef(Py_None);
            }
            PyObject *v = Py_BuildValue("(NL)", ref, (long long)bad);
            int rc = v == NULL ? -1
                               : PyDict_SetItem(self->cur_nonfinite, key, v);
            Py_XDECREF(v);
            if (rc < 0) {
                Py_DECREF(key);
                return -1;
            }
        }
        Py_DECREF(key);
    }
    return 0;
}

/* What an unscale multiplies by, and where its found_inf starts. */
typedef enum {
    UNSCALE_BY_SCALE = 0,       /* 1 / scale: unscale_() */
    UNSCALE_CHECK,              /* 1: the check alone */
    UNSCALE_BY_TENSOR           /* a given inv_scale tensor */
} unscale_mode;

typedef struct {
    unscale_mode mode;
    AmpcTensorObject *inv;      /* UNSCALE_BY_TENSOR: 1 float32 element */
    AmpcTensorObject *found;    /* found_inf's start (1 float32 element), or
                                 * NULL for 0 */
} unscale_how;

/* t on dev: t itself, or a copy there (new reference). */
static AmpcTensorObject *
tensor_on(AmpcTensorObject *t, ampc_device dev)
{
    if (t->device.type == dev.type && t->device.index == dev.index) {
        return (AmpcTensorObject *)Py_NewRef(t);
    }
    PyObject *name = dev.type == AMPC_DEV_CUDA
                         ? PyUnicode_FromFormat("cuda:%d", (int)dev.index)
                         : PyUnicode_FromString("cpu");
    PyObject *moved = name ? PyObject_CallMethod((PyObject *)t, "to", "O",
                                                 name)
                           : NULL;
    Py_XDECREF(name);
    return (AmpcTensorObject *)moved;
}

/* One device's share of an unscale on the CPU: found (0-d float32, new)
 * gets its start and the kernel's verdict; counts (m host entries) are
 * filled; *inv_used is the multiplier. */
static int
unscale_group_cpu(AmpcGradScalerObject *self, AmpcTensorObject **batch,
                  Py_ssize_t m, const unscale_how *how,
                  AmpcTensorObject *found, ampc_amp_counts *counts,
                  float *inv_used)
{
    float inv = 1.0f, start = 0.0f;
    if (how->mode == UNSCALE_BY_SCALE) {
        float scale;
        if (read_scale(self, &scale) < 0) {
            return -1;
        }
        /* PyTorch: "FP32 division can be imprecise for certain compile
         * options, so we carry out the reciprocal in FP64." */
        inv = (float)(1.0 / (double)scale);
    }
    else if (how->mode == UNSCALE_BY_TENSOR &&
             read_scalar("GradScaler._unscale_grads_", how->inv, &inv) < 0) {
        return -1;
    }
    if (how->found != NULL &&
        read_scalar("GradScaler._unscale_grads_", how->found, &start) < 0) {
        return -1;
    }
    *(float *)found->data = start;
    *inv_used = inv;
    return ampc_amp_unscale_tensors(batch, m, inv, (float *)found->data,
                                    counts);
}

/* The same on a CUDA device: one fused launch, the multiplier read on the
 * device (the scale itself with AMPC_AMP_RECIPROCAL), found zeroed there
 * (or copied from how->found), counts left in dev_counts (m x 4 int64,
 * new, or NULL when not wanted).  Nothing waits for the GPU. */
static int
unscale_group_cuda(AmpcGradScalerObject *self, AmpcTensorObject **batch,
                   Py_ssize_t m, const unscale_how *how,
                   AmpcTensorObject *found, int want_counts,
                   AmpcTensorObject **dev_counts)
{
    ampc_device dev = batch[0]->device;
    AmpcTensorObject *inv = NULL;
    int flags = 0, rc = -1;
    *dev_counts = NULL;
    if (how->mode == UNSCALE_BY_SCALE) {
        inv = tensor_on(AMPC_TENSOR(self->scale), dev);
        flags |= AMPC_AMP_RECIPROCAL;
    }
    else if (how->mode == UNSCALE_BY_TENSOR) {
        inv = tensor_on(how->inv, dev);
    }
    else {
        flags |= AMPC_AMP_CHECK_ONLY;
    }
    if (how->mode != UNSCALE_CHECK && inv == NULL) {
        return -1;
    }
    if (how->found == NULL) {
        flags |= AMPC_AMP_ZERO_FOUND;
    }
    else {
        /* a 0-d view, so that a (1,)-shaped start copies into found */
        AmpcTensorObject *start = ampc_tensor_view(how->found, 0, NULL,
                                                   NULL, how->found->data);
        int bad = start == NULL || ampc_copy_into(found, start) < 0;
        Py_XDECREF(start);
        if (bad) {
            goto done;
        }
    }
    if (want_counts) {
        int64_t shape[2] = {(int64_t)m, 4};
        *dev_counts = ampc_tensor_empty(2, shape, AMPC_INT64, dev);
        if (*dev_counts == NULL) {
            goto done;
        }
    }
    rc = ampc_amp_unscale_tensors_cuda(
        batch, m, inv ? (const float *)inv->data : NULL, flags,
        (float *)found->data,
        *dev_counts ? (ampc_amp_counts *)(*dev_counts)->data : NULL);
    if (rc < 0) {
        Py_CLEAR(*dev_counts);
    }
done:
    Py_XDECREF(inv);
    return rc;
}

/* PyTorch's _unscale_grads_: every gradient of `optimizer` multiplied as
 * `how` says, one fused call per device; returns {device: found_inf},
 * each found_inf a new 0-d float32 tensor on its device.  `record`: keep
 * stats (on CUDA the counts stay on the device until stats() asks). */
static PyObject *
unscale_grads(AmpcGradScalerObject *self, PyObject *optimizer,
              const unscale_how *how, int allow_fp16, int record)
{
    Py_ssize_t n = 0;
    grad_item *items = collect_grads(optimizer, allow_fp16, &n);
    if (items == NULL) {
        return NULL;
    }
    size_t k1 = n > 0 ? (size_t)n : 1;
    PyObject *result = PyDict_New();
    PyObject *pending = PyList_New(0);      /* this call's device counts */
    ampc_amp_counts *counts = PyMem_Calloc(k1, sizeof(ampc_amp_counts));
    AmpcTensorObject **batch = PyMem_Calloc(k1, sizeof(AmpcTensorObject *));
    Py_ssize_t *where = PyMem_Calloc(k1, sizeof(Py_ssize_t));
    /* per gradient: its device counts (an index into pending, -1 when its
     * counts are on the host) and row there; whether it was multiplied */
    Py_ssize_t *on_device = PyMem_Calloc(k1, sizeof(Py_ssize_t));
    Py_ssize_t *row = PyMem_Calloc(k1, sizeof(Py_ssize_t));
    char *multiplied = PyMem_Calloc(k1, 1);
    char *done = PyMem_Calloc(k1, 1);
    ampc_amp_counts *bc = PyMem_Calloc(k1, sizeof(ampc_amp_counts));
    if (result == NULL || pending == NULL || counts == NULL ||
        batch == NULL || where == NULL || on_device == NULL || row == NULL ||
        multiplied == NULL || done == NULL || bc == NULL) {
        if (result != NULL && pending != NULL) {
            PyErr_NoMemory();
        }
        goto error;
    }

    /* group by device, first seen first (one group on a one-device run) */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (done[i]) {
            continue;
        }
        ampc_device dev = items[i].grad->device;
        int cuda = dev.type == AMPC_DEV_CUDA;
        Py_ssize_t m = 0;
        for (Py_ssize_t j = i; j < n; j++) {
            ampc_device d = items[j].grad->device;
            if (!done[j] && d.type == dev.type && d.index == dev.index) {
                done[j] = 1;
                where[m] = j;
                batch[m++] = items[j].grad;
            }
        }
        PyObject *key = PyObject_GetAttrString((PyObject *)batch[0],
                                               "device");
        AmpcTensorObject *found =
            key ? ampc_tensor_empty(0, NULL, AMPC_FLOAT32, dev) : NULL;
        AmpcTensorObject *dc = NULL;
        float inv = 1.0f;
        int rc = found == NULL ? -1 : 0;
        if (rc == 0 && cuda) {
            rc = unscale_group_cuda(self, batch, m, how, found, record, &dc);
        }
        else if (rc == 0) {
            memset(bc, 0, (size_t)m * sizeof(ampc_amp_counts));
            rc = unscale_group_cpu(self, batch, m, how, found, bc, &inv);
        }
        Py_ssize_t src = dc != NULL ? PyList_GET_SIZE(pending) : -1;
        if (rc < 0 ||
            (dc != NULL && PyList_Append(pending, (PyObject *)dc) < 0) ||
            PyDict_SetItem(result, key, (PyObject *)found) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(found);
            Py_XDECREF(dc);
            goto error;
        }
        Py_DECREF(key);
        Py_DECREF(found);
        Py_XDECREF(dc);
        for (Py_ssize_t k = 0; k < m; k++) {
            Py_ssize_t j = where[k];
            on_device[j] = src;
            row[j] = k;
            if (!cuda) {
                counts[j] = bc[k];
            }
            /* on CUDA the multiplier is not known on the host: unscale_()
             * multiplies, the check alone does not */
            multiplied[j] = cuda ? how->mode != UNSCALE_CHECK : inv != 1.0f;
        }
    }

    if (record) {
        if (self->new_iteration) {
            /* this iteration's inf/NaN become the ones to compare with */
            PyObject *fresh = PyDict_New();
            if (fresh == NULL ||
                PyList_SetSlice(self->dev_counts, 0,
                                PyList_GET_SIZE(self->dev_counts),
                                NULL) < 0) {
                Py_XDECREF(fresh);
                goto error;
            }
            Py_SETREF(self->prev_nonfinite, self->cur_nonfinite);
            self->cur_nonfinite = fresh;
            self->n_records = 0;
            self->opt_count = 0;
            self->stale_seen = 0;
            self->stale_all = 1;
            self->new_iteration = 0;
        }
        Py_ssize_t base = PyList_GET_SIZE(self->dev_counts);
        if (PyList_SetSlice(self->dev_counts, base, base, pending) < 0 ||
            records_reserve(self, n) < 0 ||
            track_nonfinite(self, items, counts, on_device, n) < 0) {
            goto error;
        }
        int rank = self->opt_count++;
        int all_bf16 = n > 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            scaler_record *r = &self->records[self->n_records++];
            r->opt = (uintptr_t)optimizer;
            r->param = items[i].param;
            r->opt_rank = rank;
            r->group = items[i].group;
            r->index = items[i].index;
            r->numel = ampc_numel(items[i].grad);
            r->c = counts[i];
            r->dev_src = on_device[i] >= 0 ? base + on_device[i] : -1;
            r->dev_row = row[i];
            all_bf16 &= items[i].grad->dtype == AMPC_BFLOAT16;
            if (multiplied[i]) {
                PyObject *ptr = PyLong_FromVoidPtr(items[i].grad->data);
                if (ptr == NULL || PySet_Add(self->unscaled, ptr) < 0) {
                    Py_XDECREF(ptr);
                    goto error;
                }
                Py_DECREF(ptr);
            }
        }
        if (all_bf16 && !(self->warned & WARN_BF16)) {
            self->warned |= WARN_BF16;
            if (warn(PyExc_UserWarning,
                     "GradScaler: every gradient is bfloat16, which has "
                     "float32's exponent range and does not underflow: "
                     "loss scaling is not needed (it is meant for float16); "
                     "drop the scaler or create it with enabled=False.") <
                0) {
                goto error;
            }
        }
    }
    goto done;
error:
    Py_CLEAR(result);
done:
    Py_XDECREF(pending);
    PyMem_Free(counts);
    PyMem_Free(batch);
    PyMem_Free(where);
    PyMem_Free(on_device);
    PyMem_Free(row);
    PyMem_Free(multiplied);
    PyMem_Free(done);
    PyMem_Free(bc);
    items_free(items, n);
    return result;
}

static PyObject *
scaler_unscale_(AmpcGradScalerObject *self, PyObject *optimizer)
{
    if (!self->is_enabled) {
        Py_RETURN_NONE;
    }
    if (check_scale_growth_tracker(self, "unscale_") < 0) {
        return NULL;
    }
    PyObject *st = opt_state(self, optimizer);
    if (st == NULL) {
        return NULL;
    }
    PyObject *stage = state_stage(st);
    if (stage == stage_unscaled) {
        PyErr_SetString(PyExc_RuntimeError,
                        "unscale_() has already been called on this "
                        "optimizer since the last update(). (ampc: call "
                        "unscale_ at most once per optimizer per iteration, "
                        "after all gradients are accumulated; step() knows "
                        "that it was unscaled)");
        Py_DECREF(st);
        return NULL;
    }
    if (stage == stage_stepped) {
        PyErr_SetString(PyExc_RuntimeError,
                        "unscale_() is being called after step(). (ampc: "
                        "call unscale_ before step(), or not at all: step() "
                        "unscales by itself)");
        Py_DECREF(st);
        return NULL;
    }
    unscale_how how = {UNSCALE_BY_SCALE, NULL, NULL};
    PyObject *found = unscale_grads(self, optimizer, &how, 0, 1);
    if (found == NULL ||
        PyDict_SetItemString(st, "found_inf_per_device", found) < 0 ||
        set_stage(st, stage_unscaled) < 0) {
        Py_XDECREF(found);
        Py_DECREF(st);
        return NULL;
    }
    Py_DECREF(found);
    Py_DECREF(st);
    Py_RETURN_NONE;
}

/* PyTorch's _check_inf_per_device: the inv_scale == 1 (check-only) pass,
 * which leaves every gradient bit as it was. */
static PyObject *
check_inf_per_device(AmpcGradScalerObject *self, PyObject *optimizer)
{
    if (check_scale_growth_tracker(self, "_check_inf_per_device") < 0) {
        return NULL;
    }
    unscale_how how = {UNSCALE_CHECK, NULL, NULL};
    PyObject *found = unscale_grads(self, optimizer, &how, 1, 1);
    if (found == NULL) {
        return NULL;
    }
    PyObject *st = opt_state(self, optimizer);
    if (st == NULL ||
        PyDict_SetItemString(st, "found_inf_per_device", found) < 0) {
        Py_XDECREF(st);
        Py_DECREF(found);
        return NULL;
    }
    Py_DECREF(st);
    return found;
}

static PyObject *
scaler_check_inf_per_device(AmpcGradScalerObject *self, PyObject *optimizer)
{
    return check_inf_per_device(self, optimizer);
}

/* _unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16) */
static PyObject *
scaler_unscale_grads_(AmpcGradScalerObject *self, PyObject *args)
{
    PyObject *optimizer, *inv, *found;
    int allow_fp16;
    if (!PyArg_ParseTuple(args, "OOOp:_unscale_grads_", &optimizer, &inv,
                          &found, &allow_fp16)) {
        return NULL;
    }
    if (!ampc_tensor_check(inv) || !ampc_tensor_check(found) ||
        AMPC_TENSOR(inv)->dtype != AMPC_FLOAT32 ||
        AMPC_TENSOR(found)->dtype != AMPC_FLOAT32 ||
        ampc_numel(AMPC_TENSOR(inv)) != 1 ||
        ampc_numel(AMPC_TENSOR(found)) != 1) {
        PyErr_SetString(PyExc_TypeError,
                        "_unscale_grads_(): inv_scale and found_inf must be "
                        "1-element float32 tensors");
        return NULL;
    }
    unscale_how how = {UNSCALE_BY_TENSOR, AMPC_TENSOR(inv),
                       AMPC_TENSOR(found)};
    return unscale_grads(self, optimizer, &how, allow_fp16, 0);
}

// ----------------------------------------------------------------------------
// step

/* The sum of a state's recorded found_inf values: a host read, free on
 * the CPU; on CUDA it waits for the GPU, once per device: the one host sync
 * of a step, as PyTorch's _maybe_opt_step (`v.item()` per device). */
static int
found_inf_sum(PyObject *found_per_device, double *sum)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    *sum = 0.0;
    while (PyDict_Next(found_per_device, &pos, &key, &value)) {
        if (!ampc_tensor_check(value)) {
            PyErr_SetString(PyExc_TypeError,
                            "GradScaler: found_inf must be a tensor");
            return -1;
        }
        AmpcTensorObject *t = AMPC_TENSOR(value);
        float v;
        if (!ampc_is_cuda(t)) {
            v = *(const float *)t->data;
        }
        else if (t->dtype != AMPC_FLOAT32 || ampc_numel(t) != 1) {
            PyErr_SetString(PyExc_TypeError,
                            "GradScaler: found_inf must be a 1-element "
                            "float32 tensor");
            return -1;
        }
        else if (ampc_read_to_host("GradScaler.step", t, &v, sizeof(v)) <
                 0) {
            return -1;
        }
        *sum += v;
    }
    return 0;
}

/* Every gradient of this optimizer was zero at its unscale although a loss
 * was scaled: zero_grad() probably ran between backward and step. */
static int
check_zero_grads(AmpcGradScalerObject *self, PyObject *optimizer)
{
    if ((self->warned & WARN_ZERO_GRADS) || !self->scaled) {
        return 0;
    }
    int64_t numel = 0, zero = 0;
    for (Py_ssize_t i = 0; i < self->n_records; i++) {
        if (self->records[i].opt == (uintptr_t)optimizer) {
            if (self->records[i].dev_src >= 0) {
                /* counts still on the device: not worth a host wait */
                return 0;
            }
            numel += self->records[i].numel;
            zero += self->records[i].c.zero;
        }
    }
    if (numel == 0 || zero != numel) {
        return 0;
    }
    self->warned |= WARN_ZERO_GRADS;
    return warn(PyExc_UserWarning,
                "GradScaler.step(): every gradient of this optimizer is "
                "zero although scaler.scale() ran in this iteration: was "
                "optimizer.zero_grad() called between "
                "scaler.scale(loss).backward() and scaler.step()?  Call "
                "zero_grad() at the start of the iteration (before the "
                "forward pass) instead.");
}

/* optimizer.step(*args, **kwargs) for an optimizer that handles the scale
 * itself (_step_supports_amp_scaling, e.g. fused Adam): PyTorch's §1.7.1. */
static PyObject *
step_amp_aware(AmpcGradScalerObject *self, PyObject *optimizer, PyObject *st,
               PyObject *args, PyObject *kwargs)
{
    PyObject *retval = NULL, *step = NULL, *kw = NULL, *sig = NULL;
    PyObject *params = NULL, *inspect = NULL;
    int has_kw;
    double cpu_found = -1.0;    /* a CPU scale's found_inf; -1: not read */
    step = PyObject_GetAttrString(optimizer, "step");
    inspect = step ? PyImport_ImportModule("inspect") : NULL;
    sig = inspect ? PyObject_CallMethod(inspect, "signature", "O", step)
                  : NULL;
    params = sig ? PyObject_GetAttrString(sig, "parameters") : NULL;
    PyObject *name = params ? PyUnicode_FromString("grad_scaler") : NULL;
    has_kw = name ? PySequence_Contains(params, name) : -1;
    Py_XDECREF(name);
    kw = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    if (has_kw < 0 || kw == NULL) {
        goto done;
    }
    if (has_kw) {
        if (warn(PyExc_FutureWarning,
                 "GradScaler is going to stop passing itself as a keyword "
                 "argument to the passed optimizer. In the near future "
                 "GradScaler registers `grad_scale: Tensor` and `found_inf: "
                 "Tensor` to the passed optimizer and let the optimizer use "
                 "them directly.") < 0 ||
            PyDict_SetItemString(kw, "grad_scaler", (PyObject *)self) < 0) {
            goto done;
        }
    }
    else {
        if (state_stage(st) == stage_ready) {
            PyObject *f = check_inf_per_device(self, optimizer);
            if (f == NULL) {
                goto done;
            }
            Py_DECREF(f);
        }
        /* found_inf: the sum over devices, started from int 0; on one
         * CUDA device, that device's found_inf itself (the same value,
         * with no element-wise launch) */
        PyObject *per_dev = PyDict_GetItemString(st, "found_inf_per_device");
        PyObject *found = NULL;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        if (per_dev != NULL && PyDict_Size(per_dev) == 1 &&
            PyDict_Next(per_dev, &pos, &key, &value) &&
            ampc_tensor_check(value) && ampc_is_cuda(AMPC_TENSOR(value))) {
            found = Py_NewRef(value);
        }
        else {
            found = PyLong_FromLong(0);
            pos = 0;
            while (found != NULL && per_dev != NULL &&
                   PyDict_Next(per_dev, &pos, &key, &value)) {
                Py_SETREF(found, PyNumber_Add(found, value));
            }
        }
        if (found == NULL) {
            goto done;
        }
        /* A CPU scale's found_inf costs nothing to read: the skip is
         * counted here, as the synced path counts it (a CUDA one is
         * counted on the device by update()). */
        if (ampc_tensor_check(found) && !ampc_is_cuda(AMPC_TENSOR(found))) {
            AmpcTensorObject *f = AMPC_TENSOR(found);
            cpu_found = ampc_scalar_as_double(f->dtype, f->data);
        }
        PyObject *grad_scale;
        if (state_stage(st) == stage_unscaled) {
            grad_scale = PyObject_GetAttrString(optimizer, "grad_scale");
            if (grad_scale == NULL &&
                PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                grad_scale = Py_NewRef(Py_None);
            }
        }
        else {
            PyObject *prev = PyObject_GetAttrString(optimizer, "grad_scale");
            if (prev == NULL &&
                PyErr_ExceptionMatches(PyExc_AttributeError) &&
                ampc_is_cuda(AMPC_TENSOR(self->scale))) {
                /* scale * 1 is the scale: hand the optimizer the device
                 * scale itself (no launch, and a stable address for a
                 * captured graph) */
                PyErr_Clear();
                grad_scale = Py_NewRef(self->scale);
            }
            else {
                if (prev == NULL &&
                    PyErr_ExceptionMatches(PyExc_AttributeError)) {
                    PyErr_Clear();
                    prev = PyLong_FromLong(1);
                }
                grad_scale = prev ? PyNumber_Multiply(self->scale, prev)
                                  : NULL;
                Py_XDECREF(prev);
            }
        }
        int rc = grad_scale == NULL ? -1
                 : PyObject_SetAttrString(optimizer, "grad_scale",
                                          grad_scale);
        Py_XDECREF(grad_scale);
        if (rc < 0 ||
            PyObject_SetAttrString(optimizer, "found_inf", found) < 0) {
            Py_DECREF(found);
            goto done;
        }
        Py_DECREF(found);
    }
    retval = PyObject_Call(step, args, kw);
    if (retval == NULL) {
        goto done;
    }
    self->steps++;
    if (ampc_is_cuda(AMPC_TENSOR(self->scale))) {
        /* the optimizer skipped on the device, or not: update() counts
         * the skips there (AMPC_AMP_STAT_FUSED_SKIPPED) */
        self->fused_steps++;
        self->last_fused = 1;
    }
    else if (cpu_found >= 0.0) {
        self->last_skipped = cpu_found != 0.0;
        self->skipped_steps += self->last_skipped;
    }
    if (set_stage(st, stage_stepped) < 0 ||
        (!has_kw &&
         (PyObject_DelAttrString(optimizer, "grad_scale") < 0 ||
          PyObject_DelAttrString(optimizer, "found_inf") < 0))) {
        Py_CLEAR(retval);
    }
done:
    Py_XDECREF(step);
    Py_XDECREF(inspect);
    Py_XDECREF(sig);
    Py_XDECREF(params);
    Py_XDECREF(kw);
    return retval;
}

static PyObject *
scaler_step(AmpcGradScalerObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *optimizer, *rest, *retval = NULL, *st = NULL, *kw = NULL;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs >= 1) {
        optimizer = PyTuple_GET_ITEM(args, 0);
        rest = PyTuple_GetSlice(args, 1, nargs);
        kw = kwargs ? Py_NewRef(kwargs) : NULL;
    }
    else {
        optimizer = kwargs ? PyDict_GetItemString(kwargs, "optimizer")
                           : NULL;
        if (optimizer == NULL) {
            PyErr_SetString(PyExc_TypeError,
                            "step() missing 1 required positional argument: "
                            "'optimizer'");
            return NULL;
        }
        rest = PyTuple_New(0);
        kw = PyDict_Copy(kwargs);
        if (kw != NULL && PyDict_DelItemString(kw, "optimizer") < 0) {
            Py_CLEAR(kw);
        }
    }
    Py_INCREF(optimizer);
    if (rest == NULL || (kwargs != NULL && kw == NULL)) {
        goto done;
    }

    if (!self->is_enabled) {
        PyObject *step = PyObject_GetAttrString(optimizer, "step");
        if (step != NULL) {
            retval = PyObject_Call(step, rest, kw);
            Py_DECREF(step);
            self->steps += retval != NULL;
        }
        goto done;
    }
    if (kw != NULL && PyDict_GetItemString(kw, "closure") != NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Closure use is not currently supported if "
                        "GradScaler is enabled.");
        goto done;
    }
    if (check_scale_growth_tracker(self, "step") < 0) {
        goto done;
    }
    st = opt_state(self, optimizer);
    if (st == NULL) {
        goto done;
    }
    if (state_stage(st) == stage_stepped) {
        PyErr_SetString(PyExc_RuntimeError,
                        "step() has already been called since the last "
                        "update(). (ampc: call scaler.update() once per "
                        "iteration, after the last scaler.step(), before "
                        "stepping again)");
        goto done;
    }
    if (!self->scaled && !(self->warned & WARN_UNSCALED_LOSS)) {
        self->warned |= WARN_UNSCALED_LOSS;
        if (warn(PyExc_UserWarning,
                 "GradScaler.step(): scaler.scale() was not called since "
                 "the last update(), so these gradients probably come from "
                 "loss.backward() on the unscaled loss and step() will "
                 "divide them by the scale.  Use "
                 "scaler.scale(loss).backward().") < 0) {
            goto done;
        }
    }

    int amp_aware = 0;
    PyObject *flag = PyObject_GetAttrString(optimizer,
                                            "_step_supports_amp_scaling");
    if (flag == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            goto done;
        }
        PyErr_Clear();
    }
    else {
        amp_aware = PyObject_IsTrue(flag);
        Py_DECREF(flag);
        if (amp_aware < 0) {
            goto done;
        }
    }
    if (amp_aware) {
        retval = step_amp_aware(self, optimizer, st, rest, kw);
        goto done;
    }

    if (state_stage(st) == stage_ready) {
        PyObject *r = scaler_unscale_(self, optimizer);
        if (r == NULL) {
            goto done;
        }
        Py_DECREF(r);
    }
    PyObject *per_dev = PyDict_GetItemString(st, "found_inf_per_device");
    if (per_dev == NULL || PyDict_Size(per_dev) == 0) {
        PyErr_SetString(PyExc_AssertionError,
                        "No inf checks were recorded for this optimizer. "
                        "(ampc: none of its parameters has a .grad: the "
                        "loss was probably not backpropagated through "
                        "scaler.scale(loss).backward(), or "
                        "optimizer.zero_grad() ran between backward() and "
                        "scaler.step(); call zero_grad() at the start of the "
                        "iteration instead)");
        goto done;
    }
    if (check_zero_grads(self, optimizer) < 0) {
        goto done;
    }
    double found;
    if (found_inf_sum(per_dev, &found) < 0) {
        goto done;
    }
    /* update() can then note this iteration's outcome without reading the
     * device again */
    self->host_found_states++;
    self->host_found_sum += found;
    self->last_fused = 0;
    if (found == 0.0) {
        PyObject *step = PyObject_GetAttrString(optimizer, "step");
        if (step == NULL) {
            goto done;
        }
        retval = PyObject_Call(step, rest, kw);
        Py_DECREF(step);
        if (retval == NULL) {
            goto done;
        }
        self->last_skipped = 0;
    }
    else {
        retval = Py_NewRef(Py_None);
        self->skipped_steps++;
        self->last_skipped = 1;
    }
    self->steps++;
    if (set_stage(st, stage_stepped) < 0) {
        Py_CLEAR(retval);
    }
done:
    Py_XDECREF(st);
    Py_XDECREF(kw);
    Py_XDECREF(rest);
    Py_DECREF(optimizer);
    return retval;
}

// ----------------------------------------------------------------------------
// update

/* Brings the records' CUDA counts to the host: one read per device counts
 * tensor (a host wait; only stats() and the skip diagnosis ask). */
static int
resolve_device_counts(AmpcGradScalerObject *self)
{
    Py_ssize_t nsrc = PyList_GET_SIZE(self->dev_counts);
    for (Py_ssize_t k = 0; k < nsrc; k++) {
        PyObject *item = PyList_GET_ITEM(self->dev_counts, k);
        if (item == Py_None) {
            continue;
        }
        AmpcTensorObject *t = AMPC_TENSOR(item);
        int64_t rows = t->shape[0];
        ampc_amp_counts *host = PyMem_Calloc(rows > 0 ? (size_t)rows : 1,
                                             sizeof(ampc_amp_counts));
        if (host == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (ampc_read_to_host("GradScaler.stats", t, host,
                              (size_t)rows * sizeof(ampc_amp_counts)) < 0) {
            PyMem_Free(host);
            return -1;
        }
        for (Py_ssize_t i = 0; i < self->n_records; i++) {
            scaler_record *r = &self->records[i];
            if (r->dev_src == k && r->dev_row < rows) {
                r->c = host[r->dev_row];
                r->dev_src = -1;
            }
        }
        PyMem_Free(host);
        if (PyList_SetItem(self->dev_counts, k, Py_NewRef(Py_None)) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The device skip statistics (AMPC_AMP_STAT_*; zeros before the first
 * CUDA update()): a host wait. */
static int
read_dev_stats(AmpcGradScalerObject *self, int64_t *out)
{
    memset(out, 0, AMPC_AMP_NUM_STATS * sizeof(int64_t));
    if (self->dev_stats == NULL) {
        return 0;
    }
    return ampc_read_to_host("GradScaler.stats",
                             AMPC_TENSOR(self->dev_stats), out,
                             AMPC_AMP_NUM_STATS * sizeof(int64_t));
}

/* Parameter labels for messages: the watched model's names, else
 * "param_group[g][i]" (prefixed by the optimizer when several). */
static PyObject *param_names(PyObject *model);
static PyObject *record_label(AmpcGradScalerObject *self, PyObject *names,
                              const scaler_record *r);

/* After warn_after_skips update()s in a row that backed off: a warning
 * that names the likely cause. */
static int
diagnose_skips(AmpcGradScalerObject *self)
{
    char which[256] = "some parameters";
    if (resolve_device_counts(self) < 0) {
        return -1;
    }
    PyObject *names = self->watched ? param_names(self->watched) : NULL;
    if (self->watched != NULL && names == NULL) {
        PyErr_Clear();
    }
    size_t pos = 0;
    int shown = 0;
    for (Py_ssize_t i = 0; i < self->n_records && shown < 3; i++) {
        const scaler_record *r = &self->records[i];
        if (r->c.inf + r->c.nan == 0) {
            continue;
        }
        PyObject *label = record_label(self, names, r);
        const char *s = label ? PyUnicode_AsUTF8(label) : NULL;
        if (s == NULL) {
            PyErr_Clear();
        }
        else if (pos < sizeof(which)) {
            pos += (size_t)snprintf(which + pos, sizeof(which) - pos, "%s%s",
                                    shown ? ", " : "", s);
            which[sizeof(which) - 1] = '\0';
            shown++;
        }
        Py_XDECREF(label);
    }
    Py_XDECREF(names);

    float scale;
    if (read_scale(self, &scale) < 0) {
        return -1;
    }
    char cause[640];
    if (self->loss_streak > 0) {
        snprintf(cause, sizeof(cause),
                 "the loss itself is inf or NaN (scaler.scale() received a "
                 "non-finite loss): loss scaling cannot fix a forward-pass "
                 "problem.  Check the inputs, the model and the loss (e.g. "
                 "log(0) or a division by zero), in float32 or with "
                 "autocast disabled.");
    }
    else if (self->stale_streak >= self->consecutive_skips - 1 &&
             self->stale_streak > 0) {
        snprintf(cause, sizeof(cause),
                 "the gradients are never cleared: the same gradient "
                 "tensors (%s) keep their inf/NaN from one iteration to the "
                 "next, so every scale fails.  Call optimizer.zero_grad() "
                 "at the start of every iteration.",
                 which);
    }
    else if (scale < 1.0f) {
        snprintf(cause, sizeof(cause),
                 "the gradients (%s) overflow even with a scale below 1, so "
                 "float16's range is too small for this model: use "
                 "bfloat16 autocast, which needs no GradScaler, or run the "
                 "overflowing layers in float32.",
                 which);
    }
    else {
        snprintf(cause, sizeof(cause),
                 "the gradients of %s are non-finite at every scale tried "
                 "(see scaler.stats()['overflow']): an op probably produces "
                 "inf/NaN whatever the scale (e.g. sqrt or log at 0, or a "
                 "division by zero).",
                 which);
    }
    char msg[1024];
    snprintf(msg, sizeof(msg),
             "GradScaler: the last %lld iterations were all skipped because "
             "of inf/NaN gradients (the scale is now %g).  Likely cause: %s",
             (long long)self->consecutive_skips, (double)scale, cause);
    return warn(PyExc_UserWarning, msg);
}

/* The skip telemetry of one update(): found_inf nonzero means backoff. */
static int
note_update(AmpcGradScalerObject *self, float found)
{
    if (found == 0.0f) {
        self->consecutive_skips = 0;
        self->loss_streak = 0;
        self->stale_streak = 0;
        self->warned &= ~WARN_SKIPS;
        return 0;
    }
    self->consecutive_skips++;
    self->loss_streak = self->loss_nonfinite ? self->loss_streak + 1 : 0;
    self->stale_streak = (self->stale_seen && self->stale_all)
                             ? self->stale_streak + 1
                             : 0;
    if (self->warn_after_skips > 0 &&
        self->consecutive_skips >= self->warn_after_skips &&
        !(self->warned & WARN_SKIPS)) {
        self->warned |= WARN_SKIPS;
        return diagnose_skips(self);
    }
    return 0;
}

static int update_from(AmpcGradScalerObject *self, PyObject *founds,
                       Py_ssize_t n_states);

static PyObject *
scaler_update(AmpcGradScalerObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"new_scale", NULL};
    PyObject *new_scale = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:update", kwlist,
                                     &new_scale)) {
        return NULL;
    }
    if (!self->is_enabled) {
        Py_RETURN_NONE;
    }
    if (check_scale_growth_tracker(self, "update") < 0) {
        return NULL;
    }
    AmpcTensorObject *scale = AMPC_TENSOR(self->scale);
    if (new_scale != Py_None) {
        if (PyFloat_Check(new_scale)) {
            if (write_scalar(scale, PyFloat_AS_DOUBLE(new_scale), 0) < 0) {
                return NULL;
            }
        }
        else {
            static const char *reason =
                "new_scale should be a float or a 1-element "
                "ampc.cuda.FloatTensor or ampc.FloatTensor with "
                "requires_grad=False.";
            PyObject *dev = PyObject_GetAttrString(new_scale, "device");
            PyObject *type = dev ? PyObject_GetAttrString(dev, "type") : NULL;
            Py_XDECREF(dev);
            if (type == NULL) {
                return NULL;
            }
            int same = PyObject_RichCompareBool(type, self->device, Py_EQ);
            Py_DECREF(type);
            if (same < 0) {
                return NULL;
            }
            if (!same || !ampc_tensor_check(new_scale) ||
                ampc_numel(AMPC_TENSOR(new_scale)) != 1 ||
                AMPC_TENSOR(new_scale)->requires_grad) {
                PyErr_SetString(PyExc_AssertionError, reason);
                return NULL;
            }
            AmpcTensorObject *src = AMPC_TENSOR(new_scale);
            if (!ampc_dtype_is_float(src->dtype) &&
                src->dtype != AMPC_INT64 && src->dtype != AMPC_BOOL) {
                PyErr_SetString(PyExc_AssertionError, reason);
                return NULL;
            }
            if (ampc_is_cuda(src) || ampc_is_cuda(scale)) {
                /* a device copy (with its cast): a 0-d view, so that any
                 * 1-element shape copies into the 0-d scale */
                AmpcTensorObject *v = ampc_tensor_view(src, 0, NULL, NULL,
                                                       src->data);
                int bad = v == NULL || ampc_copy_into(scale, v) < 0;
                Py_XDECREF(v);
                if (bad) {
                    return NULL;
                }
            }
            else {
                *(float *)scale->data =
                    (float)ampc_scalar_as_double(src->dtype, src->data);
            }
        }
        scale->storage->version++;
    }
    else {
        /* every recorded found_inf of every optimizer, summed into the
         * first (as PyTorch does) */
        PyObject *states = PyDict_Values(self->per_opt);
        if (states == NULL) {
            return NULL;
        }
        PyObject *founds = PyList_New(0);
        Py_ssize_t n_states = 0;    /* optimizers with a found_inf */
        for (Py_ssize_t i = 0;
             founds != NULL && i < PyList_GET_SIZE(states); i++) {
            PyObject *per_dev = PyDict_GetItemString(
                PyList_GET_ITEM(states, i), "found_inf_per_device");
            PyObject *key, *value;
            Py_ssize_t pos = 0;
            n_states += per_dev != NULL && PyDict_Size(per_dev) > 0;
            while (per_dev && PyDict_Next(per_dev, &pos, &key, &value)) {
                if (!ampc_tensor_check(value)) {
                    PyErr_SetString(PyExc_TypeError,
                                    "GradScaler.update(): found_inf must be "
                                    "a tensor");
                    Py_CLEAR(founds);
                    break;
                }
                if (PyList_Append(founds, value) < 0) {
                    Py_CLEAR(founds);
                    break;
                }
            }
        }
        Py_DECREF(states);
        if (founds == NULL) {
            return NULL;
        }
        if (PyList_GET_SIZE(founds) == 0) {
            Py_DECREF(founds);
            PyErr_SetString(PyExc_AssertionError,
                            "No inf checks were recorded prior to update. "
                            "(ampc: call scaler.step(optimizer), or "
                            "scaler.unscale_(optimizer), for each optimizer "
                            "before scaler.update(), once per iteration)");
            return NULL;
        }
        int rc = update_from(self, founds, n_states);
        Py_DECREF(founds);
        if (rc < 0) {
            return NULL;
        }
    }
    if (reset_iteration(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The CUDA update: every found_inf moved to the scale's device (those
 * already there are used in place, as PyTorch's .to() returns them), summed
 * into the first and the scale updated by one device thread, which also
 * keeps the skip statistics (dev_stats).  Nothing is read back. */
static int
update_cuda(AmpcGradScalerObject *self, PyObject *founds, double growth,
            double backoff, int64_t interval)
{
    static const char *fn = "GradScaler.update";
    AmpcTensorObject *scale = AMPC_TENSOR(self->scale);
    AmpcTensorObject *tracker = AMPC_TENSOR(self->growth_tracker);
    Py_ssize_t n = PyList_GET_SIZE(founds);
    PyObject *moved = PyList_New(n);
    float **ptrs = PyMem_Calloc((size_t)n, sizeof(float *));
    int rc = -1;
    if (moved == NULL || ptrs == NULL) {
        if (moved != NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    if (tracker->device.type != scale->device.type ||
        tracker->device.index != scale->device.index) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): the growth tracker and the scale must be on the "
                     "same device",
                     fn);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *f = AMPC_TENSOR(PyList_GET_ITEM(founds, i));
        if (f->dtype != AMPC_FLOAT32 || ampc_numel(f) != 1) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): found_inf must be a 1-element float32 "
                         "tensor",
                         fn);
            goto done;
        }
        AmpcTensorObject *m = tensor_on(f, scale->device);
        if (m == NULL) {
            goto done;
        }
        PyList_SET_ITEM(moved, i, (PyObject *)m);
        ptrs[i] = (float *)m->data;
    }
    if (ampc_cuda_enter(fn, scale->device) < 0) {
        goto done;
    }
    if (self->dev_stats != NULL &&
        (AMPC_TENSOR(self->dev_stats)->device.index != scale->device.index)) {
        Py_CLEAR(self->dev_stats);      /* the scale moved: start over */
    }
    if (self->dev_stats == NULL) {
        int64_t shape[1] = {AMPC_AMP_NUM_STATS};
        int64_t zeros[AMPC_AMP_NUM_STATS] = {0};
        AmpcTensorObject *st = ampc_tensor_empty(1, shape, AMPC_INT64,
                                                 scale->device);
        if (st == NULL) {
            goto done;
        }
        int code = ampc_cuda.memcpy(st->data, zeros, sizeof(zeros),
                                    AMPC_COPY_H2D);
        if (code != 0) {
            Py_DECREF(st);
            ampc_cuda_raise(fn, code);
            goto done;
        }
        self->dev_stats = (PyObject *)st;
    }
    int code = ampc_cuda.amp_update_scale(
        (float *)scale->data, (int64_t *)tracker->data, ptrs, (int)n, growth,
        backoff, interval, (int64_t *)AMPC_TENSOR(self->dev_stats)->data,
        self->fused_steps);
    if (code != 0) {
        ampc_cuda_raise(fn, code);
        goto done;
    }
    AMPC_TENSOR(PyList_GET_ITEM(moved, 0))->storage->version++;
    rc = 0;
done:
    Py_XDECREF(moved);
    PyMem_Free(ptrs);
    return rc;
}

/* update() without new_scale: founds (a list of at least one tensor) from
 * n_states optimizers, summed into the first as PyTorch does, then
 * _amp_update_scale_ and the skip telemetry. */
static int
update_from(AmpcGradScalerObject *self, PyObject *founds,
            Py_ssize_t n_states)
{
    AmpcTensorObject *scale = AMPC_TENSOR(self->scale);
    double growth = PyFloat_AsDouble(self->growth_factor);
    double backoff = growth == -1.0 && PyErr_Occurred()
                         ? -1.0
                         : PyFloat_AsDouble(self->backoff_factor);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (!PyLong_Check(self->growth_interval)) {
        PyErr_Format(PyExc_TypeError,
                     "_amp_update_scale_(): argument 'growth_interval' "
                     "(position 6) must be int, not %.100s",
                     Py_TYPE(self->growth_interval)->tp_name);
        return -1;
    }
    long long interval = PyLong_AsLongLong(self->growth_interval);
    if (interval == -1 && PyErr_Occurred()) {
        return -1;
    }
    AmpcTensorObject *tracker = AMPC_TENSOR(self->growth_tracker);
    if (ampc_is_cuda(scale)) {
        if (update_cuda(self, founds, growth, backoff,
                        (int64_t)interval) < 0) {
            return -1;
        }
        scale->storage->version++;
        tracker->storage->version++;
        /* the outcome is known on the host only when step() read every
         * optimizer's found_inf; else it stays in dev_stats */
        if (self->host_found_states == n_states &&
            note_update(self, (float)self->host_found_sum) < 0) {
            return -1;
        }
        return 0;
    }
    /* each moved to the scale's device first (PyTorch's .to(), which
     * returns the tensor itself when it is there already) */
    AmpcTensorObject *first = NULL;
    float combined = 0.0f;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(founds); i++) {
        AmpcTensorObject *f = tensor_on(
            AMPC_TENSOR(PyList_GET_ITEM(founds, i)), scale->device);
        if (f == NULL) {
            Py_XDECREF(first);
            return -1;
        }
        float v = *(const float *)f->data;
        if (i == 0) {
            first = f;
            combined = v;
        }
        else {
            combined += v;
            Py_DECREF(f);
        }
    }
    *(float *)first->data = combined;
    Py_DECREF(first);
    ampc_cpu.amp_update_scale((float *)scale->data,
                              (int64_t *)tracker->data, &combined,
                              growth, backoff, (int64_t)interval);
    scale->storage->version++;
    tracker->storage->version++;
    return note_update(self, combined);
}

// ----------------------------------------------------------------------------
// getters and setters (PyTorch's: plain reads and writes, no validation)

static PyObject *
scaler_get_scale_async(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(field_get(self, self->scale, "_scale"));
}

static PyObject *
get_scale(AmpcGradScalerObject *self)
{
    if (!self->is_enabled) {
        return PyFloat_FromDouble(1.0);
    }
    if (field_get(self, self->scale, "_scale") == NULL) {
        return NULL;
    }
    if (self->scale == Py_None) {
        return Py_XNewRef(field_get(self, self->init_scale, "_init_scale"));
    }
    float v;
    if (read_scale(self, &v) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble(v);
}

static PyObject *
get_growth_tracker(AmpcGradScalerObject *self)
{
    if (!self->is_enabled) {
        return PyLong_FromLong(0);
    }
    if (field_get(self, self->growth_tracker, "_growth_tracker") == NULL) {
        return NULL;
    }
    if (self->growth_tracker == Py_None) {
        return Py_XNewRef(field_get(self, self->init_growth_tracker,
                                    "_init_growth_tracker"));
    }
    AmpcTensorObject *t = AMPC_TENSOR(self->growth_tracker);
    int64_t v;
    if (!ampc_is_cuda(t)) {
        v = *(const int64_t *)t->data;
    }
    else if (ampc_read_to_host("GradScaler._get_growth_tracker", t, &v,
                               sizeof(v)) < 0) {
        return NULL;
    }
    return PyLong_FromLongLong(v);
}

static PyObject *
scaler_get_scale(AmpcGradScalerObject *self, PyObject *unused)
{
    return get_scale(self);
}

static PyObject *
scaler_get_growth_tracker(AmpcGradScalerObject *self, PyObject *unused)
{
    return get_growth_tracker(self);
}

static PyObject *
scaler_get_growth_factor(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(field_get(self, self->growth_factor, "_growth_factor"));
}

static PyObject *
scaler_set_growth_factor(AmpcGradScalerObject *self, PyObject *v)
{
    Py_XSETREF(self->growth_factor, Py_NewRef(v));
    Py_RETURN_NONE;
}

static PyObject *
scaler_get_backoff_factor(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(
        field_get(self, self->backoff_factor, "_backoff_factor"));
}

static PyObject *
scaler_set_backoff_factor(AmpcGradScalerObject *self, PyObject *v)
{
    Py_XSETREF(self->backoff_factor, Py_NewRef(v));
    Py_RETURN_NONE;
}

static PyObject *
scaler_get_growth_interval(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(
        field_get(self, self->growth_interval, "_growth_interval"));
}

static PyObject *
scaler_set_growth_interval(AmpcGradScalerObject *self, PyObject *v)
{
    Py_XSETREF(self->growth_interval, Py_NewRef(v));
    Py_RETURN_NONE;
}

static PyObject *
scaler_is_enabled(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_NewRef(self->enabled);
}

static PyObject *
scaler_found_inf_per_device(AmpcGradScalerObject *self, PyObject *optimizer)
{
    PyObject *st = opt_state(self, optimizer);
    if (st == NULL) {
        return NULL;
    }
    PyObject *f = PyDict_GetItemString(st, "found_inf_per_device");
    Py_XINCREF(f);
    Py_DECREF(st);
    return f;
}

static PyObject *
scaler_check_scale_growth_tracker(AmpcGradScalerObject *self, PyObject *arg)
{
    const char *fn = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (fn == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "_check_scale_growth_tracker(): funcname must be a "
                        "str");
        return NULL;
    }
    if (check_scale_growth_tracker(self, fn) < 0) {
        return NULL;
    }
    return PyTuple_Pack(2, self->scale, self->growth_tracker);
}

static PyObject *
scaler_lazy_init(AmpcGradScalerObject *self, PyObject *dev_obj)
{
    ampc_device dev;
    PyObject *s = PyObject_Str(dev_obj);
    if (s == NULL) {
        return NULL;
    }
    int rc = ampc_parse_device(s, &dev, "_lazy_init_scale_growth_tracker");
    Py_DECREF(s);
    if (rc < 0 || lazy_init(self, dev) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------
// state_dict, load_state_dict, pickling

static PyObject *
scaler_state_dict(AmpcGradScalerObject *self, PyObject *unused)
{
    if (!self->is_enabled) {
        return PyDict_New();
    }
    PyObject *scale = get_scale(self);
    PyObject *tracker = scale ? get_growth_tracker(self) : NULL;
    if (tracker == NULL ||
        field_get(self, self->growth_factor, "_growth_factor") == NULL ||
        field_get(self, self->backoff_factor, "_backoff_factor") == NULL ||
        field_get(self, self->growth_interval, "_growth_interval") == NULL) {
        Py_XDECREF(scale);
        Py_XDECREF(tracker);
        return NULL;
    }
    return Py_BuildValue("{sNsOsOsOsN}", "scale", scale, "growth_factor",
                         self->growth_factor, "backoff_factor",
                         self->backoff_factor, "growth_interval",
                         self->growth_interval, "_growth_tracker", tracker);
}

/* A loaded value written into a 0-d tensor (PyTorch's fill_). */
static int
fill_scalar(PyObject *tensor, PyObject *value)
{
    AmpcTensorObject *t = AMPC_TENSOR(tensor);
    if (t->dtype == AMPC_INT64) {
        int64_t v;
        if (as_i64(value, &v) < 0) {
            return -1;
        }
        if (write_scalar(t, 0.0, v) < 0) {
            return -1;
        }
    }
    else {
        double v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        if (write_scalar(t, v, 0) < 0) {
            return -1;
        }
    }
    t->storage->version++;
    return 0;
}

static PyObject *
scaler_load_state_dict(AmpcGradScalerObject *self, PyObject *sd)
{
    if (!self->is_enabled) {
        Py_RETURN_NONE;
    }
    Py_ssize_t len = PyObject_Length(sd);
    if (len < 0) {
        return NULL;
    }
    if (len == 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "The source state dict is empty, possibly because it "
                        "was saved from a disabled instance of GradScaler.");
        return NULL;
    }
    static const char *keys[] = {"scale", "growth_factor", "backoff_factor",
                                 "growth_interval", "_growth_tracker"};
    PyObject *v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = PyMapping_GetItemString(sd, keys[i]);
        if (v[i] == NULL) {
            for (int j = 0; j < i; j++) {
                Py_DECREF(v[j]);
            }
            return NULL;
        }
    }
    /* new references move into the fields */
    Py_XSETREF(self->init_scale, v[0]);
    Py_XSETREF(self->growth_factor, v[1]);
    Py_XSETREF(self->backoff_factor, v[2]);
    Py_XSETREF(self->growth_interval, v[3]);
    Py_XSETREF(self->init_growth_tracker, v[4]);
    if (is_init(self->scale) && fill_scalar(self->scale, v[0]) < 0) {
        return NULL;
    }
    if (is_init(self->growth_tracker) &&
        fill_scalar(self->growth_tracker, v[4]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* PyTorch pickles __dict__ with the scale and tracker turned back into
 * their init values, so the unpickled scaler re-creates them lazily. */
static PyObject *
scaler_getstate(AmpcGradScalerObject *self, PyObject *unused)
{
    PyObject *state = self->dict ? PyDict_Copy(self->dict) : PyDict_New();
    if (state == NULL) {
        return NULL;
    }
    if (PyDict_SetItemString(state, "_device", self->device) < 0 ||
        PyDict_SetItemString(state, "_enabled", self->enabled) < 0) {
        goto error;
    }
    struct {
        const char *name;
        PyObject *value;
    } fields[] = {
        {"_init_scale", self->init_scale},
        {"_scale", self->scale},
        {"_growth_factor", self->growth_factor},
        {"_backoff_factor", self->backoff_factor},
        {"_growth_interval", self->growth_interval},
        {"_init_growth_tracker", self->init_growth_tracker},
        {"_growth_tracker", self->growth_tracker},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i].value != NULL &&
            PyDict_SetItemString(state, fields[i].name, fields[i].value) <
                0) {
            goto error;
        }
    }
    /* the fused CUDA steps' skips, counted on the device, go in too */
    int64_t dev_stats[AMPC_AMP_NUM_STATS];
    if (read_dev_stats(self, dev_stats) < 0) {
        goto error;
    }
    PyObject *stats = Py_BuildValue(
        "{sLsLsL}", "steps", (long long)self->steps, "skipped_steps",
        (long long)(self->skipped_steps +
                    dev_stats[AMPC_AMP_STAT_FUSED_SKIPPED]),
        "warn_after_skips", (long long)self->warn_after_skips);
    if (stats == NULL ||
        PyDict_SetItemString(state, "_ampc_stats", stats) < 0) {
        Py_XDECREF(stats);
        goto error;
    }
    Py_DECREF(stats);
    if (self->is_enabled) {
        PyObject *empty = PyDict_New();
        if (empty == NULL ||
            PyDict_SetItemString(state, "_per_optimizer_states", empty) <
                0) {
            Py_XDECREF(empty);
            goto error;
        }
        Py_DECREF(empty);
        if (PyObject_Length(self->per_opt) != 0) {
            PyErr_SetString(PyExc_AssertionError,
                            "A GradScaler instance may only be pickled at "
                            "the beginning of an iteration, or at the end "
                            "after scaler.update().");
            goto error;
        }
        PyObject *s = get_scale(self);
        PyObject *g = s ? get_growth_tracker(self) : NULL;
        int rc = g == NULL ? -1 : 0;
        rc = rc ? rc : PyDict_SetItemString(state, "_init_scale", s);
        rc = rc ? rc : PyDict_SetItemString(state, "_init_growth_tracker", g);
        rc = rc ? rc : PyDict_SetItemString(state, "_scale", Py_None);
        rc = rc ? rc
                : PyDict_SetItemString(state, "_growth_tracker", Py_None);
        Py_XDECREF(s);
        Py_XDECREF(g);
        if (rc < 0) {
            goto error;
        }
    }
    return state;
error:
    Py_DECREF(state);
    return NULL;
}

static PyObject *
scaler_setstate(AmpcGradScalerObject *self, PyObject *state)
{
    if (!PyDict_Check(state)) {
        PyErr_SetString(PyExc_TypeError,
                        "GradScaler.__setstate__(): state must be a dict");
        return NULL;
    }
    struct {
        const char *name;
        PyObject **slot;
    } fields[] = {
        {"_device", &self->device},
        {"_enabled", &self->enabled},
        {"_init_scale", &self->init_scale},
        {"_scale", &self->scale},
        {"_growth_factor", &self->growth_factor},
        {"_backoff_factor", &self->backoff_factor},
        {"_growth_interval", &self->growth_interval},
        {"_init_growth_tracker", &self->init_growth_tracker},
        {"_growth_tracker", &self->growth_tracker},
    };
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(state, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        int known = 0;
        for (size_t i = 0; k && i < sizeof(fields) / sizeof(fields[0]);
             i++) {
            if (strcmp(k, fields[i].name) == 0) {
                if ((fields[i].slot == &self->scale &&
                     check_state_tensor(value, AMPC_FLOAT32, "_scale") < 0) ||
                    (fields[i].slot == &self->growth_tracker &&
                     check_state_tensor(value, AMPC_INT64,
                                        "_growth_tracker") < 0)) {
                    return NULL;
                }
                Py_XSETREF(*fields[i].slot, Py_NewRef(value));
                known = 1;
            }
        }
        if (k != NULL && strcmp(k, "_per_optimizer_states") == 0) {
            known = 1;      /* always empty when pickled; a fresh one */
        }
        if (k != NULL && strcmp(k, "_ampc_stats") == 0 &&
            PyDict_Check(value)) {
            PyObject *s = PyDict_GetItemString(value, "steps");
            PyObject *k2 = PyDict_GetItemString(value, "skipped_steps");
            PyObject *w = PyDict_GetItemString(value, "warn_after_skips");
            self->steps = s ? PyLong_AsLongLong(s) : 0;
            self->skipped_steps = k2 ? PyLong_AsLongLong(k2) : 0;
            self->warn_after_skips = w ? PyLong_AsLongLong(w) : 10;
            if (PyErr_Occurred()) {
                return NULL;
            }
            known = 1;
        }
        if (!known) {
            if (self->dict == NULL && (self->dict = PyDict_New()) == NULL) {
                return NULL;
            }
            if (PyDict_SetItem(self->dict, key, value) < 0) {
                return NULL;
            }
        }
    }
    int on = PyObject_IsTrue(self->enabled);
    if (on < 0) {
        return NULL;
    }
    self->is_enabled = on;
    if (reset_iteration(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------
// beyond PyTorch: stats() and watch()

/* {id(param): name} from model.named_parameters(). */
static PyObject *
param_names(PyObject *model)
{
    PyObject *it = PyObject_CallMethod(model, "named_parameters", NULL);
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    Py_XDECREF(it);
    if (iter == NULL) {
        return NULL;
    }
    PyObject *names = PyDict_New();
    PyObject *pair;
    while (names != NULL && (pair = PyIter_Next(iter)) != NULL) {
        PyObject *name = NULL, *param = NULL;
        if (!PyArg_ParseTuple(pair, "OO", &name, &param)) {
            Py_DECREF(pair);
            Py_CLEAR(names);
            break;
        }
        PyObject *key = PyLong_FromVoidPtr(param);
        if (key == NULL || PyDict_SetItem(names, key, name) < 0) {
            Py_XDECREF(key);
            Py_DECREF(pair);
            Py_CLEAR(names);
            break;
        }
        Py_DECREF(key);
        Py_DECREF(pair);
    }
    Py_DECREF(iter);
    if (PyErr_Occurred()) {
        Py_CLEAR(names);
    }
    return names;
}

static PyObject *
record_label(AmpcGradScalerObject *self, PyObject *names,
             const scaler_record *r)
{
    if (names != NULL) {
        PyObject *key = PyLong_FromVoidPtr((void *)r->param);
        if (key == NULL) {
            return NULL;
        }
        PyObject *name = PyDict_GetItemWithError(names, key);
        Py_DECREF(key);
        if (name != NULL) {
            return Py_NewRef(name);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    if (self->opt_count > 1) {
        return PyUnicode_FromFormat("optimizer[%d].param_group[%d][%zd]",
                                    r->opt_rank, r->group, r->index);
    }
    return PyUnicode_FromFormat("param_group[%d][%zd]", r->group, r->index);
}

static PyObject *
scaler_stats(AmpcGradScalerObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"model", NULL};
    PyObject *model = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:stats", kwlist,
                                     &model)) {
        return NULL;
    }
    if (model == Py_None) {
        model = self->watched;
    }
    int64_t dev_stats[AMPC_AMP_NUM_STATS];
    if (resolve_device_counts(self) < 0 ||
        read_dev_stats(self, dev_stats) < 0) {
        return NULL;
    }
    PyObject *names = model ? param_names(model) : NULL;
    if (model != NULL && names == NULL) {
        return NULL;
    }
    PyObject *overflow = PyDict_New();
    PyObject *underflow = PyDict_New();
    PyObject *result = NULL;
    if (overflow == NULL || underflow == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < self->n_records; i++) {
        const scaler_record *r = &self->records[i];
        PyObject *label = record_label(self, names, r);
        if (label == NULL) {
            goto done;
        }
        double frac = r->numel > 0 ? (double)(r->c.zero + r->c.subnormal) /
                                         (double)r->numel
                                   : 0.0;
        PyObject *f = PyFloat_FromDouble(frac);
        int rc = f == NULL ? -1 : PyDict_SetItem(underflow, label, f);
        Py_XDECREF(f);
        if (rc == 0 && r->c.inf + r->c.nan > 0) {
            PyObject *o = Py_BuildValue("{sLsL}", "inf", (long long)r->c.inf,
                                        "nan", (long long)r->c.nan);
            rc = o == NULL ? -1 : PyDict_SetItem(overflow, label, o);
            Py_XDECREF(o);
        }
        Py_DECREF(label);
        if (rc < 0) {
            goto done;
        }
    }
    PyObject *scale = get_scale(self);
    PyObject *tracker = scale ? get_growth_tracker(self) : NULL;
    if (tracker == NULL) {
        Py_XDECREF(scale);
        goto done;
    }
    /* fused CUDA steps skip on the device, which counted them */
    int last = self->last_fused ? dev_stats[AMPC_AMP_STAT_LAST_SKIPPED] != 0
                                : self->last_skipped;
    result = Py_BuildValue(
        "{sLsLsOsNsNsOsO}", "steps", (long long)self->steps, "skipped_steps",
        (long long)(self->skipped_steps +
                    dev_stats[AMPC_AMP_STAT_FUSED_SKIPPED]),
        "last_step_skipped", last ? Py_True : Py_False, "scale", scale,
        "growth_tracker", tracker, "overflow", overflow, "underflow",
        underflow);
done:
    Py_XDECREF(names);
    Py_XDECREF(overflow);
    Py_XDECREF(underflow);
    return result;
}

static PyObject *
scaler_watch(AmpcGradScalerObject *self, PyObject *model)
{
    if (model == Py_None) {
        Py_CLEAR(self->watched);
        Py_RETURN_NONE;
    }
    PyObject *np = PyObject_GetAttrString(model, "named_parameters");
    if (np == NULL || !PyCallable_Check(np)) {
        Py_XDECREF(np);
        PyErr_Format(PyExc_TypeError,
                     "GradScaler.watch(): expected a module with "
                     "named_parameters(), got %.100s",
                     Py_TYPE(model)->tp_name);
        return NULL;
    }
    Py_DECREF(np);
    Py_XSETREF(self->watched, Py_NewRef(model));
    return Py_NewRef(model);
}

int
ampc_grad_scaler_clip_pending(PyObject *grads)
{
    AmpcGradScalerObject *s = last_scaler;
    if (s == NULL || !s->is_enabled || !s->scaled || (s->warned & WARN_CLIP)) {
        return 0;
    }
    PyObject *seq = PySequence_Fast(grads, "grads must be a sequence");
    if (seq == NULL) {
        return -1;
    }
    int pending = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && !pending; i++) {
        PyObject *g = PySequence_Fast_GET_ITEM(seq, i);
        if (!ampc_tensor_check(g)) {
            continue;
        }
        PyObject *ptr = PyLong_FromVoidPtr(AMPC_TENSOR(g)->data);
        int in = ptr ? PySet_Contains(s->unscaled, ptr) : -1;
        Py_XDECREF(ptr);
        if (in < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (!in) {
            pending = 1;
            s->warned |= WARN_CLIP;
        }
    }
    Py_DECREF(seq);
    return pending;
}

// ----------------------------------------------------------------------------
// attributes

#define FIELD_GETSET(attr, member)                                          \
    static PyObject *scaler_attr_##member(AmpcGradScalerObject *self,       \
                                          void *closure)                    \
    {                                                                       \
        return Py_XNewRef(field_get(self, self->member, attr));             \
    }                                                                       \
    static int scaler_setattr_##member(AmpcGradScalerObject *self,          \
                                       PyObject *v, void *closure)          \
    {                                                                       \
        Py_XSETREF(self->member, Py_XNewRef(v));                            \
        return 0;                                                           \
    }

#define TENSOR_GETSET(attr, member, dt)                                     \
    static PyObject *scaler_attr_##member(AmpcGradScalerObject *self,       \
                                          void *closure)                    \
    {                                                                       \
        return Py_XNewRef(field_get(self, self->member, attr));             \
    }                                                                       \
    static int scaler_setattr_##member(AmpcGradScalerObject *self,          \
                                       PyObject *v, void *closure)          \
    {                                                                       \
        if (check_state_tensor(v, dt, attr) < 0) {                          \
            return -1;                                                      \
        }                                                                   \
        Py_XSETREF(self->member, Py_XNewRef(v));                            \
        return 0;                                                           \
    }

FIELD_GETSET("_device", device)
FIELD_GETSET("_init_scale", init_scale)
TENSOR_GETSET("_scale", scale, AMPC_FLOAT32)
FIELD_GETSET("_growth_factor", growth_factor)
FIELD_GETSET("_backoff_factor", backoff_factor)
FIELD_GETSET("_growth_interval", growth_interval)
FIELD_GETSET("_init_growth_tracker", init_growth_tracker)
TENSOR_GETSET("_growth_tracker", growth_tracker, AMPC_INT64)

#undef FIELD_GETSET
#undef TENSOR_GETSET

static PyObject *
scaler_attr_enabled(AmpcGradScalerObject *self, void *closure)
{
    return Py_NewRef(self->enabled);
}

static int
scaler_setattr_enabled(AmpcGradScalerObject *self, PyObject *v,
                       void *closure)
{
    int on = v == NULL ? 0 : PyObject_IsTrue(v);
    if (on < 0) {
        return -1;
    }
    Py_XSETREF(self->enabled, v ? Py_NewRef(v) : Py_NewRef(Py_False));
    self->is_enabled = on;
    return 0;
}

static PyObject *
scaler_attr_per_opt(AmpcGradScalerObject *self, void *closure)
{
    return Py_NewRef(self->per_opt);
}

static PyObject *
scaler_attr_warn_after(AmpcGradScalerObject *self, void *closure)
{
    return PyLong_FromLongLong(self->warn_after_skips);
}

static int
scaler_setattr_warn_after(AmpcGradScalerObject *self, PyObject *v,
                          void *closure)
{
    long long n = v == NULL ? -1 : PyLong_AsLongLong(v);
    if (n == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "GradScaler.warn_after_skips must be an int >= 0 (0 "
                        "turns the warning off)");
        return -1;
    }
    self->warn_after_skips = n;
    return 0;
}

#define GETSET(name, member)                                                \
    {name, (getter)scaler_attr_##member, (setter)scaler_setattr_##member,   \
     NULL, NULL}

static PyGetSetDef scaler_getset[] = {
    GETSET("_device", device),
    GETSET("_enabled", enabled),
    GETSET("_init_scale", init_scale),
    GETSET("_scale", scale),
    GETSET("_growth_factor", growth_factor),
    GETSET("_backoff_factor", backoff_factor),
    GETSET("_growth_interval", growth_interval),
    GETSET("_init_growth_tracker", init_growth_tracker),
    GETSET("_growth_tracker", growth_tracker),
    {"_per_optimizer_states", (getter)scaler_attr_per_opt, NULL,
     "id(optimizer) -> {'stage': OptState, 'found_inf_per_device': {...}}",
     NULL},
    {"warn_after_skips", (getter)scaler_attr_warn_after,
     (setter)scaler_setattr_warn_after,
     "warn after this many skipped iterations in a row (0: never); 10",
     NULL},
    {NULL},
};

#undef GETSET

static PyMemberDef scaler_members[] = {
    {"__dictoffset__", T_PYSSIZET,
     offsetof(AmpcGradScalerObject, dict), READONLY},
    {"__weaklistoffset__", T_PYSSIZET,
     offsetof(AmpcGradScalerObject, weakreflist), READONLY},
    {NULL},
};

static PyMethodDef scaler_methods[] = {
    {"scale", (PyCFunction)scaler_scale, METH_O,
     "scale(outputs): outputs * scale (a tensor, or nested lists/tuples and "
     "other iterables of tensors); outputs itself when disabled"},
    {"_apply_scale", (PyCFunction)scaler_apply_scale, METH_O, NULL},
    {"unscale_", (PyCFunction)scaler_unscale_, METH_O,
     "unscale_(optimizer): divides the optimizer's gradients by the scale "
     "in place, one fused pass that also checks for inf/NaN"},
    {"step", (PyCFunction)(void (*)(void))scaler_step,
     METH_VARARGS | METH_KEYWORDS,
     "step(optimizer, *args, **kwargs): unscale_ if not done yet, then "
     "optimizer.step(*args, **kwargs) unless a gradient was inf/NaN; "
     "returns optimizer.step's value (None when skipped)"},
    {"update", (PyCFunction)(void (*)(void))scaler_update,
     METH_VARARGS | METH_KEYWORDS,
     "update(new_scale=None): backs the scale off after inf/NaN, grows it "
     "after growth_interval clean steps, or sets new_scale"},
    {"get_scale", (PyCFunction)scaler_get_scale, METH_NOARGS,
     "the current scale as a Python float (1.0 when disabled)"},
    {"get_growth_factor", (PyCFunction)scaler_get_growth_factor, METH_NOARGS,
     "the growth factor"},
    {"set_growth_factor", (PyCFunction)scaler_set_growth_factor, METH_O,
     "set_growth_factor(new_factor)"},
    {"get_backoff_factor", (PyCFunction)scaler_get_backoff_factor,
     METH_NOARGS, "the backoff factor"},
    {"set_backoff_factor", (PyCFunction)scaler_set_backoff_factor, METH_O,
     "set_backoff_factor(new_factor)"},
    {"get_growth_interval", (PyCFunction)scaler_get_growth_interval,
     METH_NOARGS, "the growth interval"},
    {"set_growth_interval", (PyCFunction)scaler_set_growth_interval, METH_O,
     "set_growth_interval(new_interval)"},
    {"_get_growth_tracker", (PyCFunction)scaler_get_growth_tracker,
     METH_NOARGS, "the growth tracker as a Python int"},
    {"_get_scale_async", (PyCFunction)scaler_get_scale_async, METH_NOARGS,
     "the scale tensor, or None before the first scale()"},
    {"is_enabled", (PyCFunction)scaler_is_enabled, METH_NOARGS,
     "whether this scaler is enabled"},
    {"state_dict", (PyCFunction)scaler_state_dict, METH_NOARGS,
     "{'scale', 'growth_factor', 'backoff_factor', 'growth_interval', "
     "'_growth_tracker'} ({} when disabled)"},
    {"load_state_dict", (PyCFunction)scaler_load_state_dict, METH_O,
     "load_state_dict(state_dict)"},
    {"__getstate__", (PyCFunction)scaler_getstate, METH_NOARGS, NULL},
    {"__setstate__", (PyCFunction)scaler_setstate, METH_O, NULL},
    {"_unscale_grads_", (PyCFunction)scaler_unscale_grads_, METH_VARARGS,
     "_unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16) -> "
     "{device: found_inf}"},
    {"_check_inf_per_device", (PyCFunction)scaler_check_inf_per_device,
     METH_O, "the inf/NaN check of the optimizer's gradients, no unscale"},
    {"_found_inf_per_device", (PyCFunction)scaler_found_inf_per_device,
     METH_O, "{device: found_inf} recorded for the optimizer"},
    {"_check_scale_growth_tracker",
     (PyCFunction)scaler_check_scale_growth_tracker, METH_O, NULL},
    {"_lazy_init_scale_growth_tracker", (PyCFunction)scaler_lazy_init,
     METH_O, NULL},
    {"stats", (PyCFunction)(void (*)(void))scaler_stats,
     METH_VARARGS | METH_KEYWORDS,
     "stats(model=None) -> {'steps', 'skipped_steps', 'last_step_skipped', "
     "'scale', 'growth_tracker', 'overflow', 'underflow'}"},
    {"watch", (PyCFunction)scaler_watch, METH_O,
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
    {Py_tp_getset, scaler_getset},
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
    stage_ready = PyObject_GetAttrString(opt_state_enum, "READY");
    stage_unscaled = PyObject_GetAttrString(opt_state_enum, "UNSCALED");
    stage_stepped = PyObject_GetAttrString(opt_state_enum, "STEPPED");
    refresh_fn = PyCFunction_New(&refresh_def, NULL);
    PyObject *abc = PyImport_ImportModule("collections.abc");
    iterable_abc = abc ? PyObject_GetAttrString(abc, "Iterable") : NULL;
    Py_XDECREF(abc);
    if (stage_ready == NULL || stage_unscaled == NULL ||
        stage_stepped == NULL || refresh_fn == NULL || iterable_abc == NULL) {
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
