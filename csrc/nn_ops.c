/* nn_ops.c - the argument checks that the Python-facing NN op files
 * (nn_activation.c, nn_pool.c, nn_loss.c, nn_mse.c) share, the ampc_arg_*
 * ones also used by optim_ops.c through ampc.h, and the prologue of every
 * CUDA NN op.
 *
 * CUDA tensors take the same checks and messages, then the CUDA table's
 * slots (kernels_cuda.h), with every reduction on the device.  Class
 * targets and pooling indices are validated by the GPU kernels, which
 * report a bad one through the deferred error record (ampc_nn_error): it
 * is read here without a host sync at the next CUDA NN op, which raises
 * the IndexError then.  A check at the op itself would need a host read of
 * the targets, a sync every training step.
 */
#include "ampc.h"

#include <math.h>

#include "cpu/loops.h"
#include "nn_ops.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// argument helpers (shared with optim_ops.c through ampc.h)

AmpcTensorObject *
ampc_arg_tensor(const char *fn, const char *arg, PyObject *obj)
{
    if (!ampc_tensor_check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a Tensor, not %.100s", fn,
                     arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return AMPC_TENSOR(obj);
}

/* Every tensor of ts (n >= 1, NULL entries skipped) on ts[0]'s device, and
 * that device made current (ampc_cuda_enter); -1 with an exception. */
static int
one_device(const char *fn, int n, AmpcTensorObject *const *ts)
{
    for (int k = 1; k < n; k++) {
        if (ts[k] != NULL && ampc_check_same_device(ts[0], ts[k]) < 0) {
            return -1;
        }
    }
    return ampc_cuda_enter(fn, ts[0]->device);
}

/* Raises the IndexError that a CUDA NN kernel recorded since the last
 * check (kernels_cuda.h ampc_nn_error), and clears it; 0 when none.  Reads
 * mapped host memory: no sync. */
static int
check_deferred(const char *fn)
{
    ampc_nn_error *e;
    int rc = ampc_cuda.nn_error(&e);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    if (e->state == 0) {
        return 0;
    }
    /* the GPU wrote the fields before state: read them after it */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (e->kind == AMPC_NN_ERR_TARGET) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): Target %lld is out of bounds (C = %lld). (found "
                     "on the GPU by an earlier CUDA loss call, reported at "
                     "this one)",
                     fn, (long long)e->value, (long long)e->bound);
    }
    else if (e->kind == AMPC_NN_ERR_INDEX) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): index %lld is out of bounds for a dimension "
                     "with size %lld (found on the GPU by an earlier "
                     "indexing call, reported at this one)",
                     fn, (long long)e->value, (long long)e->bound);
    }
    else {
        PyErr_Format(PyExc_IndexError,
                     "%s(): indices must lie in [0, %lld), the H*W elements "
                     "of an input plane; found %lld (on the GPU, by an "
                     "earlier max_pool2d_backward call, reported at this "
                     "one)",
                     fn, (long long)e->bound, (long long)e->value);
    }
    e->state = 0;
    e->claim = 0;           /* (after state: no report is half-written) */
    return -1;
}

/* Before a CUDA op: one device, made current, no error pending. */
int
ampc_nn_cuda_prologue(const char *fn, int n, AmpcTensorObject *const *ts)
{
    if (one_device(fn, n, ts) < 0) {
        return -1;
    }
    return ampc_is_cuda(ts[0]) ? check_deferred(fn) : 0;
}

int
ampc_arg_float(const char *fn, const char *arg, AmpcTensorObject *t)
{
    if (!ampc_dtype_is_float(t->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have a floating-point dtype "
                     "(float32, float16 or bfloat16), got %s",
                     fn, arg, ampc_dtype_name(t->dtype));
        return -1;
    }
    return 0;
}

int
ampc_arg_dtype(const char *fn, const char *arg, AmpcTensorObject *t,
               ampc_dtype dt, const char *whose)
{
    if (t->dtype != dt) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have dtype %s (the %s's), got %s",
                     fn, arg, ampc_dtype_name(dt), whose,
                     ampc_dtype_name(t->dtype));
        return -1;
    }
    return 0;
}

int
ampc_arg_shape(const char *fn, const char *arg, AmpcTensorObject *t,
               int ndim, const int64_t *shape, const char *whose)
{
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) {
        ok = t->shape[d] == shape[d];
    }
    if (!ok) {
        char want[256], got[256];
        ampc_format_shape(want, sizeof(want), ndim, shape);
        ampc_format_shape(got, sizeof(got), t->ndim, t->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have the shape of %s, %s, got %s",
                     fn, arg, whose, want, got);
        return -1;
    }
    return 0;
}

/* A new contiguous tensor with t's values in dtype dt (t itself, new
 * reference, when it is already both). */
AmpcTensorObject *
ampc_nn_contiguous_as(AmpcTensorObject *t, ampc_dtype dt)
{
    if (t->dtype == dt) {
        return ampc_contiguous(t);
    }
    AmpcTensorObject *out = ampc_tensor_empty(t->ndim, t->shape, dt,
                                              t->device);
    if (out != NULL && ampc_copy_into(out, t) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

/* Raises exc with fmt, whose "%s" is fn and "%R" the number v (PyErr_Format
 * has no %g). */
void
ampc_nn_raise_number(PyObject *exc, const char *fmt, const char *fn, double v)
{
    PyObject *num = PyFloat_FromDouble(v);
    if (num != NULL) {
        PyErr_Format(exc, fmt, fn, num);
        Py_DECREF(num);
    }
}

// ----------------------------------------------------------------------------
// the losses' arguments (nn_loss.c, nn_mse.c)

/* 'none', 'mean' or 'sum' -> AMPC_REDUCTION_*; -1 with ValueError. */
int
ampc_nn_parse_reduction(const char *fn, PyObject *obj)
{
    static const char *const names[] = {"none", "mean", "sum"};
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    for (int i = 0; s != NULL && i < 3; i++) {
        if (strcmp(s, names[i]) == 0) {
            return i;
        }
    }
    if (s == NULL && PyErr_Occurred()) {
        return -1;
    }
    PyErr_Format(PyExc_ValueError,
                 "%s(): reduction must be 'none', 'mean' or 'sum', got %R",
                 fn, obj);
    return -1;
}

/* A 0-d CPU tensor of dt holding d, rounded once. */
AmpcTensorObject *
ampc_nn_scalar_tensor(double d, ampc_dtype dt)
{
    int64_t none[1] = {1};
    AmpcTensorObject *t = ampc_tensor_empty(0, none, dt,
                                            (ampc_device){AMPC_DEV_CPU, 0});
    if (t != NULL) {
        ampc_store_f64(dt, t->data, d);
    }
    return t;
}
