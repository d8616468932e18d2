/* grad_norm_ops.c - the two passes of clip_grad_norm_ in ampc._C:
 * _grad_norm (the norm of every gradient in one fused call) and
 * _clip_grads_with_norm_ (the scaling), and ampc_amp_norm_tensors, the CPU
 * norm GradScaler's telemetry uses.  On CUDA the norm and the clip
 * coefficient stay on the device: no host wait.
 */
#include "ampc.h"

#include <math.h>

#include "amp_ops.h"
#include "amp_reduce.h"

// ----------------------------------------------------------------------------
// the CPU norm (also GradScaler's)

int
ampc_amp_norm_tensors(AmpcTensorObject *const *ts, Py_ssize_t n, double p,
                      double *acc)
{
    ampc_amp_batch b;
    if (ampc_amp_batch_init(&b, ts, n) < 0) {
        return -1;
    }
    ampc_tensor_list l = {n, b.data, b.numel, b.dtype};
    if (b.total >= AMPC_AMP_RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.grad_norm(&l, p, acc);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.grad_norm(&l, p, acc);
    }
    ampc_amp_batch_free(&b);
    return 0;
}

// ----------------------------------------------------------------------------
// clip_grad_norm_: the norm, then the scaling

/* The total norm on the device: one slot call over the gradients (dense
 * copies of non-dense ones), written into out; no host wait. */
static int
grad_norm_cuda(const char *fn, AmpcTensorObject *const *ts, Py_ssize_t n,
               double p, AmpcTensorObject *out)
{
    if (ampc_cuda_enter(fn, out->device) < 0) {
        return -1;
    }
    ampc_amp_batch b;
    if (ampc_amp_batch_init(&b, ts, n) < 0) {
        return -1;
    }
    ampc_tensor_list l = {n, b.data, b.numel, b.dtype};
    int rc = ampc_cuda.grad_norm(&l, p, out->dtype, out->data);
    ampc_amp_batch_free(&b);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    return 0;
}

/* _grad_norm(grads, norm_type) -> 0-d tensor: PyTorch's _get_total_norm,
 * i.e. the norm of the per-tensor norms, each rounded to its tensor's
 * dtype, the total in the promoted dtype, on the gradients' device.  One
 * fused kernel call reads every gradient once; the arithmetic after it is
 * amp_reduce.h's, on the CPU here and on the GPU in cuda/amp.cu. */
static PyObject *
op_grad_norm(PyObject *module, PyObject *args)
{
    static const char *fn = "_grad_norm";
    PyObject *grads_obj;
    double p;
    if (!PyArg_ParseTuple(args, "Od:_grad_norm", &grads_obj, &p)) {
        return NULL;
    }
    PyObject *seq = ampc_amp_tensor_seq(fn, grads_obj);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    double *acc = NULL;
    AmpcTensorObject *out = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    AmpcTensorObject **ts = (AmpcTensorObject **)PySequence_Fast_ITEMS(seq);
    ampc_device dev = {AMPC_DEV_CPU, 0};
    ampc_dtype out_dt = AMPC_FLOAT32;
    if (ampc_amp_check_grads("linalg_vector_norm", "grads", seq,
                    ampc_amp_op_device_type(NULL, 0, seq)) < 0) {
        goto done;
    }
    if (n > 0) {
        dev = ts[0]->device;
        out_dt = ts[0]->dtype;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out_dt = ampc_promote(out_dt, ts[i]->dtype);
        if (isinf(p) && ampc_numel(ts[i]) == 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "linalg.vector_norm cannot compute the %s norm on "
                         "an empty tensor because the operation does not "
                         "have an identity",
                         p > 0 ? "inf" : "-inf");
            goto done;
        }
    }
    out = ampc_tensor_empty(0, NULL, out_dt, dev);
    if (out == NULL) {
        goto done;
    }
    if (n > 0 && dev.type == AMPC_DEV_CUDA) {
        if (grad_norm_cuda(fn, ts, n, p, out) == 0) {
            result = Py_NewRef(out);
        }
        goto done;
    }
    acc = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(double));
    if (acc == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (n > 0 && ampc_amp_norm_tensors(ts, n, p, acc) < 0) {
        goto done;
    }
    /* the norm of the stacked per-tensor norms */
    double total = ampc_norm_identity(p);
    for (Py_ssize_t i = 0; i < n; i++) {
        double norm = ampc_norm_of_tensor(ts[i]->dtype, p, acc[i]);
        total = ampc_norm_merge(p, total, ampc_norm_term(p, norm));
    }
    ampc_store_f64(out_dt, out->data,
                   n > 0 ? ampc_norm_finish(p, total) : 0.0);
    result = Py_NewRef(out);
done:
    Py_XDECREF(out);
    PyMem_Free(acc);
    Py_DECREF(seq);
    return result;
}

/* The CUDA scaling: the coefficient computed on the device from the
 * device norm, then the fused pass with it as inv_scale (which writes
 * nothing when it is 1). */
static int
clip_cuda(const char *fn, AmpcTensorObject *const *ts, Py_ssize_t n,
          AmpcTensorObject *norm, double max_norm)
{
    AmpcTensorObject *coef = NULL, *unused = NULL;
    int rc = -1;
    if (ampc_amp_check_same_device(ts[0]->device, norm) < 0 ||
        ampc_cuda_enter(fn, norm->device) < 0) {
        return -1;
    }
    coef = ampc_tensor_empty(0, NULL, AMPC_FLOAT32, norm->device);
    unused = coef ? ampc_tensor_empty(0, NULL, AMPC_FLOAT32, norm->device)
                  : NULL;
    if (unused == NULL) {
        goto done;
    }
    int code = ampc_cuda.clip_coef(norm->data, norm->dtype, max_norm,
                                   (float *)coef->data);
    if (code != 0) {
        ampc_cuda_raise(fn, code);
        goto done;
    }
    rc = ampc_amp_unscale_tensors_cuda(ts, n, (const float *)coef->data, 0,
                                       (float *)unused->data, NULL);
done:
    Py_XDECREF(coef);
    Py_XDECREF(unused);
    return rc;
}

/* _clip_grads_with_norm_(grads, max_norm, total_norm): grads *= coef in
 * one fused pass, and on the CPU no pass at all when coef is 1 (PyTorch
 * multiplies by 1.0 anyway, which changes nothing).  A NaN or inf norm
 * gives a NaN or 0 coefficient, as in PyTorch (amp_reduce.h
 * ampc_clip_coef). */
static PyObject *
op_clip_grads_with_norm_(PyObject *module, PyObject *args)
{
    static const char *fn = "_clip_grads_with_norm_";
    PyObject *grads_obj, *norm_obj;
    double max_norm;
    if (!PyArg_ParseTuple(args, "OdO:_clip_grads_with_norm_", &grads_obj,
                          &max_norm, &norm_obj)) {
        return NULL;
    }
    if (ampc_amp_arg_tensor(fn, "total_norm", 3, norm_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *norm = AMPC_TENSOR(norm_obj);
    if (ampc_numel(norm) != 1 || !ampc_dtype_is_float(norm->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): total_norm must be a 1-element float tensor",
                     fn);
        return NULL;
    }
    PyObject *seq = ampc_amp_tensor_seq(fn, grads_obj);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    AmpcTensorObject **ts = (AmpcTensorObject **)PySequence_Fast_ITEMS(seq);
    int type = ampc_amp_op_device_type(&norm, 1, seq);
    if (ampc_amp_check_grads("mul_", "grads", seq, type) < 0) {
        goto error;
    }
    if (type == AMPC_DEV_CUDA) {
        if (n > 0 && clip_cuda(fn, ts, n, norm, max_norm) < 0) {
            goto error;
        }
    }
    else {
        float coef = ampc_clip_coef(
            norm->dtype, ampc_load_f32(norm->dtype, norm->data), max_norm);
        float unused = 0.0f;
        if (coef != 1.0f && n > 0 &&
            ampc_amp_unscale_tensors(ts, n, coef, &unused, NULL) < 0) {
            goto error;
        }
    }
    result = Py_NewRef(Py_None);
error:
    Py_DECREF(seq);
    return result;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_grad_norm_methods[] = {
    {"_grad_norm", op_grad_norm, METH_VARARGS,
     "_grad_norm(grads, norm_type) -> 0-d tensor: the total norm, one fused "
     "pass"},
    {"_clip_grads_with_norm_", op_clip_grads_with_norm_, METH_VARARGS,
     "_clip_grads_with_norm_(grads, max_norm, total_norm): grads *= "
     "min(max_norm / (total_norm + 1e-6), 1)"},
    {NULL},
};
