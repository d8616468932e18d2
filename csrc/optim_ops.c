/* optim_ops.c - the Python-facing fused optimizer steps of ampc._C:
 * sgd_step_ and adam_step_ update one parameter and its state in place, in
 * one pass, with torch.optim.SGD's and Adam's (AdamW's) arithmetic.  The
 * hyper-parameters are checked as torch's optimizer constructors check them;
 * the bias corrections of Adam are computed here in double, as torch
 * computes them in Python floats.  ampc/optim wraps these.
 */
#include "ampc.h"

#include <math.h>

/* Below this many elements a step keeps the GIL: releasing it costs more. */
#define RELEASE_GIL_MIN 65536

// ----------------------------------------------------------------------------
// argument helpers

/* A tensor the step writes: float, contiguous, of the param's dtype and
 * shape (the param itself is checked against itself). */
static AmpcTensorObject *
state_tensor(const char *fn, const char *arg, PyObject *obj,
             AmpcTensorObject *param)
{
    AmpcTensorObject *t = ampc_arg_tensor(fn, arg, obj);
    if (t == NULL || ampc_arg_float(fn, arg, t) < 0 ||
        (param != NULL &&
         (ampc_arg_dtype(fn, arg, t, param->dtype, "param") < 0 ||
          ampc_arg_shape(fn, arg, t, param->ndim, param->shape, "param") <
              0))) {
        return NULL;
    }
    if (!ampc_is_contiguous(t)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): %s must be contiguous (it is updated in place)",
                     fn, arg);
        return NULL;
    }
    return t;
}

/* torch's constructor check: "Invalid learning rate: -1.0" */
static int
check_range(const char *what, double v, double lo, double hi, int hi_open)
{
    if (!(v >= lo && (hi_open ? v < hi : v <= hi))) {
        PyObject *num = PyFloat_FromDouble(v);
        if (num != NULL) {
            PyErr_Format(PyExc_ValueError, "Invalid %s: %R", what, num);
            Py_DECREF(num);
        }
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// SGD

static PyObject *
op_sgd_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"param", "grad", "momentum_buffer", "lr",
                             "momentum", "dampening", "weight_decay",
                             "nesterov", "maximize", "first_step", NULL};
    static const char *fn = "sgd_step_";
    PyObject *p_obj, *g_obj, *b_obj;
    double lr, momentum, dampening, weight_decay;
    int nesterov, maximize, first_step;
    AmpcTensorObject *p, *g, *buf = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOddddppp:sgd_step_",
                                     kwlist, &p_obj, &g_obj, &b_obj, &lr,
                                     &momentum, &dampening, &weight_decay,
                                     &nesterov, &maximize, &first_step) ||
        (p = state_tensor(fn, "param", p_obj, NULL)) == NULL ||
        (g = ampc_arg_tensor(fn, "grad", g_obj)) == NULL ||
        ampc_arg_dtype(fn, "grad", g, p->dtype, "param") < 0 ||
        ampc_arg_shape(fn, "grad", g, p->ndim, p->shape, "param") < 0 ||
        check_range("learning rate", lr, 0.0, INFINITY, 0) < 0 ||
        check_range("momentum value", momentum, 0.0, INFINITY, 0) < 0 ||
        check_range("weight_decay value", weight_decay, 0.0, INFINITY, 0) <
            0) {
        return NULL;
    }
    if (nesterov && (momentum <= 0.0 || dampening != 0.0)) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): Nesterov momentum requires a momentum and zero "
                     "dampening",
                     fn);
        return NULL;
    }
    /* the buffer is read only with momentum, as torch keeps none without */
    if (momentum != 0.0) {
        if (b_obj == Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): momentum_buffer is required when momentum "
                         "!= 0 (pass a tensor like param, with "
                         "first_step=True on the first step)",
                         fn);
            return NULL;
        }
        if ((buf = state_tensor(fn, "momentum_buffer", b_obj, p)) == NULL) {
            return NULL;
        }
    }
    ampc_sgd_args a = {
        .lr = (float)lr,
        .momentum = (float)momentum,
        .one_minus_dampening = (float)(1.0 - dampening),
        .weight_decay = (float)weight_decay,
        .nesterov = nesterov,
        .maximize = maximize,
        .first_step = first_step,
    };
    AmpcTensorObject *gc = ampc_contiguous(g);
    if (gc == NULL) {
        return NULL;
    }
    int64_t n = ampc_numel(p);
    void *bdata = buf != NULL ? buf->data : NULL;
    if (n >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.sgd_step(&a, p->dtype, n, p->data, gc->data, bdata);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.sgd_step(&a, p->dtype, n, p->data, gc->data, bdata);
    }
    Py_DECREF(gc);
    p->storage->version++;
    if (buf != NULL) {
        buf->storage->version++;
    }
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------
// Adam and AdamW

static PyObject *
op_adam_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"param", "grad", "exp_avg", "exp_avg_sq",
                             "max_exp_avg_sq", "step", "lr", "beta1",
                             "beta2", "eps", "weight_decay", "amsgrad",
                             "maximize", "decoupled_weight_decay", NULL};
    static const char *fn = "adam_step_";
    PyObject *p_obj, *g_obj, *m_obj, *v_obj, *x_obj;
    double step, lr, beta1, beta2, eps, weight_decay;
    int amsgrad, maximize, decoupled;
    AmpcTensorObject *p, *g, *m, *v, *vmax = NULL;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOddddddppp:adam_step_", kwlist, &p_obj, &g_obj,
            &m_obj, &v_obj, &x_obj, &step, &lr, &beta1, &beta2, &eps,
            &weight_decay, &amsgrad, &maximize, &decoupled) ||
        (p = state_tensor(fn, "param", p_obj, NULL)) == NULL ||
        (g = ampc_arg_tensor(fn, "grad", g_obj)) == NULL ||
        ampc_arg_dtype(fn, "grad", g, p->dtype, "param") < 0 ||
        ampc_arg_shape(fn, "grad", g, p->ndim, p->shape, "param") < 0 ||
        (m = state_tensor(fn, "exp_avg", m_obj, p)) == NULL ||
        (v = state_tensor(fn, "exp_avg_sq", v_obj, p)) == NULL ||
        check_range("learning rate", lr, 0.0, INFINITY, 0) < 0 ||
        check_range("epsilon value", eps, 0.0, INFINITY, 0) < 0 ||
        check_range("beta parameter at index 0", beta1, 0.0, 1.0, 1) < 0 ||
        check_range("beta parameter at index 1", beta2, 0.0, 1.0, 1) < 0 ||
        check_range("weight_decay value", weight_decay, 0.0, INFINITY, 0) <
            0) {
        return NULL;
    }
    if (!(step >= 1.0)) {
        PyObject *num = PyFloat_FromDouble(step);
        if (num != NULL) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): step is the 1-based number of this step and "
                         "must be >= 1, got %R",
                         fn, num);
            Py_DECREF(num);
        }
        return NULL;
    }
    if (amsgrad) {
        if (x_obj == Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): max_exp_avg_sq is required when amsgrad is "
                         "True",
                         fn);
            return NULL;
        }
        if ((vmax = state_tensor(fn, "max_exp_avg_sq", x_obj, p)) == NULL) {
            return NULL;
        }
    }
    /* torch: step_size = lr / (1 - beta1 ** step), and the second moment
     * is divided by (1 - beta2 ** step) ** 0.5, all in Python floats */
    double bias_correction1 = 1.0 - pow(beta1, step);
    double bias_correction2 = 1.0 - pow(beta2, step);
    ampc_adam_args a = {
        .one_minus_beta1 = (float)(1.0 - beta1),
        .beta2 = (float)beta2,
        .one_minus_beta2 = (float)(1.0 - beta2),
        .eps = (float)eps,
        .weight_decay = (float)weight_decay,
        .decay = (float)(1.0 - lr * weight_decay),
        .neg_step_size = (float)(-(lr / bias_correction1)),
        .bias_correction2_sqrt = (float)pow(bias_correction2, 0.5),
        .maximize = maximize,
        .decoupled = decoupled,
    };
    AmpcTensorObject *gc = ampc_contiguous(g);
    if (gc == NULL) {
        return NULL;
    }
    int64_t n = ampc_numel(p);
    void *xdata = vmax != NULL ? vmax->data : NULL;
    if (n >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.adam_step(&a, p->dtype, n, p->data, gc->data, m->data,
                           v->data, xdata);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.adam_step(&a, p->dtype, n, p->data, gc->data, m->data,
                           v->data, xdata);
    }
    Py_DECREF(gc);
    p->storage->version++;
    m->storage->version++;
    v->storage->version++;
    if (vmax != NULL) {
        vmax->storage->version++;
    }
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_optim_methods[] = {
    {"sgd_step_", (PyCFunction)(void (*)(void))op_sgd_step_,
     METH_VARARGS | METH_KEYWORDS,
     "sgd_step_(param, grad, momentum_buffer, lr, momentum, dampening, "
     "weight_decay, nesterov, maximize, first_step): one fused in-place "
     "torch.optim.SGD step"},
    {"adam_step_", (PyCFunction)(void (*)(void))op_adam_step_,
     METH_VARARGS | METH_KEYWORDS,
     "adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, "
     "lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, "
     "decoupled_weight_decay): one fused in-place torch.optim.Adam (AdamW "
     "when decoupled) step"},
    {NULL},
};
