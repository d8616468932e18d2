/* nn_adaptive_max_pool.c - the Python-facing adaptive_max_pool2d of
 * ampc._C: torch's input checks, then the kernel slot (cpu/ref/
 * adaptive_max_pool.c, cuda/adaptive_max_pool.cu).  ampc/nn/_pool_more.py
 * parses output_size and takes the gradient with max_pool2d_backward at
 * the indices this returns.
 */
#include "nn_ops.h"

static PyObject *
op_adaptive_max_pool2d(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "oh", "ow", NULL};
    static const char *fn = "adaptive_max_pool2d";
    PyObject *x_obj;
    long long oh, ow;
    AmpcTensorObject *x;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLL:adaptive_max_pool2d",
                                     kwlist, &x_obj, &oh, &ow) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 ||
        ampc_nn_cuda_prologue(fn, 1, &x) < 0) {
        return NULL;
    }
    int nd = x->ndim;
    char buf[256];
    if (nd != 3 && nd != 4) {
        ampc_format_shape(buf, sizeof(buf), nd, x->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected 3D or 4D tensor, but got: %s", fn, buf);
        return NULL;
    }
    for (int d = nd - 3; d < nd; d++) {
        if (x->shape[d] == 0) {
            ampc_format_shape(buf, sizeof(buf), nd, x->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): Expected input to have non-zero size for "
                         "non-batch dimensions, but input has sizes %s with "
                         "dimension %d being empty",
                         fn, buf, d);
            return NULL;
        }
    }
    if (oh < 0 || ow < 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): elements of output_size must be greater than or "
                     "equal to 0 but received {%lld, %lld}",
                     fn, oh, ow);
        return NULL;
    }
    int64_t c = x->shape[nd - 3];
    ampc_pool2d_shape s = {.planes = nd == 4 ? x->shape[0] * c : c,
                           .h = x->shape[nd - 2], .w = x->shape[nd - 1],
                           .oh = oh, .ow = ow};
    int64_t out_shape[4];
    memcpy(out_shape, x->shape, sizeof(int64_t) * nd);
    out_shape[nd - 2] = oh;
    out_shape[nd - 1] = ow;

    PyObject *result = NULL;
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *y = NULL, *idx = NULL;
    if (xc == NULL ||
        (y = ampc_tensor_empty(nd, out_shape, x->dtype, x->device)) == NULL ||
        (idx = ampc_tensor_empty(nd, out_shape, AMPC_INT64, x->device)) ==
            NULL) {
        goto done;
    }
    if (s.planes * s.oh * s.ow > 0) {
        if (ampc_is_cuda(x)) {
            int rc = ampc_cuda.adaptive_max_pool2d(&s, x->dtype, xc->data,
                                                   y->data,
                                                   (int64_t *)idx->data);
            if (rc != 0) {
                ampc_cuda_raise(fn, rc);
                goto done;
            }
        }
        else {
            RUN_KERNEL(ampc_numel(x) + ampc_numel(y),
                       ampc_cpu.adaptive_max_pool2d(&s, x->dtype, xc->data,
                                                    y->data,
                                                    (int64_t *)idx->data));
        }
    }
    result = PyTuple_Pack(2, y, idx);
done:
    Py_XDECREF(xc);
    Py_XDECREF(y);
    Py_XDECREF(idx);
    return result;
}

PyMethodDef ampc_nn_adaptive_max_pool_methods[] = {
    {"adaptive_max_pool2d",
     (PyCFunction)(void (*)(void))op_adaptive_max_pool2d,
     METH_VARARGS | METH_KEYWORDS,
     "adaptive_max_pool2d(input, oh, ow) -> (output, indices): the max of "
     "each adaptive window of input (C, H, W) or (N, C, H, W), indices "
     "flat in each H*W plane (max_pool2d_backward's)"},
    {NULL},
};
