/* grad_norm_ops.c - the two passes of clip_grad_norm_ in ampc._C:
 * _grad_norm (the norm of every gradient in one fused call) and
 * _clip_grads_with_norm_ (the scaling), on ampc_amp_total_norm and
 * ampc_amp_clip_multiplier, which GradScaler.clip_grad_norm_ calls with
 * its scale.  On CUDA the norm and the clip coefficient stay on the
 * device: no host wait.
 */
#include "ampc.h"

#include <math.h>

#include "amp_ops.h"
#include "amp_reduce.h"

// ----------------------------------------------------------------------------
// the total norm and the clip multiplier (also GradScaler.clip_grad_norm_'s)

/* Per-tensor accumulators of the p-norm of n float CPU tensors, in one
 * fused call. */
static int
norm_tensors_cpu(AmpcTensorObject *const *ts, Py_ssize_t n, double p,
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

/* The CPU total: the norm of the per-tensor norms (each unscaled by inv
 * and rounded to its tensor's dtype), stored into out. */
static int
total_norm_cpu(AmpcTensorObject *const *ts, Py_ssize_t n, double p,
               float inv, AmpcTensorObject *out)
{
    double *acc = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(double));
    if (acc == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (n > 0 && norm_tensors_cpu(ts, n, p, acc) < 0) {
        PyMem_Free(acc);
        return -1;
    }
    double total = ampc_norm_identity(p);
    for (Py_ssize_t i = 0; i < n; i++) {
        double norm = ampc_norm_of_tensor(ts[i]->dtype, p, acc[i], inv);
        total = ampc_norm_merge(p, total, ampc_norm_term(p, norm));
    }
    ampc_store_f64(out->dtype, out->data,
                   n > 0 ? ampc_norm_finish(p, total) : 0.0);
    PyMem_Free(acc);
    return 0;
}

/* The total norm on the device: one slot call over the gradients (dense
 * copies of non-dense ones), written into out; no host wait. */
static int
total_norm_cuda(const char *fn, AmpcTensorObject *const *ts, Py_ssize_t n,
                double p, const float *scale, AmpcTensorObject *out)
{
    if (ampc_cuda_enter(fn, out->device) < 0) {
        return -1;
    }
    ampc_amp_batch b;
    if (ampc_amp_batch_init(&b, ts, n) < 0) {
        return -1;
    }
    ampc_tensor_list l = {n, b.data, b.numel, b.dtype};
    int rc = ampc_cuda.grad_norm(&l, p, scale, out->dtype, out->data);
    ampc_amp_batch_free(&b);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    return 0;
}

AmpcTensorObject *
ampc_amp_total_norm(const char *fn, AmpcTensorObject *const *ts,
                    Py_ssize_t n, double p, AmpcTensorObject *scale)
{
    ampc_device dev = {AMPC_DEV_CPU, 0};
    ampc_dtype out_dt = AMPC_FLOAT32;
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
            return NULL;
        }
    }
    AmpcTensorObject *out = ampc_tensor_empty(0, NULL, out_dt, dev);
    if (out == NULL) {
        return NULL;
    }
    int rc;
    if (n > 0 && dev.type == AMPC_DEV_CUDA) {
        rc = total_norm_cuda(fn, ts, n, p,
                             scale ? (const float *)scale->data : NULL, out);
    }
    else {
        float inv = scale ? ampc_amp_inv_scale(*(const float *)scale->data)
                          : 1.0f;
        rc = total_norm_cpu(ts, n, p, inv, out);
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

AmpcTensorObject *
ampc_amp_clip_multiplier(const char *fn, AmpcTensorObject *norm,
                         double max_norm, AmpcTensorObject *scale)
{
    AmpcTensorObject *m = ampc_tensor_empty(0, NULL, AMPC_FLOAT32,
                                            norm->device);
    if (m == NULL) {
        return NULL;
    }
    if (norm->device.type == AMPC_DEV_CUDA) {
        int code = ampc_cuda_enter(fn, norm->device) < 0
                       ? -1
                       : ampc_cuda.clip_coef(
                             norm->data, norm->dtype, max_norm,
                             scale ? (const float *)scale->data : NULL,
                             (float *)m->data);
        if (code != 0) {
            if (code > 0) {
                ampc_cuda_raise(fn, code);
            }
            Py_DECREF(m);
            return NULL;
        }
        return m;
    }
    float v = ampc_load_f32(norm->dtype, norm->data);
    *(float *)m->data =
        scale ? ampc_clip_multiplier(
                    norm->dtype, v, max_norm,
                    ampc_amp_inv_scale(*(const float *)scale->data))
              : ampc_clip_coef(norm->dtype, v, max_norm);
    return m;
}

// ----------------------------------------------------------------------------
// clip_grad_norm_: the norm, then the scaling

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
    if (ampc_amp_check_grads("linalg_vector_norm", "grads", seq,
                             ampc_amp_op_device_type(NULL, 0, seq)) == 0) {
        result = (PyObject *)ampc_amp_total_norm(
            fn, (AmpcTensorObject **)PySequence_Fast_ITEMS(seq),
            PySequence_Fast_GET_SIZE(seq), p, NULL);
    }
    Py_DECREF(seq);
    return result;
}

int
ampc_amp_multiply_by(const char *fn, AmpcTensorObject *const *ts,
                     Py_ssize_t n, AmpcTensorObject *m)
{
    if (n == 0) {
        return 0;
    }
    if (ampc_amp_check_same_device(ts[0]->device, m) < 0) {
        return -1;
    }
    if (m->device.type != AMPC_DEV_CUDA) {
        float v = *(const float *)m->data, unused = 0.0f;
        return v == 1.0f ? 0
                         : ampc_amp_unscale_tensors(ts, n, v, &unused, NULL);
    }
    if (ampc_cuda_enter(fn, m->device) < 0) {
        return -1;
    }
    AmpcTensorObject *unused = ampc_tensor_empty(0, NULL, AMPC_FLOAT32,
                                                 m->device);
    int rc = unused == NULL
                 ? -1
                 : ampc_amp_unscale_tensors_cuda(ts, n,
                                                 (const float *)m->data, 0,
                                                 (float *)unused->data, NULL);
    Py_XDECREF(unused);
    return rc;
}

/* _clip_grads_with_norm_(grads, max_norm, total_norm): grads *= coef in
 * one fused pass, and on the CPU no pass at all when coef is 1 (PyTorch
 * multiplies by 1.0 anyway, which changes nothing).  A NaN or inf norm
 * gives a NaN or 0 coefficient, as in PyTorch (amp_reduce.h
 * ampc_clip_coef).  On CUDA the coefficient never leaves the device. */
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
    AmpcTensorObject *coef = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int type = ampc_amp_op_device_type(&norm, 1, seq);
    if (ampc_amp_check_grads("mul_", "grads", seq, type) == 0 &&
        (coef = ampc_amp_clip_multiplier(fn, norm, max_norm, NULL)) != NULL &&
        ampc_amp_multiply_by(
            fn, (AmpcTensorObject **)PySequence_Fast_ITEMS(seq), n,
            coef) == 0) {
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(coef);
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
