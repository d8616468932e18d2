/* grad_scaler_clip.c - GradScaler.clip_grad_norm_ (beyond PyTorch): the
 * recipe's `unscale_(optimizer)` then `clip_grad_norm_(params, max_norm)`
 * in two fused passes instead of three.  The first reads the scaled
 * gradients once for their norm, unscaling each tensor's norm before it
 * is rounded; the second multiplies every gradient by 1/scale times the
 * clip coefficient, checking for inf/NaN as unscale_ does.  For a power-
 * of-two scale (the default) the gradients and the norm are bit for bit
 * those of the two calls, unless a gradient underflows when unscaled
 * (then the fused product, rounded once, is the more accurate).  On CUDA
 * nothing waits for the GPU.
 */
#include "grad_scaler.h"

static const char *const fn = "GradScaler.clip_grad_norm_";

/* The norm type as clip_grad_norm_ takes it: a number or "inf". */
static int
parse_norm_type(PyObject *obj, double *p)
{
    if (obj == NULL) {
        *p = 2.0;
        return 0;
    }
    PyObject *f = PyNumber_Float(obj);
    if (f == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): norm_type must be a number or 'inf', got %R", fn,
                     obj);
        return -1;
    }
    *p = PyFloat_AS_DOUBLE(f);
    Py_DECREF(f);
    return 0;
}

/* The device every gradient is on, or RuntimeError: the norm is one
 * number for all of them. */
static int
one_device(PyObject *grads, ampc_device *dev)
{
    Py_ssize_t n = PyList_GET_SIZE(grads);
    for (Py_ssize_t i = 0; i < n; i++) {
        ampc_device d = AMPC_TENSOR(PyList_GET_ITEM(grads, i))->device;
        if (i == 0) {
            *dev = d;
        }
        else if (d.type != dev->type || d.index != dev->index) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): the optimizer's gradients are on more than "
                         "one device; call scaler.unscale_(optimizer) and "
                         "then ampc.nn.utils.clip_grad_norm_ instead",
                         fn);
            return -1;
        }
    }
    return 0;
}

/* The norm of grads, and grads multiplied by the clip multiplier; with
 * a scale (0-d float32 on the gradients' device) the norm is the unscaled
 * gradients' and the multiplier unscales too, through unscale_()'s own
 * path (records for stats(), found_inf, the UNSCALED state st). */
static PyObject *
clip(AmpcGradScalerObject *self, PyObject *optimizer, PyObject *st,
     PyObject *grads, double max_norm, double p, AmpcTensorObject *scale)
{
    AmpcTensorObject **ts = (AmpcTensorObject **)PySequence_Fast_ITEMS(grads);
    Py_ssize_t n = PyList_GET_SIZE(grads);
    AmpcTensorObject *norm = ampc_amp_total_norm(fn, ts, n, p, scale);
    AmpcTensorObject *m =
        norm ? ampc_amp_clip_multiplier(fn, norm, max_norm, scale) : NULL;
    int rc = -1;
    if (m != NULL) {
        rc = scale != NULL ? ampc_gs_unscale_with(self, optimizer, st, m)
                           : ampc_amp_multiply_by(fn, ts, n, m);
    }
    Py_XDECREF(m);
    if (rc < 0) {
        Py_XDECREF(norm);
        return NULL;
    }
    return (PyObject *)norm;
}

PyObject *
ampc_gs_clip_grad_norm_(AmpcGradScalerObject *self, PyObject *args,
                        PyObject *kwargs)
{
    static char *kwlist[] = {"optimizer", "max_norm", "norm_type", NULL};
    PyObject *optimizer, *norm_type = NULL;
    double max_norm, p;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Od|O:clip_grad_norm_",
                                     kwlist, &optimizer, &max_norm,
                                     &norm_type) ||
        parse_norm_type(norm_type, &p) < 0) {
        return NULL;
    }
    PyObject *st = NULL, *grads = NULL, *result = NULL;
    AmpcTensorObject *scale = NULL;
    /* a disabled scaler, or gradients unscale_() already unscaled: a plain
     * clip_grad_norm_ (so unscale_ then this works too) */
    int unscale = self->is_enabled;
    if (unscale) {
        if (ampc_gs_check_scale_growth_tracker(self, "clip_grad_norm_") < 0 ||
            (st = ampc_gs_opt_state(self, optimizer)) == NULL) {
            return NULL;
        }
        if (ampc_gs_state_stage(st) == ampc_gs_stage_stepped) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s() is being called after step(). (ampc: clip "
                         "after backward and before step(), once per "
                         "optimizer per iteration)",
                         fn);
            goto done;
        }
        unscale = ampc_gs_state_stage(st) != ampc_gs_stage_unscaled;
    }
    ampc_device dev = {AMPC_DEV_CPU, 0};
    grads = ampc_gs_grads_list(optimizer, !unscale);
    if (grads == NULL || one_device(grads, &dev) < 0) {
        goto done;
    }
    if (unscale && PyList_GET_SIZE(grads) > 0 &&
        (scale = ampc_gs_tensor_on(AMPC_TENSOR(self->scale), dev)) == NULL) {
        goto done;
    }
    if (unscale && PyList_GET_SIZE(grads) == 0) {
        /* nothing to clip: still the UNSCALED state unscale_ would leave */
        if (ampc_gs_unscale_with(self, optimizer, st, NULL) < 0) {
            goto done;
        }
        unscale = 0;
    }
    result = clip(self, optimizer, st, grads, max_norm, p,
                  unscale ? scale : NULL);
done:
    Py_XDECREF(scale);
    Py_XDECREF(grads);
    Py_XDECREF(st);
    return result;
}
