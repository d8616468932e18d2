/* nn_mse.c - mse_loss and its backward in ampc._C: the kernels' partial
 * sums (per chunk, in double) reduced here in order (on a GPU, on the
 * device).
 */
#include "ampc.h"

#include "nn_ops.h"

// ----------------------------------------------------------------------------
// mse_loss

static int
mse_args(const char *fn, PyObject *x_obj, PyObject *t_obj,
         AmpcTensorObject **x, AmpcTensorObject **t)
{
    if ((*x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        (*t = ampc_arg_tensor(fn, "target", t_obj)) == NULL ||
        ampc_arg_float(fn, "input", *x) < 0 ||
        ampc_arg_dtype(fn, "target", *t, (*x)->dtype, "input") < 0 ||
        ampc_arg_shape(fn, "target", *t, (*x)->ndim, (*x)->shape,
                       "input") < 0 ||
        ampc_nn_cuda_prologue(fn, 2, (AmpcTensorObject *[]){*x, *t}) < 0) {
        return -1;
    }
    return 0;
}

static PyObject *
op_mse_loss(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "target", "reduction", NULL};
    static const char *fn = "mse_loss";
    PyObject *x_obj, *t_obj, *red_obj = NULL;
    AmpcTensorObject *x, *t;
    int red = AMPC_REDUCTION_MEAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O:mse_loss", kwlist,
                                     &x_obj, &t_obj, &red_obj) ||
        mse_args(fn, x_obj, t_obj, &x, &t) < 0 ||
        (red_obj != NULL &&
         (red = ampc_nn_parse_reduction(fn, red_obj)) < 0)) {
        return NULL;
    }
    int64_t n = ampc_numel(x);
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *tc = xc == NULL ? NULL : ampc_contiguous(t);
    AmpcTensorObject *out = NULL;
    if (tc == NULL) {
        goto done;
    }
    if (ampc_is_cuda(x)) {
        int64_t one = 1;
        out = red == AMPC_REDUCTION_NONE
                  ? ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)
                  : ampc_tensor_empty(0, &one, x->dtype, x->device);
        int rc = out == NULL ? 0
                             : ampc_cuda.mse_loss_fwd(x->dtype, n, red,
                                                      xc->data, tc->data,
                                                      out->data);
        if (rc != 0) {
            Py_CLEAR(out);
            ampc_cuda_raise(fn, rc);
        }
        goto done;
    }
    if (red == AMPC_REDUCTION_NONE) {
        out = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device);
        if (out != NULL) {
            RUN_KERNEL(n, ampc_cpu.mse_loss_fwd(x->dtype, n, xc->data,
                                                tc->data, out->data, NULL));
        }
        goto done;
    }
    int64_t chunks = (n + AMPC_LOSS_CHUNK - 1) / AMPC_LOSS_CHUNK;
    double *partial = PyMem_Malloc(sizeof(double) * (size_t)(chunks + 1));
    if (partial == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    RUN_KERNEL(n, ampc_cpu.mse_loss_fwd(x->dtype, n, xc->data, tc->data,
                                        NULL, partial));
    double sum = 0.0;
    for (int64_t k = 0; k < chunks; k++) {
        sum += partial[k];
    }
    PyMem_Free(partial);
    /* an empty mean is 0 / 0 = NaN, as torch */
    out = ampc_nn_scalar_tensor(
        red == AMPC_REDUCTION_MEAN ? sum / (double)n : sum, x->dtype);
done:
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    return (PyObject *)out;
}

static PyObject *
op_mse_loss_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input", "target", "reduction",
                             NULL};
    static const char *fn = "mse_loss_backward";
    PyObject *g_obj, *x_obj, *t_obj, *red_obj = NULL;
    AmpcTensorObject *g, *x, *t;
    int red = AMPC_REDUCTION_MEAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:mse_loss_backward",
                                     kwlist, &g_obj, &x_obj, &t_obj,
                                     &red_obj) ||
        mse_args(fn, x_obj, t_obj, &x, &t) < 0 ||
        (red_obj != NULL &&
         (red = ampc_nn_parse_reduction(fn, red_obj)) < 0) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        ampc_arg_float(fn, "grad_output", g) < 0 ||
        ampc_check_same_device(x, g) < 0) {
        return NULL;
    }
    int64_t n = ampc_numel(x);
    double scale = 2.0;
    if (red == AMPC_REDUCTION_NONE) {
        if (ampc_arg_shape(fn, "grad_output", g, x->ndim, x->shape,
                           "input") < 0) {
            return NULL;
        }
    }
    else if (ampc_numel(g) != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): grad_output of a reduced loss must have one "
                     "element, got %lld",
                     fn, (long long)ampc_numel(g));
        return NULL;
    }
    else if (!ampc_is_cuda(x)) {
        /* on a GPU the kernel forms the scale from the device value */
        scale *= ampc_scalar_as_double(g->dtype, g->data);
        if (red == AMPC_REDUCTION_MEAN) {
            scale /= (double)n;
        }
    }
    AmpcTensorObject *xc = ampc_contiguous(x);
    AmpcTensorObject *tc = xc == NULL ? NULL : ampc_contiguous(t);
    AmpcTensorObject *gc = NULL, *gx = NULL;
    if (tc == NULL ||
        (red == AMPC_REDUCTION_NONE &&
         (gc = ampc_nn_contiguous_as(g, x->dtype)) == NULL) ||
        (gx = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)) ==
            NULL) {
        goto done;
    }
    if (ampc_is_cuda(x)) {
        int rc = ampc_cuda.mse_loss_bwd(x->dtype, n, red, xc->data, tc->data,
                                        gc != NULL ? gc->data : g->data,
                                        g->dtype, gx->data);
        if (rc != 0) {
            Py_CLEAR(gx);
            ampc_cuda_raise(fn, rc);
        }
    }
    else {
        RUN_KERNEL(n, ampc_cpu.mse_loss_bwd(x->dtype, n, xc->data, tc->data,
                                            gc != NULL ? gc->data : NULL,
                                            (float)scale, gx->data));
    }
done:
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(gc);
    return (PyObject *)gx;
}

// ----------------------------------------------------------------------------

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_nn_mse_methods[] = {
    {"mse_loss", KW(op_mse_loss),
     "mse_loss(input, target, reduction='mean')"},
    {"mse_loss_backward", KW(op_mse_loss_backward),
     "mse_loss_backward(grad_output, input, target, reduction='mean') -> "
     "grad_input (grad_target is its negation)"},
    {NULL},
};
