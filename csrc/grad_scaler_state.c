/* grad_scaler_state.c - GradScaler's serialisation (split from
 * grad_scaler.c, which has the type): state_dict(), load_state_dict(),
 * and pickling (__getstate__/__setstate__) as in PyTorch.
 */
#include "grad_scaler.h"

#include <math.h>
#include <stdlib.h>

#include "amp_math.h"

// ----------------------------------------------------------------------------
// state_dict, load_state_dict, pickling

/* The bounds that are set, under the given keys of dict d. */
static int
bounds_into(AmpcGradScalerObject *self, PyObject *d, const char *lo_key,
            const char *hi_key)
{
    double v[2] = {self->min_scale, self->max_scale};
    int set[2] = {self->min_scale > 0.0, !isinf(self->max_scale)};
    const char *keys[2] = {lo_key, hi_key};
    for (int i = 0; i < 2; i++) {
        PyObject *f = set[i] ? PyFloat_FromDouble(v[i]) : NULL;
        if (set[i] && (f == NULL || PyDict_SetItemString(d, keys[i], f) < 0)) {
            Py_XDECREF(f);
            return -1;
        }
        Py_XDECREF(f);
    }
    return 0;
}

/* The bounds under the given keys of mapping m; an absent key keeps the
 * current bound (a state dict from PyTorch, or from an unbounded scaler,
 * leaves the constructor's guardrail in place). */
static int
bounds_from(AmpcGradScalerObject *self, PyObject *m, const char *lo_key,
            const char *hi_key, const char *fn)
{
    double now[2] = {self->min_scale, self->max_scale};
    double none[2] = {0.0, INFINITY};
    const char *keys[2] = {lo_key, hi_key};
    PyObject *v[2] = {NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (PyMapping_HasKeyString(m, keys[i])) {
            v[i] = PyMapping_GetItemString(m, keys[i]);
        }
        else {
            v[i] = now[i] == none[i] ? Py_NewRef(Py_None)
                                     : PyFloat_FromDouble(now[i]);
        }
        rc = v[i] == NULL ? -1 : 0;
    }
    if (rc == 0) {
        rc = ampc_gs_set_bounds(self, v[0], v[1], fn);
    }
    Py_XDECREF(v[0]);
    Py_XDECREF(v[1]);
    return rc;
}

PyObject *
ampc_gs_state_dict(AmpcGradScalerObject *self, PyObject *unused)
{
    if (!self->is_enabled) {
        return PyDict_New();
    }
    PyObject *scale = ampc_gs_get_scale(self);
    PyObject *tracker = scale ? ampc_gs_get_growth_tracker(self) : NULL;
    if (tracker == NULL ||
        ampc_gs_field_get(self, self->growth_factor,
                          "_growth_factor") == NULL ||
        ampc_gs_field_get(self, self->backoff_factor,
                          "_backoff_factor") == NULL ||
        ampc_gs_field_get(self, self->growth_interval,
                          "_growth_interval") == NULL) {
        Py_XDECREF(scale);
        Py_XDECREF(tracker);
        return NULL;
    }
    PyObject *sd = Py_BuildValue(
        "{sNsOsOsOsN}", "scale", scale, "growth_factor", self->growth_factor,
        "backoff_factor", self->backoff_factor, "growth_interval",
        self->growth_interval, "_growth_tracker", tracker);
    /* the bounds (beyond PyTorch) only when set: PyTorch's keys otherwise */
    if (sd != NULL && bounds_into(self, sd, "min_scale", "max_scale") < 0) {
        Py_CLEAR(sd);
    }
    return sd;
}

/* A loaded value written into a 0-d tensor (PyTorch's fill_). */
static int
fill_scalar(PyObject *tensor, PyObject *value)
{
    AmpcTensorObject *t = AMPC_TENSOR(tensor);
    if (t->dtype == AMPC_INT64) {
        int64_t v;
        if (ampc_gs_as_i64(value, &v) < 0) {
            return -1;
        }
        if (ampc_gs_write_scalar(t, 0.0, v) < 0) {
            return -1;
        }
    }
    else {
        double v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        if (ampc_gs_write_scalar(t, v, 0) < 0) {
            return -1;
        }
    }
    t->storage->version++;
    return 0;
}

PyObject *
ampc_gs_load_state_dict(AmpcGradScalerObject *self, PyObject *sd)
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
    if (bounds_from(self, sd, "min_scale", "max_scale",
                    "GradScaler.load_state_dict") < 0) {
        for (int i = 0; i < 5; i++) {
            Py_DECREF(v[i]);
        }
        return NULL;
    }
    /* new references move into the fields */
    Py_XSETREF(self->init_scale, v[0]);
    Py_XSETREF(self->growth_factor, v[1]);
    Py_XSETREF(self->backoff_factor, v[2]);
    Py_XSETREF(self->growth_interval, v[3]);
    Py_XSETREF(self->init_growth_tracker, v[4]);
    if (ampc_gs_is_init(self->scale) && fill_scalar(self->scale, v[0]) < 0) {
        return NULL;
    }
    if (ampc_gs_is_init(self->growth_tracker) &&
        fill_scalar(self->growth_tracker, v[4]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* PyTorch pickles __dict__ with the scale and tracker turned back into
 * their init values, so the unpickled scaler re-creates them lazily. */
PyObject *
ampc_gs_getstate(AmpcGradScalerObject *self, PyObject *unused)
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
    if (ampc_gs_read_dev_stats(self, dev_stats) < 0) {
        goto error;
    }
    PyObject *stats = Py_BuildValue(
        "{sLsLsL}", "steps", (long long)self->steps, "skipped_steps",
        (long long)(self->skipped_steps +
                    dev_stats[AMPC_AMP_STAT_FUSED_SKIPPED]),
        "warn_after_skips", (long long)self->warn_after_skips);
    if (stats == NULL ||
        bounds_into(self, stats, "min_scale", "max_scale") < 0 ||
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
        PyObject *s = ampc_gs_get_scale(self);
        PyObject *g = s ? ampc_gs_get_growth_tracker(self) : NULL;
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

PyObject *
ampc_gs_setstate(AmpcGradScalerObject *self, PyObject *state)
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
                     ampc_gs_check_state_tensor(value, AMPC_FLOAT32,
                                                "_scale") < 0) ||
                    (fields[i].slot == &self->growth_tracker &&
                     ampc_gs_check_state_tensor(value, AMPC_INT64,
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
            if (PyErr_Occurred() ||
                bounds_from(self, value, "min_scale", "max_scale",
                            "GradScaler.__setstate__") < 0) {
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
    if (ampc_gs_reset_iteration(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}
