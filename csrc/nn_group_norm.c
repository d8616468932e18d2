/* nn_group_norm.c - the Python-facing group_norm ops of ampc._C: forward
 * (returning each (sample, group)'s mean and rstd, which backward needs)
 * and backward, on the group_norm_fwd / group_norm_bwd slots (kernels.h,
 * kernels_cuda.h).  The checks are PyTorch's native_group_norm's, with
 * nn_norm.c's parameter rules (a 16-bit input may take float32 weight and
 * bias).  No autograd here: ampc/nn/_group_norm.py wraps these.
 */
#include "ampc.h"

#include "linalg_ops.h"
#include "nn_norm.h"
#include "nn_ops.h"
#include "ops.h"

static const char *const gn_names[] = {"weight", "bias"};

/* x (N, C, *) split into `groups` groups of channels -> s (n, c, hw,
 * groups). */
static int
gn_shape(const char *fn, AmpcTensorObject *x, long long groups,
         ampc_group_norm_shape *s)
{
    if (x->ndim < 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected input to have 2 or more dimensions "
                     "(N, C, *), got %d-D",
                     fn, x->ndim);
        return -1;
    }
    if (groups <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected num_groups to be positive, but got %lld",
                     fn, groups);
        return -1;
    }
    if (x->shape[1] % groups != 0) {
        char got[256];
        ampc_format_shape(got, sizeof(got), x->ndim, x->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected number of channels in input to be "
                     "divisible by num_groups, but got input of shape %s and "
                     "num_groups=%lld",
                     fn, got, groups);
        return -1;
    }
    s->n = x->shape[0];
    s->c = x->shape[1];
    s->groups = groups;
    s->hw = 1;
    for (int d = 2; d < x->ndim; d++) {
        s->hw *= x->shape[d];
    }
    return 0;
}

static PyObject *
op_group_norm(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "num_groups", "weight", "bias", "eps",
                             NULL};
    static const char *fn = "group_norm";
    PyObject *x_obj, *w_obj = Py_None, *b_obj = Py_None;
    long long groups;
    double eps = 1e-5;
    AmpcTensorObject *x, *ps[2];
    ampc_group_norm_shape s;
    ampc_dtype pdt;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OL|OOd:group_norm", kwlist,
                                     &x_obj, &groups, &w_obj, &b_obj, &eps) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_norm_opt_tensor(fn, "weight", w_obj, &ps[0]) < 0 ||
        ampc_norm_opt_tensor(fn, "bias", b_obj, &ps[1]) < 0 ||
        ampc_arg_float(fn, "input", x) < 0 ||
        gn_shape(fn, x, groups, &s) < 0 ||
        ampc_norm_check_counts(fn, 2, ps, gn_names, s.c,
                               "channel of input") < 0 ||
        ampc_norm_param_dtype(fn, x->dtype, 2, ps, gn_names, &pdt) < 0 ||
        ampc_nn_cuda_prologue(fn, 3, (AmpcTensorObject *[]){x, ps[0],
                                                          ps[1]}) < 0) {
        return NULL;
    }
    s.eps = eps;

    PyObject *result = NULL;
    int64_t stats_shape[2] = {s.n, s.groups};
    AmpcTensorObject *in[3] = {x, ps[0], ps[1]}, *c[3];
    AmpcTensorObject *y = NULL, *mean = NULL, *rstd = NULL;
    if (ampc_norm_contiguous_all(3, in, c) < 0) {
        return NULL;
    }
    if ((y = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)) ==
            NULL ||
        (mean = ampc_tensor_empty(2, stats_shape, AMPC_FLOAT32,
                                  x->device)) == NULL ||
        (rstd = ampc_tensor_empty(2, stats_shape, AMPC_FLOAT32,
                                  x->device)) == NULL) {
        goto done;
    }
    int rc = 0, cuda = ampc_is_cuda(x);
    void *w = ampc_norm_data(c[1]), *b = ampc_norm_data(c[2]);
    if (s.n * s.groups > 0 && cuda) {
        rc = ampc_cuda.group_norm_fwd(&s, x->dtype, pdt, c[0]->data, w, b,
                                      (float *)mean->data,
                                      (float *)rstd->data, y->data);
    }
    else if (s.n * s.groups > 0) {
        RUN_KERNEL(ampc_numel(x),
                   rc = ampc_cpu.group_norm_fwd(
                       &s, x->dtype, pdt, c[0]->data, w, b,
                       (float *)mean->data, (float *)rstd->data, y->data));
    }
    if (ampc_norm_kernel_status(fn, cuda, rc) == 0) {
        result = PyTuple_Pack(3, y, mean, rstd);
    }
done:
    ampc_norm_release_all(3, c);
    Py_XDECREF(y);
    Py_XDECREF(mean);
    Py_XDECREF(rstd);
    return result;
}

static PyObject *
op_group_norm_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input", "num_groups", "weight",
                             "mean", "rstd", "needs", NULL};
    static const char *fn = "group_norm_backward";
    PyObject *g_obj, *x_obj, *w_obj, *m_obj, *r_obj, *needs_obj;
    long long groups;
    AmpcTensorObject *g, *x, *w, *m, *r;
    ampc_group_norm_shape s = {0};
    int needs[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOLOOOO:group_norm_backward",
                                     kwlist, &g_obj, &x_obj, &groups, &w_obj,
                                     &m_obj, &r_obj, &needs_obj) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        (m = ampc_arg_tensor(fn, "mean", m_obj)) == NULL ||
        (r = ampc_arg_tensor(fn, "rstd", r_obj)) == NULL ||
        ampc_norm_opt_tensor(fn, "weight", w_obj, &w) < 0 ||
        ampc_la_parse_needs(fn, needs_obj,
                            "need_input, need_weight, need_bias",
                            needs) < 0 ||
        ampc_arg_float(fn, "input", x) < 0 ||
        gn_shape(fn, x, groups, &s) < 0 ||
        ampc_arg_dtype(fn, "grad_output", g, x->dtype, "input") < 0 ||
        ampc_arg_shape(fn, "grad_output", g, x->ndim, x->shape,
                       "input") < 0 ||
        ampc_norm_check_saved(fn, "mean", m, s.n * s.groups,
                              "(sample, group) of input") < 0 ||
        ampc_norm_check_saved(fn, "rstd", r, s.n * s.groups,
                              "(sample, group) of input") < 0 ||
        ampc_norm_check_counts(fn, 1, &w, gn_names, s.c,
                               "channel of input") < 0) {
        return NULL;
    }
    AmpcTensorObject *in[5] = {g, x, w, m, r};
    /* with no samples the kernel still writes zero parameter gradients */
    return ampc_norm_backward(fn, AMPC_NORM_KIND_GROUP, &s, s.c > 0, in,
                              needs, 1, &s.c, gn_names);
}

// ----------------------------------------------------------------------------

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_nn_group_norm_methods[] = {
    {"group_norm", KW(op_group_norm),
     "group_norm(input, num_groups, weight=None, bias=None, eps=1e-5) -> "
     "(output, mean, rstd), the statistics of shape (N, num_groups)"},
    {"group_norm_backward", KW(op_group_norm_backward),
     "group_norm_backward(grad_output, input, num_groups, weight, mean, "
     "rstd, needs) -> (grad_input, grad_weight, grad_bias), None where "
     "needs is False"},
    {NULL},
};
