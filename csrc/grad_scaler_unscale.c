/* grad_scaler_unscale.c - GradScaler's unscale_() (split from
 * grad_scaler.c, which has the type): collecting an optimizer's gradients,
 * the one fused unscale-and-check per device (CPU and CUDA) with its
 * per-tensor records for stats(), the READY -> UNSCALED step of the state
 * machine, _check_inf_per_device and _unscale_grads_.  step() is
 * grad_scaler_step.c.
 */
#include "grad_scaler.h"

#include <math.h>
#include <stdlib.h>

#include "amp_math.h"

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
AmpcTensorObject *
ampc_gs_tensor_on(AmpcTensorObject *t, ampc_device dev)
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
        if (ampc_gs_read_scale(self, &scale) < 0) {
            return -1;
        }
        inv = ampc_amp_inv_scale(scale);
    }
    else if (how->mode == UNSCALE_BY_TENSOR &&
             ampc_gs_read_scalar("GradScaler._unscale_grads_", how->inv,
                                 &inv) < 0) {
        return -1;
    }
    if (how->found != NULL &&
        ampc_gs_read_scalar("GradScaler._unscale_grads_", how->found,
                            &start) < 0) {
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
        inv = ampc_gs_tensor_on(AMPC_TENSOR(self->scale), dev);
        flags |= AMPC_AMP_RECIPROCAL;
    }
    else if (how->mode == UNSCALE_BY_TENSOR) {
        inv = ampc_gs_tensor_on(how->inv, dev);
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
            if (ampc_gs_warn(PyExc_UserWarning,
                             "GradScaler: every gradient is bfloat16, which "
                             "has float32's exponent range and does not "
                             "underflow: loss scaling is not needed (it is "
                             "meant for float16); drop the scaler or create "
                             "it with enabled=False.") <
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

PyObject *
ampc_gs_grads_list(PyObject *optimizer, int allow_fp16)
{
    Py_ssize_t n = 0;
    grad_item *items = collect_grads(optimizer, allow_fp16, &n);
    if (items == NULL) {
        return NULL;
    }
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        PyList_SET_ITEM(list, i, Py_NewRef(items[i].grad));
    }
    items_free(items, n);
    return list;
}

int
ampc_gs_check_unscale_stage(PyObject *st)
{
    PyObject *stage = ampc_gs_state_stage(st);
    if (stage == ampc_gs_stage_unscaled) {
        PyErr_SetString(PyExc_RuntimeError,
                        "unscale_() has already been called on this "
                        "optimizer since the last update(). (ampc: call "
                        "unscale_ at most once per optimizer per iteration, "
                        "after all gradients are accumulated; step() knows "
                        "that it was unscaled)");
        return -1;
    }
    if (stage == ampc_gs_stage_stepped) {
        PyErr_SetString(PyExc_RuntimeError,
                        "unscale_() is being called after step(). (ampc: "
                        "call unscale_ before step(), or not at all: step() "
                        "unscales by itself)");
        return -1;
    }
    return 0;
}

int
ampc_gs_unscale_with(AmpcGradScalerObject *self, PyObject *optimizer,
                     PyObject *st, AmpcTensorObject *inv)
{
    unscale_how how = {UNSCALE_BY_SCALE, NULL, NULL};
    if (inv != NULL) {
        how.mode = UNSCALE_BY_TENSOR;
        how.inv = inv;
    }
    PyObject *found = unscale_grads(self, optimizer, &how, 0, 1);
    int bad = found == NULL ||
              PyDict_SetItemString(st, "found_inf_per_device", found) < 0 ||
              ampc_gs_set_stage(st, ampc_gs_stage_unscaled) < 0;
    Py_XDECREF(found);
    return bad ? -1 : 0;
}

PyObject *
ampc_gs_unscale_(AmpcGradScalerObject *self, PyObject *optimizer)
{
    if (!self->is_enabled) {
        Py_RETURN_NONE;
    }
    if (ampc_gs_check_scale_growth_tracker(self, "unscale_") < 0) {
        return NULL;
    }
    PyObject *st = ampc_gs_opt_state(self, optimizer);
    if (st == NULL) {
        return NULL;
    }
    int bad = ampc_gs_check_unscale_stage(st) < 0 ||
              ampc_gs_unscale_with(self, optimizer, st, NULL) < 0;
    Py_DECREF(st);
    if (bad) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* PyTorch's _check_inf_per_device: the inv_scale == 1 (check-only) pass,
 * which leaves every gradient bit as it was. */
static PyObject *
check_inf_per_device(AmpcGradScalerObject *self, PyObject *optimizer)
{
    if (ampc_gs_check_scale_growth_tracker(self,
                                           "_check_inf_per_device") < 0) {
        return NULL;
    }
    unscale_how how = {UNSCALE_CHECK, NULL, NULL};
    PyObject *found = unscale_grads(self, optimizer, &how, 1, 1);
    if (found == NULL) {
        return NULL;
    }
    PyObject *st = ampc_gs_opt_state(self, optimizer);
    if (st == NULL ||
        PyDict_SetItemString(st, "found_inf_per_device", found) < 0) {
        Py_XDECREF(st);
        Py_DECREF(found);
        return NULL;
    }
    Py_DECREF(st);
    return found;
}

PyObject *
ampc_gs_check_inf_per_device(AmpcGradScalerObject *self, PyObject *optimizer)
{
    return check_inf_per_device(self, optimizer);
}

/* _unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16) */
PyObject *
ampc_gs_unscale_grads_(AmpcGradScalerObject *self, PyObject *args)
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
