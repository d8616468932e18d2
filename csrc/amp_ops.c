/* amp_ops.c - the Python-facing AMP ops of ampc._C: PyTorch's
 * _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_ (same
 * names, signatures and error messages), a variant of the first that also
 * returns its per-tensor telemetry, and the two passes of clip_grad_norm_
 * (the norm of every gradient in one fused call, then the scaling).  Also
 * ampc_amp_unscale_tensors(), which GradScaler (grad_scaler.c) calls.
 */
#include "ampc.h"

#include <math.h>
#include <stdlib.h>

#include "amp_math.h"
#include "cpu/loops.h"

/* Below this many elements a kernel call keeps the GIL. */
#define RELEASE_GIL_MIN 65536

// ----------------------------------------------------------------------------
// a batch: tensors handed to one fused kernel call

typedef struct {
    Py_ssize_t n;
    AmpcTensorObject *const *src;   /* the tensors given (borrowed) */
    AmpcTensorObject **copy;        /* contiguous copies of non-dense ones */
    void **data;
    int64_t *numel;
    ampc_dtype *dtype;
    int64_t total;
    int shared;                     /* two tensors share a storage */
} amp_batch;

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

static void
batch_free(amp_batch *b)
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
static int
batch_init(amp_batch *b, AmpcTensorObject *const *ts, Py_ssize_t n)
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
        batch_free(b);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = ts[i];
        if (!is_dense(t)) {
            b->copy[i] = ampc_contiguous(t);
            if (b->copy[i] == NULL) {
                PyMem_Free(stor);
                batch_free(b);
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
batch_write_back(amp_batch *b)
{
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
    amp_batch b;
    if (batch_init(&b, ts, n) < 0) {
        return -1;
    }
    ampc_tensor_list l = {n, b.data, b.numel, b.dtype};
    ampc_amp_unscale_fn kernel = ampc_cpu.amp_unscale;
    int release = b.total >= RELEASE_GIL_MIN;
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
    batch_free(&b);
    return rc;
}

int
ampc_amp_norm_tensors(AmpcTensorObject *const *ts, Py_ssize_t n, double p,
                      double *acc)
{
    amp_batch b;
    if (batch_init(&b, ts, n) < 0) {
        return -1;
    }
    ampc_tensor_list l = {n, b.data, b.numel, b.dtype};
    if (b.total >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.grad_norm(&l, p, acc);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.grad_norm(&l, p, acc);
    }
    batch_free(&b);
    return 0;
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

static int
arg_tensor(const char *fn, const char *arg, int pos, PyObject *v)
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
static PyObject *
tensor_seq(const char *fn, PyObject *obj)
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

/* PyTorch's checks of a 1-element float32 CPU tensor, in its order: all
 * device checks, then all sizes, then all dtypes. */
static int
check_scalars(const char *const *names, AmpcTensorObject *const *ts, int n,
              int int_first)
{
    for (int i = 0; i < n; i++) {
        if (ts[i]->device.type != AMPC_DEV_CPU) {
            PyErr_Format(PyExc_RuntimeError, "%s must be a CPU tensor.",
                         names[i]);
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

/* Every gradient: on the CPU and of a float dtype. */
static int
check_grads(const char *kernel, const char *arg, PyObject *seq)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *t = AMPC_TENSOR(PySequence_Fast_GET_ITEM(seq, i));
        if (t->device.type != AMPC_DEV_CPU) {
            PyErr_Format(PyExc_RuntimeError,
                         "one of %s was not a CPU tensor.", arg);
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
    PyObject *seq = tensor_seq(fn, grads_obj);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    ampc_amp_counts *counts = NULL;
    if (arg_tensor(fn, "found_inf", 2, found_obj) < 0 ||
        arg_tensor(fn, "inv_scale", 3, inv_obj) < 0) {
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
    if (check_scalars(names, scalars, 2, 0) < 0 ||
        check_grads("_amp_foreach_non_finite_check_and_unscale_cpu",
                    "scaled_grads", seq) < 0) {
        goto error;
    }
    if (want_counts) {
        counts = PyMem_Calloc((size_t)n, sizeof(ampc_amp_counts));
        if (counts == NULL) {
            PyErr_NoMemory();
            goto error;
        }
    }
    float inv_scale = *(const float *)inv->data;
    AmpcTensorObject **ts = (AmpcTensorObject **)PySequence_Fast_ITEMS(seq);
    if (ampc_amp_unscale_tensors(ts, n, inv_scale, (float *)found->data,
                                 counts) < 0) {
        goto error;
    }
    found->storage->version++;
    if (!want_counts) {
        result = Py_NewRef(Py_None);
    }
    else {
        result = PyList_New(n);
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
    }
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
    if (arg_tensor(fn, "self", 1, scale_obj) < 0 ||
        arg_tensor(fn, "growth_tracker", 2, tracker_obj) < 0 ||
        arg_tensor(fn, "found_inf", 3, found_obj) < 0) {
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
    if (check_scalars(names, ts, 3, 1) < 0) {
        return NULL;
    }
    ampc_cpu.amp_update_scale((float *)scale->data, (int64_t *)tracker->data,
                              (const float *)found->data, growth, backoff,
                              (int64_t)interval);
    scale->storage->version++;
    tracker->storage->version++;
    return Py_NewRef(scale_obj);
}

// ----------------------------------------------------------------------------
// clip_grad_norm_: the norm, then the scaling

/* d rounded once (RNE) to dt, as a double. */
static double
round_to(ampc_dtype dt, double d)
{
    char buf[8];
    ampc_store_f64(dt, buf, d);
    return ampc_load_f32(dt, buf);
}

/* The p-norm from its accumulator (ampc_grad_norm_fn). */
static double
norm_finish(double p, double acc)
{
    if (p == 2.0) {
        return sqrt(acc);
    }
    if (p == 1.0 || p == 0.0 || isinf(p)) {
        return acc;
    }
    return pow(acc, 1.0 / p);
}

/* One value's share of a p-norm accumulator. */
static double
norm_term(double p, double v)
{
    if (p == 2.0) {
        return v * v;
    }
    if (p == 1.0 || isinf(p)) {
        return fabs(v);
    }
    if (p == 0.0) {
        return v != 0.0;
    }
    return pow(fabs(v), p);
}

/* _grad_norm(grads, norm_type) -> 0-d tensor: PyTorch's _get_total_norm,
 * i.e. the norm of the per-tensor norms, each rounded to its tensor's
 * dtype, the total in the promoted dtype.  One fused kernel call reads every
 * gradient once. */
static PyObject *
op_grad_norm(PyObject *module, PyObject *args)
{
    static const char *fn = "_grad_norm";
    PyObject *grads_obj;
    double p;
    if (!PyArg_ParseTuple(args, "Od:_grad_norm", &grads_obj, &p)) {
        return NULL;
    }
    PyObject *seq = tensor_seq(fn, grads_obj);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    double *acc = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    AmpcTensorObject **ts = (AmpcTensorObject **)PySequence_Fast_ITEMS(seq);
    ampc_device dev = {AMPC_DEV_CPU, 0};
    ampc_dtype out_dt = AMPC_FLOAT32;
    if (check_grads("linalg_vector_norm", "grads", seq) < 0) {
        goto error;
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
            goto error;
        }
    }
    acc = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(double));
    if (acc == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (n > 0 && ampc_amp_norm_tensors(ts, n, p, acc) < 0) {
        goto error;
    }
    /* the norm of the stacked per-tensor norms */
    double total = (isinf(p) && p < 0) ? INFINITY : 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double norm = round_to(ts[i]->dtype, norm_finish(p, acc[i]));
        total = ampc_norm_fold(p, total, norm_term(p, norm));
    }
    AmpcTensorObject *out = ampc_tensor_empty(0, NULL, out_dt, dev);
    if (out == NULL) {
        goto error;
    }
    ampc_store_f64(out_dt, out->data, n > 0 ? norm_finish(p, total) : 0.0);
    result = (PyObject *)out;
error:
    PyMem_Free(acc);
    Py_DECREF(seq);
    return result;
}

/* The clip coefficient as PyTorch computes it in total_norm's dtype:
 * clamp(max_norm / (total_norm + 1e-6), max=1), where a Python number over a
 * tensor is reciprocal() * number, and each op rounds to that dtype. */
static float
clip_coef(ampc_dtype dt, float total_norm, double max_norm)
{
    float x = total_norm + 1e-6f;
    if (dt != AMPC_FLOAT32) {
        x = (float)round_to(dt, x);
    }
    float r = 1.0f / x;
    if (dt != AMPC_FLOAT32) {
        r = (float)round_to(dt, r);
    }
    float coef = r * (float)max_norm;
    if (dt != AMPC_FLOAT32) {
        coef = (float)round_to(dt, coef);
    }
    return coef > 1.0f ? 1.0f : coef;
}

/* _clip_grads_with_norm_(grads, max_norm, total_norm): grads *= coef in
 * one fused pass, and no pass at all when coef is 1 (PyTorch multiplies by
 * 1.0 anyway, which changes nothing).  A NaN or inf norm gives a NaN or 0
 * coefficient, as in PyTorch. */
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
    if (arg_tensor(fn, "total_norm", 3, norm_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *norm = AMPC_TENSOR(norm_obj);
    if (ampc_numel(norm) != 1 || !ampc_dtype_is_float(norm->dtype) ||
        ampc_check_cpu(fn, "total_norm", norm) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): total_norm must be a 1-element float tensor",
                         fn);
        }
        return NULL;
    }
    PyObject *seq = tensor_seq(fn, grads_obj);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (check_grads("mul_", "grads", seq) < 0) {
        goto error;
    }
    float coef = clip_coef(norm->dtype, ampc_load_f32(norm->dtype, norm->data),
                           max_norm);
    if (coef != 1.0f && n > 0) {
        float unused = 0.0f;
        AmpcTensorObject **ts =
            (AmpcTensorObject **)PySequence_Fast_ITEMS(seq);
        if (ampc_amp_unscale_tensors(ts, n, coef, &unused, NULL) < 0) {
            goto error;
        }
    }
    result = Py_NewRef(Py_None);
error:
    Py_DECREF(seq);
    return result;
}

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
    {"_amp_update_scale_", op_amp_update_scale_, METH_VARARGS,
     "_amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, "
     "backoff_factor, growth_interval) -> scale (updated in place; the "
     "tracker is an int64 tensor)"},
    {"_grad_norm", op_grad_norm, METH_VARARGS,
     "_grad_norm(grads, norm_type) -> 0-d tensor: the total norm, one fused "
     "pass"},
    {"_clip_grads_with_norm_", op_clip_grads_with_norm_, METH_VARARGS,
     "_clip_grads_with_norm_(grads, max_norm, total_norm): grads *= "
     "min(max_norm / (total_norm + 1e-6), 1)"},
    {"_amp_clip_pending", op_amp_clip_pending, METH_O,
     "_amp_clip_pending(grads) -> True once when a GradScaler scaled a loss "
     "and one of grads was not unscaled since"},
    {NULL},
};
