/* grad_scaler_attrs.c - GradScaler's attributes (split from
 * grad_scaler.c, which has the type): PyTorch's private fields (_scale,
 * _growth_tracker, _enabled, ...), which scripts and tests read and write
 * directly, ampc's warn_after_skips, min_scale and max_scale, and the
 * methods that read and write the settings (get_scale(),
 * set_growth_factor(), ...: PyTorch's plain reads and writes) and a few
 * private helpers PyTorch's tests call.
 */
#include "grad_scaler.h"

#include <math.h>

// ----------------------------------------------------------------------------
// attributes

#define FIELD_GETSET(attr, member)                                          \
    static PyObject *scaler_attr_##member(AmpcGradScalerObject *self,       \
                                          void *closure)                    \
    {                                                                       \
        return Py_XNewRef(ampc_gs_field_get(self, self->member, attr));     \
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
        return Py_XNewRef(ampc_gs_field_get(self, self->member, attr));     \
    }                                                                       \
    static int scaler_setattr_##member(AmpcGradScalerObject *self,          \
                                       PyObject *v, void *closure)          \
    {                                                                       \
        if (ampc_gs_check_state_tensor(v, dt, attr) < 0) {                  \
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

int
ampc_gs_set_bounds(AmpcGradScalerObject *self, PyObject *lo, PyObject *hi,
                   const char *fn)
{
    double b[2] = {0.0, INFINITY};
    PyObject *v[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        if (v[i] == Py_None) {
            continue;
        }
        if (!PyFloat_Check(v[i]) && !PyLong_Check(v[i])) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): %s must be None or a number, not %.100s", fn,
                         i ? "max_scale" : "min_scale",
                         Py_TYPE(v[i])->tp_name);
            return -1;
        }
        b[i] = PyFloat_AsDouble(v[i]);
        if (b[i] == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        if (!(b[i] > 0.0) || isinf(b[i])) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): %s must be None or a finite number > 0, got "
                         "%R",
                         fn, i ? "max_scale" : "min_scale", v[i]);
            return -1;
        }
    }
    if (b[0] > b[1]) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): min_scale (%R) must not exceed max_scale (%R)",
                     fn, lo, hi);
        return -1;
    }
    self->min_scale = b[0];
    self->max_scale = b[1];
    return 0;
}

static PyObject *
bound_object(double v, double none)
{
    return v == none ? Py_NewRef(Py_None) : PyFloat_FromDouble(v);
}

static PyObject *
scaler_attr_min_scale(AmpcGradScalerObject *self, void *closure)
{
    return bound_object(self->min_scale, 0.0);
}

static int
scaler_setattr_min_scale(AmpcGradScalerObject *self, PyObject *v,
                         void *closure)
{
    PyObject *hi = bound_object(self->max_scale, INFINITY);
    int rc = hi == NULL ? -1
                        : ampc_gs_set_bounds(self, v ? v : Py_None, hi,
                                             "GradScaler.min_scale");
    Py_XDECREF(hi);
    return rc;
}

static PyObject *
scaler_attr_max_scale(AmpcGradScalerObject *self, void *closure)
{
    return bound_object(self->max_scale, INFINITY);
}

static int
scaler_setattr_max_scale(AmpcGradScalerObject *self, PyObject *v,
                         void *closure)
{
    PyObject *lo = bound_object(self->min_scale, 0.0);
    int rc = lo == NULL ? -1
                        : ampc_gs_set_bounds(self, lo, v ? v : Py_None,
                                             "GradScaler.max_scale");
    Py_XDECREF(lo);
    return rc;
}

#define GETSET(name, member)                                                \
    {name, (getter)scaler_attr_##member, (setter)scaler_setattr_##member,   \
     NULL, NULL}

PyGetSetDef ampc_gs_getset[] = {
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
    {"min_scale", (getter)scaler_attr_min_scale,
     (setter)scaler_setattr_min_scale,
     "update() keeps the scale at or above this (None: no floor; beyond "
     "PyTorch)",
     NULL},
    {"max_scale", (getter)scaler_attr_max_scale,
     (setter)scaler_setattr_max_scale,
     "update() keeps the scale at or below this (None: no cap; beyond "
     "PyTorch)",
     NULL},
    {"warn_after_skips", (getter)scaler_attr_warn_after,
     (setter)scaler_setattr_warn_after,
     "warn after this many skipped iterations in a row (0: never); 10",
     NULL},
    {NULL},
};

#undef GETSET

// ----------------------------------------------------------------------------
// getters and setters (PyTorch's: plain reads and writes, no validation)

PyObject *
ampc_gs_m_get_scale_async(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(ampc_gs_field_get(self, self->scale, "_scale"));
}

PyObject *
ampc_gs_get_scale(AmpcGradScalerObject *self)
{
    if (!self->is_enabled) {
        return PyFloat_FromDouble(1.0);
    }
    if (ampc_gs_field_get(self, self->scale, "_scale") == NULL) {
        return NULL;
    }
    if (self->scale == Py_None) {
        return Py_XNewRef(ampc_gs_field_get(self, self->init_scale,
                                            "_init_scale"));
    }
    float v;
    if (ampc_gs_read_scale(self, &v) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble(v);
}

PyObject *
ampc_gs_get_growth_tracker(AmpcGradScalerObject *self)
{
    if (!self->is_enabled) {
        return PyLong_FromLong(0);
    }
    if (ampc_gs_field_get(self, self->growth_tracker,
                          "_growth_tracker") == NULL) {
        return NULL;
    }
    if (self->growth_tracker == Py_None) {
        return Py_XNewRef(ampc_gs_field_get(self, self->init_growth_tracker,
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

PyObject *
ampc_gs_m_get_scale(AmpcGradScalerObject *self, PyObject *unused)
{
    return ampc_gs_get_scale(self);
}

PyObject *
ampc_gs_m_get_growth_tracker(AmpcGradScalerObject *self, PyObject *unused)
{
    return ampc_gs_get_growth_tracker(self);
}

PyObject *
ampc_gs_m_get_growth_factor(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(ampc_gs_field_get(self, self->growth_factor,
                                        "_growth_factor"));
}

PyObject *
ampc_gs_m_set_growth_factor(AmpcGradScalerObject *self, PyObject *v)
{
    Py_XSETREF(self->growth_factor, Py_NewRef(v));
    Py_RETURN_NONE;
}

PyObject *
ampc_gs_m_get_backoff_factor(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(
        ampc_gs_field_get(self, self->backoff_factor, "_backoff_factor"));
}

PyObject *
ampc_gs_m_set_backoff_factor(AmpcGradScalerObject *self, PyObject *v)
{
    Py_XSETREF(self->backoff_factor, Py_NewRef(v));
    Py_RETURN_NONE;
}

PyObject *
ampc_gs_m_get_growth_interval(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_XNewRef(
        ampc_gs_field_get(self, self->growth_interval, "_growth_interval"));
}

PyObject *
ampc_gs_m_set_growth_interval(AmpcGradScalerObject *self, PyObject *v)
{
    Py_XSETREF(self->growth_interval, Py_NewRef(v));
    Py_RETURN_NONE;
}

PyObject *
ampc_gs_m_is_enabled(AmpcGradScalerObject *self, PyObject *unused)
{
    return Py_NewRef(self->enabled);
}

PyObject *
ampc_gs_m_found_inf_per_device(AmpcGradScalerObject *self, PyObject *optimizer)
{
    PyObject *st = ampc_gs_opt_state(self, optimizer);
    if (st == NULL) {
        return NULL;
    }
    PyObject *f = PyDict_GetItemString(st, "found_inf_per_device");
    Py_XINCREF(f);
    Py_DECREF(st);
    return f;
}

PyObject *
ampc_gs_m_check_scale_growth_tracker(AmpcGradScalerObject *self, PyObject *arg)
{
    const char *fn = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (fn == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "_check_scale_growth_tracker(): funcname must be a "
                        "str");
        return NULL;
    }
    if (ampc_gs_check_scale_growth_tracker(self, fn) < 0) {
        return NULL;
    }
    return PyTuple_Pack(2, self->scale, self->growth_tracker);
}

PyObject *
ampc_gs_m_lazy_init(AmpcGradScalerObject *self, PyObject *dev_obj)
{
    ampc_device dev;
    PyObject *s = PyObject_Str(dev_obj);
    if (s == NULL) {
        return NULL;
    }
    int rc = ampc_parse_device(s, &dev, "_lazy_init_scale_growth_tracker");
    Py_DECREF(s);
    if (rc < 0 || ampc_gs_lazy_init(self, dev) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}
