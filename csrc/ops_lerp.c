/* ops_lerp.c - lerp(input, end, weight, out=None): torch.lerp in one pass,
 * start + weight * (end - start) by PyTorch's two-sided rule
 * (elementwise_math.h ampc_lerp_f32), with broadcasting of the three
 * operands and a weight that is a tensor or a Python number (kept in
 * float32 for every dtype, as PyTorch's opmath).  input, end and a tensor
 * weight share one float dtype and one device, as PyTorch requires.  CPU
 * tensors run the CPU table's 1-D lerp per innermost run; CUDA tensors hand
 * the whole iteration to cuda/lerp.cu.  Tensor.lerp_ passes out=input;
 * errors then name lerp_.
 */
#include "ampc.h"

#include <string.h>

#include "ops.h"

// ----------------------------------------------------------------------------
// argument checks

/* end, or a tensor weight: a tensor of input's dtype and device. */
static AmpcTensorObject *
operand_arg(const char *fn, const char *arg, PyObject *obj,
            AmpcTensorObject *input)
{
    AmpcTensorObject *t = ampc_arg_tensor(fn, arg, obj);
    if (t == NULL) {
        return NULL;
    }
    if (t->dtype != input->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected dtype %s for `%s` but got dtype %s", fn,
                     ampc_dtype_name(input->dtype), arg,
                     ampc_dtype_name(t->dtype));
        return NULL;
    }
    return ampc_check_same_device(input, t) < 0 ? NULL : t;
}

/* A number weight as the kernels' float32 scalar. */
static int
scalar_weight(const char *fn, PyObject *obj, float *w)
{
    if (!PyFloat_Check(obj) && !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'weight' must be a Tensor or a number, "
                     "not %.100s",
                     fn, Py_TYPE(obj)->tp_name);
        return -1;
    }
    double d = PyFloat_AsDouble(obj);
    if (d == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    *w = (float)d;
    return 0;
}

/* The output: a new tensor, or `out` checked (device, shape, dtype,
 * overlap).  New reference. */
static AmpcTensorObject *
lerp_out(const char *fn, PyObject *out_obj, int nd, const int64_t *shape,
         AmpcTensorObject *input)
{
    if (out_obj == Py_None) {
        return ampc_tensor_empty(nd, shape, input->dtype, input->device);
    }
    if (ampc_check_tensor_any(fn, "out", out_obj) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = AMPC_TENSOR(out_obj);
    if (ampc_check_same_device(input, out) < 0) {
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
                     "%s(): output with shape %s doesn't match the "
                     "broadcast shape %s",
                     fn, b, a);
        return NULL;
    }
    if (out->dtype != input->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected out to have dtype %s (the input's), "
                     "got %s",
                     fn, ampc_dtype_name(input->dtype),
                     ampc_dtype_name(out->dtype));
        return NULL;
    }
    if (ampc_has_internal_overlap(out)) {
        return NULL;
    }
    return (AmpcTensorObject *)Py_NewRef(out);
}

// ----------------------------------------------------------------------------
// running it

typedef struct {
    ampc_dtype dt;
    int has_weight;
    float scalar;
} lerp_ctx;

static void
lerp_inner(void *ctx, int64_t n, char **p, const int64_t *s)
{
    const lerp_ctx *c = ctx;
    ampc_cpu.lerp(c->dt, n, p[1], s[1], p[2], s[2],
                  c->has_weight ? p[3] : NULL, c->has_weight ? s[3] : 0,
                  c->scalar, p[0], s[0]);
}

/* ops: out, start, end and (nops == 4) weight. */
static int
run_lerp(const char *fn, int nops, AmpcTensorObject *const *ops,
         float scalar)
{
    ampc_iter it;
    ampc_iter_init(&it, nops, (AmpcTensorObject **)ops);
    AmpcTensorObject *out = ops[0];
    if (!ampc_is_cuda(out)) {
        lerp_ctx c = {out->dtype, nops == 4, scalar};
        ampc_run_iter(&it, lerp_inner, &c, ampc_numel(out));
        return 0;
    }
    int code = ampc_cuda.lerp(out->dtype, &it, scalar);
    if (code != 0) {
        ampc_cuda_raise(fn, code);
        return -1;
    }
    return 0;
}

static PyObject *
op_lerp(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "end", "weight", "out", NULL};
    PyObject *in_obj, *end_obj, *w_obj, *out_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:lerp", kwlist,
                                     &in_obj, &end_obj, &w_obj, &out_obj)) {
        return NULL;
    }
    const char *fn = out_obj == in_obj ? "lerp_" : "lerp";
    AmpcTensorObject *input = ampc_arg_tensor(fn, "input", in_obj);
    if (input == NULL) {
        return NULL;
    }
    if (!ampc_dtype_is_float(input->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): not implemented for %s tensors (floating point "
                     "only)",
                     fn, ampc_dtype_name(input->dtype));
        return NULL;
    }
    AmpcTensorObject *end = operand_arg(fn, "end", end_obj, input);
    if (end == NULL) {
        return NULL;
    }
    AmpcTensorObject *weight = NULL;
    float scalar = 0.0f;
    if (ampc_tensor_check(w_obj)) {
        if ((weight = operand_arg(fn, "weight", w_obj, input)) == NULL) {
            return NULL;
        }
    }
    else if (scalar_weight(fn, w_obj, &scalar) < 0) {
        return NULL;
    }
    int nd;
    int64_t shape[AMPC_MAX_DIMS];
    if (ampc_broadcast_shapes(fn, input->ndim, input->shape, end->ndim,
                              end->shape, &nd, shape) < 0 ||
        (weight != NULL &&
         ampc_broadcast_shapes(fn, nd, shape, weight->ndim, weight->shape,
                               &nd, shape) < 0) ||
        ampc_cuda_enter(fn, input->device) < 0) {
        return NULL;
    }
    AmpcTensorObject *out = lerp_out(fn, out_obj, nd, shape, input);
    if (out == NULL) {
        return NULL;
    }
    AmpcTensorObject *ops[4] = {out, NULL, NULL, NULL};
    AmpcTensorObject *const given[3] = {input, end, weight};
    int nops = weight != NULL ? 4 : 3;
    int rc = 0;
    for (int k = 1; k < nops && rc == 0; k++) {
        ops[k] = ampc_unalias(given[k - 1], out);
        rc = ops[k] == NULL ? -1 : 0;
    }
    if (rc == 0 && run_lerp(fn, nops, ops, scalar) == 0) {
        out->storage->version += out_obj != Py_None;
    }
    else {
        rc = -1;
    }
    /* NOTE: freeing while a kernel is queued is safe: the caching
     * allocator hands a block only to later work on the same stream */
    for (int k = 1; k < nops; k++) {
        Py_XDECREF(ops[k]);
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_lerp_methods[] = {
    {"lerp", (PyCFunction)(void (*)(void))op_lerp,
     METH_VARARGS | METH_KEYWORDS,
     "lerp(input, end, weight, out=None) -> input + weight * (end - input) "
     "element-wise by PyTorch's two-sided rule (exact at weight 1), in one "
     "pass; weight a tensor or a number, broadcast"},
    {NULL},
};
