/* grad_scaler_attrs.c - GradScaler's attributes (split from
 * grad_scaler.c, which has the type): PyTorch's private fields (_scale,
 * _growth_tracker, _enabled, ...), which scripts and tests read and write
 * directly, and ampc's warn_after_skips.
 */
#include "grad_scaler.h"

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
    {"warn_after_skips", (getter)scaler_attr_warn_after,
     (setter)scaler_setattr_warn_after,
     "warn after this many skipped iterations in a row (0: never); 10",
     NULL},
    {NULL},
};

#undef GETSET
