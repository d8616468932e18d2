/* grad_scaler_update.c - GradScaler's update() and its telemetry (split
 * from grad_scaler.c, which has the type): the growth/backoff update on the
 * CPU and the CUDA device, the skip counts and the diagnosis after many
 * skipped steps, and the beyond-PyTorch stats(), watch() and the
 * clipping-scaled-gradients hint (ampc_grad_scaler_clip_pending).
 */
#include "grad_scaler.h"

#include <math.h>
#include <stdlib.h>

#include "amp_math.h"
#include "ops.h"

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
int
ampc_gs_read_dev_stats(AmpcGradScalerObject *self, int64_t *out)
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
    if (ampc_gs_read_scale(self, &scale) < 0) {
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
    else if (self->min_scale > 0.0 && scale <= self->min_scale) {
        snprintf(cause, sizeof(cause),
                 "the gradients (%s) overflow at every scale tried, and "
                 "the scale has reached its floor (min_scale=%g): if they "
                 "overflow there too, float16's range is too small for "
                 "this model at that scale, so lower min_scale, use "
                 "bfloat16 autocast (no GradScaler needed), or run the "
                 "overflowing layers in float32.",
                 which, self->min_scale);
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
    return ampc_gs_warn(PyExc_UserWarning, msg);
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

static int clamp_scale(AmpcGradScalerObject *self);
static int update_from(AmpcGradScalerObject *self, PyObject *founds,
                       Py_ssize_t n_states);

PyObject *
ampc_gs_update(AmpcGradScalerObject *self, PyObject *args, PyObject *kwds)
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
    if (ampc_gs_check_scale_growth_tracker(self, "update") < 0) {
        return NULL;
    }
    AmpcTensorObject *scale = AMPC_TENSOR(self->scale);
    if (new_scale != Py_None) {
        if (PyFloat_Check(new_scale)) {
            if (ampc_gs_write_scalar(scale, PyFloat_AS_DOUBLE(new_scale),
                                     0) < 0) {
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
    if (ampc_gs_reset_iteration(self) < 0) {
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
        AmpcTensorObject *m = ampc_gs_tensor_on(f, scale->device);
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
        int64_t zero = 0;
        AmpcTensorObject *st = ampc_tensor_empty(1, shape, AMPC_INT64,
                                                 scale->device);
        /* a fill kernel: allowed while a CUDA graph is being captured */
        if (st == NULL || ampc_device_fill(st, &zero, fn) < 0) {
            Py_XDECREF(st);
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

/* update()'s bounds (beyond PyTorch), applied to the new scale where it
 * lives: ampc's clamp (on CUDA two element-wise kernels, no wait; also
 * inside a CUDA graph capture). */
static int
clamp_scale(AmpcGradScalerObject *self)
{
    if (self->min_scale == 0.0 && isinf(self->max_scale)) {
        return 0;
    }
    PyObject *module = PyImport_ImportModule("ampc._C");
    PyObject *clamp = module ? PyObject_GetAttrString(module, "clamp") : NULL;
    Py_XDECREF(module);
    if (clamp == NULL) {
        return -1;
    }
    PyObject *lo = self->min_scale > 0.0 ? PyFloat_FromDouble(self->min_scale)
                                         : Py_NewRef(Py_None);
    PyObject *hi = isinf(self->max_scale) ? Py_NewRef(Py_None)
                                          : PyFloat_FromDouble(self->max_scale);
    PyObject *res = NULL;
    if (lo != NULL && hi != NULL) {
        res = PyObject_CallFunctionObjArgs(clamp, self->scale, lo, hi,
                                           self->scale, NULL);
    }
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_DECREF(clamp);
    Py_XDECREF(res);
    return res == NULL ? -1 : 0;
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
                        (int64_t)interval) < 0 ||
            clamp_scale(self) < 0) {
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
        AmpcTensorObject *f = ampc_gs_tensor_on(
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
    if (clamp_scale(self) < 0) {
        return -1;
    }
    scale->storage->version++;
    tracker->storage->version++;
    return note_update(self, combined);
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

PyObject *
ampc_gs_stats(AmpcGradScalerObject *self, PyObject *args, PyObject *kwds)
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
        ampc_gs_read_dev_stats(self, dev_stats) < 0) {
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
    PyObject *scale = ampc_gs_get_scale(self);
    PyObject *tracker = scale ? ampc_gs_get_growth_tracker(self) : NULL;
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

PyObject *
ampc_gs_watch(AmpcGradScalerObject *self, PyObject *model)
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
    AmpcGradScalerObject *s = ampc_gs_last_scaler;
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
