/* grad_scaler_step.c - GradScaler's step() (split from grad_scaler.c,
 * which has the type): the skip-on-inf decision from the found_inf of each
 * device (the one host sync of a step), the _step_supports_amp_scaling
 * (fused) path that hands the optimizer grad_scale and found_inf instead,
 * the zero-gradient check, and the UNSCALED -> STEPPED state change.  The
 * unscale it runs first is grad_scaler_unscale.c.
 */
#include "grad_scaler.h"

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
    return ampc_gs_warn(PyExc_UserWarning,
                        "GradScaler.step(): every gradient of this optimizer "
                        "is zero although scaler.scale() ran in this "
                        "iteration: was optimizer.zero_grad() called between "
                        "scaler.scale(loss).backward() and scaler.step()?  "
                        "Call zero_grad() at the start of the iteration "
                        "(before the forward pass) instead.");
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
        if (ampc_gs_warn(PyExc_FutureWarning,
                         "GradScaler is going to stop passing itself as a "
                         "keyword argument to the passed optimizer. In the "
                         "near future GradScaler registers `grad_scale: "
                         "Tensor` and `found_inf: Tensor` to the passed "
                         "optimizer and let the optimizer use them "
                         "directly.") < 0 ||
            PyDict_SetItemString(kw, "grad_scaler", (PyObject *)self) < 0) {
            goto done;
        }
    }
    else {
        if (ampc_gs_state_stage(st) == ampc_gs_stage_ready) {
            PyObject *f = ampc_gs_check_inf_per_device(self, optimizer);
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
            /* each moved to the scale's device first, as PyTorch's
             * sum(t.to(scale.device) ...): found_infs of two GPUs cannot
             * be added where they are */
            ampc_device sdev = AMPC_TENSOR(self->scale)->device;
            found = PyLong_FromLong(0);
            pos = 0;
            while (found != NULL && per_dev != NULL &&
                   PyDict_Next(per_dev, &pos, &key, &value)) {
                PyObject *v = ampc_tensor_check(value)
                                  ? (PyObject *)ampc_gs_tensor_on(
                                        AMPC_TENSOR(value), sdev)
                                  : Py_NewRef(value);
                Py_SETREF(found, v != NULL ? PyNumber_Add(found, v) : NULL);
                Py_XDECREF(v);
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
        if (ampc_gs_state_stage(st) == ampc_gs_stage_unscaled) {
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
    if (ampc_gs_set_stage(st, ampc_gs_stage_stepped) < 0 ||
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

PyObject *
ampc_gs_step(AmpcGradScalerObject *self, PyObject *args, PyObject *kwargs)
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
    if (ampc_gs_check_scale_growth_tracker(self, "step") < 0) {
        goto done;
    }
    st = ampc_gs_opt_state(self, optimizer);
    if (st == NULL) {
        goto done;
    }
    if (ampc_gs_state_stage(st) == ampc_gs_stage_stepped) {
        PyErr_SetString(PyExc_RuntimeError,
                        "step() has already been called since the last "
                        "update(). (ampc: call scaler.update() once per "
                        "iteration, after the last scaler.step(), before "
                        "stepping again)");
        goto done;
    }
    if (!self->scaled && !(self->warned & WARN_UNSCALED_LOSS)) {
        self->warned |= WARN_UNSCALED_LOSS;
        if (ampc_gs_warn(PyExc_UserWarning,
                         "GradScaler.step(): scaler.scale() was not called "
                         "since the last update(), so these gradients "
                         "probably come from loss.backward() on the unscaled "
                         "loss and step() will divide them by the scale.  Use "
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

    if (ampc_gs_state_stage(st) == ampc_gs_stage_ready) {
        PyObject *r = ampc_gs_unscale_(self, optimizer);
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
    /* lets an lr_scheduler's order warning say why optimizer.step() did
     * not run (ampc/optim/lr_scheduler.py) */
    if (PyObject_SetAttrString(optimizer, "_amp_step_skipped",
                               found != 0.0 ? Py_True : Py_False) < 0) {
        PyErr_Clear();          /* an optimizer that takes no attributes */
    }
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
    if (ampc_gs_set_stage(st, ampc_gs_stage_stepped) < 0) {
        Py_CLEAR(retval);
    }
done:
    Py_XDECREF(st);
    Py_XDECREF(kw);
    Py_XDECREF(rest);
    Py_DECREF(optimizer);
    return retval;
}
