/* amp_ops.c - the Python-facing AMP ops of ampc._C: PyTorch's
 * _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_ (same
 * names, signatures and error messages) and a variant of the first that
 * also returns its per-tensor telemetry.  Also ampc_amp_unscale_tensors()
 * and its CUDA twin, which GradScaler (grad_scaler.c) and clip_grad_norm_'s
 * scaling (grad_norm_ops.c) call, and the batch and argument checks the
 * two files share (amp_ops.h).  On CUDA every scalar (inv_scale,
 * found_inf, the scale) stays on the device: only the telemetry variant,
 * which returns Python ints, reads the GPU.
 */
#include "ampc.h"

#include <math.h>
#include <stdlib.h>

#include "amp_math.h"
#include "amp_reduce.h"
#include "amp_ops.h"
#include "cpu/loops.h"

uint64_t ampc_cuda_host_reads;

// ----------------------------------------------------------------------------
// a batch: tensors handed to one fused kernel call


/* The tensor's elements fill [data, data + numel) exactly, in some order,
 * so an element-wise kernel may run over that flat range.  True for
 * contiguous tensors and for transposed or permuted ones. */
static int
is_dense(const AmpcTensorObject *t)
{
    int64_t size[AMPC_MAX_DIMS], stride[AMPC_MAX_DIMS];
    int m = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            return 1;
        }
        if (t->shape[d] == 1) {
            continue;
        }
        if (t->strides[d] <= 0) {
            return 0;
        }
        /* insertion sort by stride */
        int j = m++;
        while (j > 0 && stride[j - 1] > t->strides[d]) {
            stride[j] = stride[j - 1];
            size[j] = size[j - 1];
            j--;
        }
        stride[j] = t->strides[d];
        size[j] = t->shape[d];
    }
    int64_t expected = 1;
    for (int j = 0; j < m; j++) {
        if (stride[j] != expected) {
            return 0;
        }
        expected *= size[j];
    }
    return 1;
}

static int
cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a;
    uintptr_t y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

void
ampc_amp_batch_free(ampc_amp_batch *b)
{
    if (b->copy != NULL) {
        for (Py_ssize_t i = 0; i < b->n; i++) {
            Py_XDECREF(b->copy[i]);
        }
    }
    PyMem_Free(b->copy);
    PyMem_Free(b->data);
    PyMem_Free(b->numel);
    PyMem_Free(b->dtype);
}

/* Points the batch at the tensors' memory; a tensor that is not dense is
 * replaced by a contiguous copy (written back by batch_write_back). */
int
ampc_amp_batch_init(ampc_amp_batch *b, AmpcTensorObject *const *ts,
                    Py_ssize_t n)
{
    memset(b, 0, sizeof(*b));
    b->n = n;
    b->src = ts;
    size_t k = n > 0 ? (size_t)n : 1;
    b->copy = PyMem_Calloc(k, sizeof(AmpcTensorObject *));
    b->data = PyMem_Calloc(k, sizeof(void *));
    b->numel = PyMem_Calloc(k, sizeof(int64_t));
    b->dtype = PyMem_Calloc(k, sizeof(ampc_dtype));
    void **stor = PyMem_Calloc(k, sizeof(void *));
    if (b->copy == NULL || b->data == NULL || b->numel == NULL ||
        b->dtype == NULL || stor == NULL) {
        PyMem_Free(stor);
        ampc_amp_batch_free(b);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = ts[i];
        if (!is_dense(t)) {
            b->copy[i] = ampc_contiguous(t);
            if (b->copy[i] == NULL) {
                PyMem_Free(stor);
                ampc_amp_batch_free(b);
                return -1;
            }
            t = b->copy[i];
        }
        b->data[i] = t->data;
        b->numel[i] = ampc_numel(t);
        b->dtype[i] = t->dtype;
        b->total += b->numel[i];
        stor[i] = ts[i]->storage;
    }
    /* Tensors that share memory are unscaled one after another, in list
     * order, as PyTorch does; the split over threads could race there. */
    qsort(stor, (size_t)n, sizeof(void *), cmp_ptr);
    for (Py_ssize_t i = 1; i < n; i++) {
        if (stor[i] == stor[i - 1]) {
            b->shared = 1;
        }
    }
    PyMem_Free(stor);
    return 0;
}

/* After an in-place kernel: copies go back, versions move on. */
static int
batch_write_back(ampc_amp_batch *b)
{
    /* NOTE: on CUDA, ampc_copy_into queues its copies on the ampc stream
     * after the kernel, so they see its results without a wait. */
    for (Py_ssize_t i = 0; i < b->n; i++) {
        if (b->copy[i] != NULL && ampc_copy_into(b->src[i], b->copy[i]) < 0) {
            return -1;
        }
        if (b->numel[i] > 0) {
            b->src[i]->storage->version++;
        }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// the fused calls (also GradScaler's)

int
ampc_amp_unscale_tensors(AmpcTensorObject *const *ts, Py_ssize_t n,
                         float inv_scale, float *found_inf,
                         ampc_amp_counts *counts)
{
    ampc_amp_batch b;
    if (ampc_amp_batch_init(&b, ts, n) < 0) {
        return -1;
    }
    ampc_tensor_list l = {n, b.data, b.numel, b.dtype};
    ampc_amp_unscale_fn kernel = ampc_cpu.amp_unscale;
    int release = b.total >= AMPC_AMP_RELEASE_GIL_MIN;
    PyThreadState *ts_save = release ? PyEval_SaveThread() : NULL;
    if (b.shared) {
        for (Py_ssize_t i = 0; i < n; i++) {
            ampc_tensor_list one = {1, b.data + i, b.numel + i, b.dtype + i};
            kernel(&one, inv_scale, found_inf, counts ? counts + i : NULL);
        }
    }
    else {
        kernel(&l, inv_scale, found_inf, counts);
    }
    if (release) {
        PyEval_RestoreThread(ts_save);
    }
    int rc = inv_scale != 1.0f ? batch_write_back(&b) : 0;
    ampc_amp_batch_free(&b);
    return rc;
}

int
ampc_amp_unscale_tensors_cuda(AmpcTensorObject *const *ts, Py_ssize_t n,
                              const float *inv_scale, int flags,
                              float *found_inf, ampc_amp_counts *counts)
{
    static const char *fn = "_amp_foreach_non_finite_check_and_unscale_";
    if (ampc_cuda_enter(fn, ts[0]->device) < 0) {
        return -1;
    }
    ampc_amp_batch b;
    if (ampc_amp_batch_init(&b, ts, n) < 0) {
        return -1;
    }
    int rc = 0;
    if (b.shared) {
        /* one launch per tensor: the stream runs them in list order */
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
            ampc_tensor_list one = {1, b.data + i, b.numel + i, b.dtype + i};
            rc = ampc_cuda.amp_unscale(&one, inv_scale,
                                       i == 0 ? flags
                                              : flags & ~AMPC_AMP_ZERO_FOUND,
                                       found_inf, counts ? counts + i : NULL);
        }
    }
    else {
        ampc_tensor_list l = {n, b.data, b.numel, b.dtype};
        rc = ampc_cuda.amp_unscale(&l, inv_scale, flags, found_inf, counts);
    }
    if (rc != 0) {
        ampc_amp_batch_free(&b);
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    /* Unless this is the check alone, inv_scale lives on the device and
     * whether it is 1 (no write) is not known here: the copies go back and
     * the versions move on, which is correct either way (the values are
     * unchanged when it is 1). */
    rc = (flags & AMPC_AMP_CHECK_ONLY) ? 0 : batch_write_back(&b);
    ampc_amp_batch_free(&b);
    return rc;
}


// ----------------------------------------------------------------------------
// argument checks, in PyTorch's words where PyTorch has them

static const char *
torch_dtype_name(ampc_dtype dt)
{
    switch (dt) {
    case AMPC_FLOAT32:
        return "Float";
    case AMPC_FLOAT16:
        return "Half";
    case AMPC_BFLOAT16:
        return "BFloat16";
    case AMPC_INT64:
        return "Long";
    default:
        return "Bool";
    }
}

int
ampc_amp_arg_tensor(const char *fn, const char *arg, int pos, PyObject *v)
{
    if (!ampc_tensor_check(v)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' (position %d) must be Tensor, not "
                     "%.100s",
                     fn, arg, pos, Py_TYPE(v)->tp_name);
        return -1;
    }
    return 0;
}

/* A sequence of tensors -> a new PySequence_Fast (its items borrowed). */
PyObject *
ampc_amp_tensor_seq(const char *fn, PyObject *obj)
{
    if (ampc_tensor_check(obj) || !PySequence_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'self' (position 1) must be tuple of "
                     "Tensors, not %.100s",
                     fn, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(obj, "expected a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PySequence_Fast_GET_ITEM(seq, i);
        if (!ampc_tensor_check(v)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): expected Tensor as element %zd in argument "
                         "0, but got %.100s",
                         fn, i, Py_TYPE(v)->tp_name);
            Py_DECREF(seq);
            return NULL;
        }
    }
    return seq;
}

/* "CPU" or "CUDA", as PyTorch's messages name a device type. */
static const char *
device_word(int type)
{
    return type == AMPC_DEV_CUDA ? "CUDA" : "CPU";
}

/* PyTorch's dispatch: an op with any CUDA tensor argument runs its CUDA
 * kernel, whose checks then name the CPU ones. */
int
ampc_amp_op_device_type(AmpcTensorObject *const *ts, int n, PyObject *seq)
{
    for (int i = 0; i < n; i++) {
        if (ampc_is_cuda(ts[i])) {
            return AMPC_DEV_CUDA;
        }
    }
    Py_ssize_t m = seq != NULL ? PySequence_Fast_GET_SIZE(seq) : 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (ampc_is_cuda(AMPC_TENSOR(PySequence_Fast_GET_ITEM(seq, i)))) {
            return AMPC_DEV_CUDA;
        }
    }
    return AMPC_DEV_CPU;
}

/* "cuda:0" or "cpu", as PyTorch prints a device. */
static void
device_str(char *buf, size_t size, ampc_device d)
{
    if (d.type == AMPC_DEV_CUDA) {
        snprintf(buf, size, "cuda:%d", (int)d.index);
    }
    else {
        snprintf(buf, size, "cpu");
    }
}

/* PyTorch's device check of an op's tensors: -1 with its RuntimeError when
 * t is not on dev. */
int
ampc_amp_check_same_device(ampc_device dev, const AmpcTensorObject *t)
{
    if (t->device.type == dev.type && t->device.index == dev.index) {
        return 0;
    }
    char a[16], b[16];
    device_str(a, sizeof(a), dev);
    device_str(b, sizeof(b), t->device);
    PyErr_Format(PyExc_RuntimeError,
                 "Expected all tensors to be on the same device, but found "
                 "at least two devices, %s and %s!",
                 a, b);
    return -1;
}

/* PyTorch's checks of a 1-element float32 tensor on a device of type
 * `type`, in its order: all device checks, then all sizes, then all
 * dtypes. */
static int
check_scalars(const char *const *names, AmpcTensorObject *const *ts, int n,
              int int_first, int type)
{
    for (int i = 0; i < n; i++) {
        if (ts[i]->device.type != type) {
            PyErr_Format(PyExc_RuntimeError, "%s must be a %s tensor.",
                         names[i], device_word(type));
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (ampc_numel(ts[i]) != 1) {
            PyErr_Format(PyExc_RuntimeError, "%s must be a 1-element tensor.",
                         names[i]);
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (int_first && i == 0) {
            if (ts[i]->dtype != AMPC_INT64) {
                /* NOTE: PyTorch wants int32; ampc has int64 only. */
                PyErr_Format(PyExc_RuntimeError,
                             "%s must be an int tensor.", names[i]);
                return -1;
            }
        }
        else if (ts[i]->dtype != AMPC_FLOAT32) {
            PyErr_Format(PyExc_RuntimeError, "%s must be a float tensor.",
                         names[i]);
            return -1;
        }
    }
    return 0;
}

/* Every gradient: on a device of type `type` (on CUDA, all on the first
 * one's device) and of a float dtype. */
int
ampc_amp_check_grads(const char *kernel, const char *arg, PyObject *seq,
                     int type)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = AMPC_TENSOR(PySequence_Fast_GET_ITEM(seq, i));
        if (t->device.type != type) {
            PyErr_Format(PyExc_RuntimeError,
                         "one of %s was not a %s tensor.", arg,
                         device_word(type));
            return -1;
        }
        AmpcTensorObject *t0 = AMPC_TENSOR(PySequence_Fast_GET_ITEM(seq, 0));
        if (t->device.index != t0->device.index) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s must be on the same device.", arg);
            return -1;
        }
        if (!ampc_dtype_is_float(t->dtype)) {
            PyErr_Format(PyExc_NotImplementedError,
                         "\"%s\" not implemented for '%s' (%s[%zd] is %s; "
                         "expected float32, float16 or bfloat16)",
                         kernel, torch_dtype_name(t->dtype), arg, i,
                         ampc_dtype_name(t->dtype));
            return -1;
        }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// _amp_foreach_non_finite_check_and_unscale_

/* The CUDA pass of the Python ops: inv (NULL with AMPC_AMP_CHECK_ONLY) and
 * found stay on the device; the telemetry, when asked for (counts: n host
 * entries), is read back, the one host wait of these ops. */
static int
unscale_cuda(const char *fn, AmpcTensorObject *const *ts, Py_ssize_t n,
             AmpcTensorObject *inv, int flags, AmpcTensorObject *found,
             ampc_amp_counts *counts)
{
    AmpcTensorObject *dev_counts = NULL;
    if (counts != NULL) {
        int64_t shape[2] = {(int64_t)n, 4};
        dev_counts = ampc_tensor_empty(2, shape, AMPC_INT64, ts[0]->device);
        if (dev_counts == NULL) {
            return -1;
        }
    }
    int rc = ampc_amp_unscale_tensors_cuda(
        ts, n, inv != NULL ? (const float *)inv->data : NULL, flags,
        (float *)found->data,
        dev_counts ? (ampc_amp_counts *)dev_counts->data : NULL);
    if (rc == 0 && counts != NULL) {
        rc = ampc_read_to_host(fn, dev_counts, counts,
                               (size_t)n * sizeof(ampc_amp_counts));
    }
    Py_XDECREF(dev_counts);
    return rc;
}

/* [(inf, nan, zero, subnormal)] for the n tensors' counts. */
static PyObject *
counts_list(const ampc_amp_counts *counts, Py_ssize_t n)
{
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *c = Py_BuildValue(
            "(LLLL)", (long long)counts[i].inf, (long long)counts[i].nan,
            (long long)counts[i].zero, (long long)counts[i].subnormal);
        if (c == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, c);
    }
    return result;
}

/* scaled_grads (n tensors) <- scaled_grads * inv_scale; found_inf <- 1.0
 * on inf/NaN.  Returns None, or with want_counts a list of (inf, nan, zero,
 * subnormal) tuples. */
static PyObject *
unscale_common(PyObject *args, const char *fn, int want_counts)
{
    PyObject *grads_obj, *found_obj, *inv_obj;
    if (!PyArg_UnpackTuple(args, fn, 3, 3, &grads_obj, &found_obj,
                           &inv_obj)) {
        return NULL;
    }
    PyObject *seq = ampc_amp_tensor_seq(fn, grads_obj);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    ampc_amp_counts *counts = NULL;
    if (ampc_amp_arg_tensor(fn, "found_inf", 2, found_obj) < 0 ||
        ampc_amp_arg_tensor(fn, "inv_scale", 3, inv_obj) < 0) {
        goto error;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        /* as PyTorch: an empty list returns before any check */
        result = want_counts ? PyList_New(0) : Py_NewRef(Py_None);
        Py_DECREF(seq);
        return result;
    }
    AmpcTensorObject *found = AMPC_TENSOR(found_obj);
    AmpcTensorObject *inv = AMPC_TENSOR(inv_obj);
    const char *names[2] = {"inv_scale", "found_inf"};
    AmpcTensorObject *scalars[2] = {inv, found};
    int type = ampc_amp_op_device_type(scalars, 2, seq);
    AmpcTensorObject **ts = (AmpcTensorObject **)PySequence_Fast_ITEMS(seq);
    if (check_scalars(names, scalars, 2, 0, type) < 0 ||
        ampc_amp_check_grads(type == AMPC_DEV_CUDA
                        ? "_amp_foreach_non_finite_check_and_unscale_cuda"
                        : "_amp_foreach_non_finite_check_and_unscale_cpu",
                    "scaled_grads", seq, type) < 0) {
        goto error;
    }
    if (want_counts) {
        counts = PyMem_Calloc((size_t)n, sizeof(ampc_amp_counts));
        if (counts == NULL) {
            PyErr_NoMemory();
            goto error;
        }
    }
    if (type == AMPC_DEV_CUDA) {
        if (ampc_amp_check_same_device(ts[0]->device, inv) < 0 ||
            ampc_amp_check_same_device(ts[0]->device, found) < 0 ||
            unscale_cuda(fn, ts, n, inv, 0, found, counts) < 0) {
            goto error;
        }
    }
    else if (ampc_amp_unscale_tensors(ts, n, *(const float *)inv->data,
                                      (float *)found->data, counts) < 0) {
        goto error;
    }
    found->storage->version++;
    result = want_counts ? counts_list(counts, n) : Py_NewRef(Py_None);
error:
    PyMem_Free(counts);
    Py_DECREF(seq);
    return result;
}

static PyObject *
op_amp_unscale_(PyObject *module, PyObject *args)
{
    return unscale_common(args, "_amp_foreach_non_finite_check_and_unscale_",
                          0);
}

static PyObject *
op_amp_unscale_counts_(PyObject *module, PyObject *args)
{
    return unscale_common(args, "_amp_unscale_counts_", 1);
}

/* _amp_count_nonfinite(tensors): the fused pass with inv_scale 1 and no
 * found_inf, which writes nothing: no version moves, so tensors that
 * autograd saved stay usable (detect_overflow checks layer outputs). */
static PyObject *
op_amp_count_nonfinite(PyObject *module, PyObject *arg)
{
    static const char *fn = "_amp_count_nonfinite";
    PyObject *seq = ampc_amp_tensor_seq(fn, arg);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        return PyList_New(0);
    }
    PyObject *result = NULL;
    AmpcTensorObject *found = NULL;
    AmpcTensorObject **ts = (AmpcTensorObject **)PySequence_Fast_ITEMS(seq);
    int type = ampc_amp_op_device_type(NULL, 0, seq);
    ampc_amp_counts *counts = PyMem_Calloc((size_t)n,
                                           sizeof(ampc_amp_counts));
    if (counts == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (ampc_amp_check_grads(fn, "tensors", seq, type) < 0) {
        goto error;
    }
    if (type == AMPC_DEV_CUDA) {
        int64_t one = 1;
        found = ampc_tensor_empty(1, &one, AMPC_FLOAT32, ts[0]->device);
        if (found == NULL ||
            unscale_cuda(fn, ts, n, NULL,
                         AMPC_AMP_CHECK_ONLY | AMPC_AMP_ZERO_FOUND, found,
                         counts) < 0) {
            goto error;
        }
    }
    else {
        float found_host = 0.0f;
        if (ampc_amp_unscale_tensors(ts, n, 1.0f, &found_host, counts) < 0) {
            goto error;
        }
    }
    result = counts_list(counts, n);
error:
    Py_XDECREF(found);
    PyMem_Free(counts);
    Py_DECREF(seq);
    return result;
}

// ----------------------------------------------------------------------------
// _amp_update_scale_

static PyObject *
op_amp_update_scale_(PyObject *module, PyObject *args)
{
    static const char *fn = "_amp_update_scale_";
    PyObject *scale_obj, *tracker_obj, *found_obj, *interval_obj;
    double growth, backoff;
    if (!PyArg_ParseTuple(args, "OOOddO:_amp_update_scale_", &scale_obj,
                          &tracker_obj, &found_obj, &growth, &backoff,
                          &interval_obj)) {
        return NULL;
    }
    if (ampc_amp_arg_tensor(fn, "self", 1, scale_obj) < 0 ||
        ampc_amp_arg_tensor(fn, "growth_tracker", 2, tracker_obj) < 0 ||
        ampc_amp_arg_tensor(fn, "found_inf", 3, found_obj) < 0) {
        return NULL;
    }
    if (!PyLong_Check(interval_obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'growth_interval' (position 6) must be "
                     "int, not %.100s",
                     fn, Py_TYPE(interval_obj)->tp_name);
        return NULL;
    }
    long long interval = PyLong_AsLongLong(interval_obj);
    if (interval == -1 && PyErr_Occurred()) {
        return NULL;
    }
    AmpcTensorObject *scale = AMPC_TENSOR(scale_obj);
    AmpcTensorObject *tracker = AMPC_TENSOR(tracker_obj);
    AmpcTensorObject *found = AMPC_TENSOR(found_obj);
    const char *names[3] = {"growth_tracker", "current_scale", "found_inf"};
    AmpcTensorObject *ts[3] = {tracker, scale, found};
    int type = ampc_amp_op_device_type(ts, 3, NULL);
    if (check_scalars(names, ts, 3, 1, type) < 0) {
        return NULL;
    }
    if (type == AMPC_DEV_CUDA) {
        /* one thread on the device: nothing is read back */
        float *found_ptr = (float *)found->data;
        int rc;
        if (ampc_amp_check_same_device(scale->device, tracker) < 0 ||
            ampc_amp_check_same_device(scale->device, found) < 0 ||
            ampc_cuda_enter(fn, scale->device) < 0) {
            return NULL;
        }
        rc = ampc_cuda.amp_update_scale(
            (float *)scale->data, (int64_t *)tracker->data, &found_ptr, 1,
            growth, backoff, (int64_t)interval, NULL, 0);
        if (rc != 0) {
            return ampc_cuda_raise(fn, rc);
        }
    }
    else {
        ampc_cpu.amp_update_scale((float *)scale->data,
                                  (int64_t *)tracker->data,
                                  (const float *)found->data, growth,
                                  backoff, (int64_t)interval);
    }
    scale->storage->version++;
    tracker->storage->version++;
    return Py_NewRef(scale_obj);
}

// ----------------------------------------------------------------------------
// GradScaler's questions

/* _amp_clip_pending(grads) -> bool: clip_grad_norm_'s question to the live
 * GradScalers (ampc_grad_scaler_clip_pending). */
static PyObject *
op_amp_clip_pending(PyObject *module, PyObject *grads)
{
    int pending = ampc_grad_scaler_clip_pending(grads);
    if (pending < 0) {
        return NULL;
    }
    return PyBool_FromLong(pending);
}

/* _cuda_host_reads() -> int: host reads of CUDA memory so far. */
static PyObject *
op_cuda_host_reads(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(ampc_cuda_host_reads);
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_amp_methods[] = {
    {"_amp_foreach_non_finite_check_and_unscale_", op_amp_unscale_,
     METH_VARARGS,
     "_amp_foreach_non_finite_check_and_unscale_(scaled_grads, found_inf, "
     "inv_scale): one fused pass: grads *= inv_scale in place (nothing "
     "written when inv_scale is 1); found_inf = 1.0 on any inf/NaN input"},
    {"_amp_unscale_counts_", op_amp_unscale_counts_, METH_VARARGS,
     "_amp_unscale_counts_(scaled_grads, found_inf, inv_scale) -> [(inf, "
     "nan, zero, subnormal)] per tensor, from the same single pass"},
    {"_amp_count_nonfinite", op_amp_count_nonfinite, METH_O,
     "_amp_count_nonfinite(tensors) -> [(inf, nan, zero, subnormal)] per "
     "tensor (one device), in one fused pass that writes nothing"},
    {"_amp_update_scale_", op_amp_update_scale_, METH_VARARGS,
     "_amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, "
     "backoff_factor, growth_interval) -> scale (updated in place; the "
     "tracker is an int64 tensor)"},
    {"_cuda_host_reads", op_cuda_host_reads, METH_NOARGS,
     "_cuda_host_reads() -> int: how many reads of CUDA memory into host "
     "memory (each one waits for the GPU) ran so far; the difference over "
     "a training step counts its host syncs"},
    {"_amp_clip_pending", op_amp_clip_pending, METH_O,
     "_amp_clip_pending(grads) -> True once when a GradScaler scaled a loss "
     "and one of grads was not unscaled since"},
    {NULL},
};
