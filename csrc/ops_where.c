/* ops_where.c - where(condition, input, other, out=None): condition ? input
 * : other element-wise (torch.where), with broadcasting of all three,
 * Python numbers for input and other, and the binary ops' type promotion
 * of input and other (ampc_result_type).  CPU tensors run the CPU table's
 * 1-D select per innermost run; CUDA tensors hand the whole iteration to
 * cuda/where.cu, a Python number (or a CPU 0-d tensor beside CUDA ones)
 * going to the kernel by value.  masked_fill is where(mask, value, self)
 * in ampc/_tensor_ops.py; masked_fill_ passes out=self.
 */
#include "ampc.h"

#include <string.h>

#include "ops.h"

static const char *const arg_names[3] = {"condition", "input", "other"};

// ----------------------------------------------------------------------------
// argument checks

/* -1 with an exception unless condition is a bool tensor and input and
 * other are tensors or Python numbers. */
static int
check_types(PyObject *const ops[3])
{
    if (!ampc_tensor_check(ops[0])) {
        PyErr_Format(PyExc_TypeError,
                     "where(): argument 'condition' must be a Tensor, not "
                     "%.100s",
                     Py_TYPE(ops[0])->tp_name);
        return -1;
    }
    if (AMPC_TENSOR(ops[0])->dtype != AMPC_BOOL) {
        PyErr_Format(PyExc_RuntimeError,
                     "where(): expected condition to be a bool tensor, but "
                     "got a tensor with dtype %s",
                     ampc_dtype_name(AMPC_TENSOR(ops[0])->dtype));
        return -1;
    }
    for (int k = 1; k < 3; k++) {
        if (!ampc_tensor_check(ops[k]) && !PyFloat_Check(ops[k]) &&
            !PyLong_Check(ops[k])) {
            PyErr_Format(PyExc_TypeError,
                         "where(): argument '%s' must be a Tensor or a "
                         "Python number, not %.100s",
                         arg_names[k], Py_TYPE(ops[k])->tp_name);
            return -1;
        }
    }
    return 0;
}

/* The device the op runs on: that of a CUDA operand, else the CPU.  Every
 * tensor must be on it, except that a CPU 0-d tensor may stand beside CUDA
 * tensors, as in PyTorch.  -1 with RuntimeError otherwise. */
static int
where_device(PyObject *const ops[3], ampc_device *dev)
{
    dev->type = AMPC_DEV_CPU;
    dev->index = 0;
    for (int k = 0; k < 3; k++) {
        if (ampc_tensor_check(ops[k]) && ampc_is_cuda(AMPC_TENSOR(ops[k]))) {
            *dev = AMPC_TENSOR(ops[k])->device;
            break;
        }
    }
    int ok = 1;
    for (int k = 0; k < 3 && ok; k++) {
        if (!ampc_tensor_check(ops[k])) {
            continue;
        }
        AmpcTensorObject *t = AMPC_TENSOR(ops[k]);
        ok = (t->device.type == dev->type &&
              t->device.index == dev->index) ||
             (!ampc_is_cuda(t) && t->ndim == 0);
    }
    if (ok) {
        return 0;
    }
    char where[3][32];
    for (int k = 0; k < 3; k++) {
        if (ampc_tensor_check(ops[k])) {
            ampc_device_str(where[k], sizeof(where[k]),
                            AMPC_TENSOR(ops[k])->device);
        }
        else {
            strcpy(where[k], "(a number)");
        }
    }
    PyErr_Format(PyExc_RuntimeError,
                 "where(): expected condition, input and other to be on the "
                 "same device (a CPU 0-d tensor may stand beside CUDA "
                 "tensors), but condition is on %s, input on %s and other "
                 "on %s",
                 where[0], where[1], where[2]);
    return -1;
}

/* The broadcast shape of the three operands (a number is 0-d); -1 with
 * RuntimeError naming the two arguments that disagree. */
static int
where_shape(PyObject *const ops[3], int *nd_out, int64_t *shape)
{
    int nds[3] = {0, 0, 0};
    const int64_t *shs[3] = {NULL, NULL, NULL};
    int nd = 0;
    for (int k = 0; k < 3; k++) {
        if (ampc_tensor_check(ops[k])) {
            nds[k] = AMPC_TENSOR(ops[k])->ndim;
            shs[k] = AMPC_TENSOR(ops[k])->shape;
        }
        nd = nds[k] > nd ? nds[k] : nd;
    }
    for (int i = 0; i < nd; i++) {
        int64_t size = 1;
        int from = -1;
        for (int k = 0; k < 3; k++) {
            int td = i - (nd - nds[k]);
            if (td < 0 || shs[k][td] == 1) {
                continue;
            }
            if (from >= 0 && shs[k][td] != size) {
                char s[3][256];
                for (int j = 0; j < 3; j++) {
                    ampc_format_shape(s[j], sizeof(s[j]), nds[j], shs[j]);
                }
                PyErr_Format(PyExc_RuntimeError,
                             "where(): the size of %s (%lld) must match the "
                             "size of %s (%lld) at non-singleton dimension "
                             "%d (shapes: condition %s, input %s, other %s)",
                             arg_names[from], (long long)size, arg_names[k],
                             (long long)shs[k][td], i, s[0], s[1], s[2]);
                return -1;
            }
            size = shs[k][td];
            from = k;
        }
        shape[i] = size;
    }
    *nd_out = nd;
    return 0;
}

/* The output: a new tensor, or `out` checked (device, shape, dtype,
 * overlap).  New reference. */
static AmpcTensorObject *
where_out(PyObject *out_obj, int nd, const int64_t *shape, ampc_dtype dt,
          ampc_device dev)
{
    if (out_obj == Py_None) {
        return ampc_tensor_empty(nd, shape, dt, dev);
    }
    if (ampc_check_tensor_any("where", "out", out_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = AMPC_TENSOR(out_obj);
    if (out->device.type != dev.type || out->device.index != dev.index) {
        char a[32], b[32];
        ampc_device_str(a, sizeof(a), dev);
        ampc_device_str(b, sizeof(b), out->device);
        PyErr_Format(PyExc_RuntimeError,
                     "where(): expected out to be on %s, but it is on %s", a,
                     b);
        return NULL;
    }
    int same = out->ndim == nd;
    for (int d = 0; same && d < nd; d++) {
        same = out->shape[d] == shape[d];
    }
    if (!same) {
        char a[256], b[256];
        ampc_format_shape(a, sizeof(a), nd, shape);
        ampc_format_shape(b, sizeof(b), out->ndim, out->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "where(): output with shape %s doesn't match the "
                     "broadcast shape %s",
                     b, a);
        return NULL;
    }
    if (out->dtype != dt) {
        PyErr_Format(PyExc_RuntimeError,
                     "where(): expected out to have dtype %s (the promoted "
                     "dtype of input and other), but got %s",
                     ampc_dtype_name(dt), ampc_dtype_name(out->dtype));
        return NULL;
    }
    if (ampc_has_internal_overlap(out)) {
        return NULL;
    }
    Py_INCREF(out);
    return out;
}

// ----------------------------------------------------------------------------
// running it

/* Operand k as the iteration sees it: a tensor in dtype dt (cast, and
 * copied when it overlaps out without being out; new reference), or a
 * number written into buf behind the 0-d stand-in.  NULL with an
 * exception. */
static AmpcTensorObject *
operand(PyObject *v, int k, ampc_dtype dt, AmpcTensorObject *out,
        AmpcTensorObject *stand_in, char *buf)
{
    if (!ampc_tensor_check(v)) {
        if (ampc_scalar_from_python(v, dt, buf, "where", arg_names[k]) < 0) {
            return NULL;
        }
        ampc_scalar_operand(stand_in, dt, buf);
        return stand_in;
    }
    AmpcTensorObject *t = ampc_as_dtype(AMPC_TENSOR(v), dt);
    AmpcTensorObject *u = t == NULL ? NULL : ampc_unalias(t, out);
    Py_XDECREF(t);
    return u;
}

typedef struct {
    size_t es;
} where_ctx;

static void
where_inner(void *ctx, int64_t n, char **p, const int64_t *s)
{
    const where_ctx *c = ctx;
    ampc_cpu.where(c->es, n, (const uint8_t *)p[1], s[1], p[2], s[2], p[3],
                   s[3], p[0], s[0]);
}

/* ops: out, condition, input, other.  On a GPU, an operand in host memory
 * (a number's stand-in, a CPU 0-d tensor) goes to the kernel by value. */
static int
run_where(AmpcTensorObject *const ops[4])
{
    ampc_iter it;
    ampc_iter_init(&it, 4, (AmpcTensorObject **)ops);
    AmpcTensorObject *out = ops[0];
    size_t es = ampc_dtype_size[out->dtype];
    if (!ampc_is_cuda(out)) {
        where_ctx c = {es};
        ampc_run_iter(&it, where_inner, &c, ampc_numel(out));
        return 0;
    }
    ampc_cuda_where_values v;
    memset(&v, 0, sizeof(v));
    for (int k = 0; k < 3; k++) {
        AmpcTensorObject *t = ops[k + 1];
        if (!ampc_is_cuda(t)) {
            v.host |= 1u << k;
            memcpy(&v.bits[k], t->data, ampc_dtype_size[t->dtype]);
        }
    }
    int code = ampc_cuda.where(es, &it, &v);
    if (code != 0) {
        ampc_cuda_raise("where", code);
        return -1;
    }
    return 0;
}

static PyObject *
op_where(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"condition", "input", "other", "out", NULL};
    PyObject *ops[3], *out_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:where", kwlist,
                                     &ops[0], &ops[1], &ops[2], &out_obj) ||
        check_types(ops) < 0) {
        return NULL;
    }
    ampc_dtype dt;
    ampc_result_type(2, ops + 1, &dt);
    ampc_device dev;
    int nd;
    int64_t shape[AMPC_MAX_DIMS];
    if (where_device(ops, &dev) < 0 || where_shape(ops, &nd, shape) < 0 ||
        ampc_cuda_enter("where", dev) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = where_out(out_obj, nd, shape, dt, dev);
    if (out == NULL) {
        return NULL;
    }
    AmpcTensorObject stand_in[2];
    char buf[2][8];
    AmpcTensorObject *in[4] = {out, NULL, NULL, NULL};
    int rc = -1;
    in[1] = ampc_unalias(AMPC_TENSOR(ops[0]), out);
    for (int k = 1; k < 3 && in[k] != NULL; k++) {
        in[k + 1] = operand(ops[k], k, dt, out, &stand_in[k - 1],
                            buf[k - 1]);
    }
    if (in[3] != NULL && run_where(in) == 0) {
        rc = 0;
        out->storage->version += out_obj != Py_None;
    }
    /* NOTE: freeing while a kernel is queued is safe: the caching
     * allocator hands a block only to later work on the same stream */
    for (int k = 1; k < 4; k++) {
        if (in[k] != NULL && (k == 1 || in[k] != &stand_in[k - 2])) {
            Py_DECREF(in[k]);
        }
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_where_methods[] = {
    {"where", (PyCFunction)(void (*)(void))op_where,
     METH_VARARGS | METH_KEYWORDS,
     "where(condition, input, other, out=None) -> condition ? input : other "
     "element-wise; input and other may be Python numbers"},
    {NULL},
};
