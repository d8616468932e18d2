/* grad_scaler_scale.c - GradScaler.scale() (split from grad_scaler.c,
 * which has the type): outputs * scale for a tensor or any nesting of
 * iterables of tensors, the lazy creation of the scale on the outputs'
 * device, and two checks on the way: a loss that is already inf/NaN (for
 * the many-skips diagnosis) and a scaler used under bfloat16 autocast.
 */
#include "grad_scaler.h"

#include "amp_math.h"

/* A scalar output with more elements than this is not checked for inf/NaN
 * by scale() (the check reads it; a loss has one element). */
#define LOSS_CHECK_MAX 64

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
            rc = ampc_gs_warn(PyExc_UserWarning,
                              "GradScaler is not needed with bfloat16 "
                              "autocast: bfloat16 has float32's exponent "
                              "range, so gradients do not underflow and loss "
                              "scaling only costs time.  Drop the scaler (or "
                              "create it with enabled=False); it is meant for "
                              "float16.");
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
    if (!ampc_gs_is_init(self->scale) &&
        ampc_gs_lazy_init(self, t->device) < 0) {
        return NULL;
    }
    if (check_bf16_autocast(self, t) < 0) {
        return NULL;
    }
    check_loss(self, t);
    self->scaled = 1;
    ampc_gs_last_scaler = self;
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

PyObject *
ampc_gs_apply_scale(AmpcGradScalerObject *self, PyObject *val)
{
    if (ampc_tensor_check(val)) {
        return scale_tensor(self, val);
    }
    int iterable = PyObject_IsInstance(val, ampc_gs_iterable_abc);
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

PyObject *
ampc_gs_scale(AmpcGradScalerObject *self, PyObject *outputs)
{
    if (!self->is_enabled) {
        return Py_NewRef(outputs);
    }
    return ampc_gs_apply_scale(self, outputs);
}
