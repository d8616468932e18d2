/* optim_ops.c - the Python-facing fused optimizer steps of ampc._C:
 * sgd_step_ and adam_step_ update one parameter and its state in place, in
 * one pass, with torch.optim.SGD's and Adam's (AdamW's) arithmetic.  The
 * hyper-parameters are checked as torch's optimizer constructors check them;
 * the bias corrections of Adam are computed here in double, as torch
 * computes them in Python floats.  ampc/optim wraps these.
 *
 * On a GPU every tensor is on the param's device and the step is one
 * queued kernel.  PyTorch's _step_supports_amp_scaling contract: grad_scale
 * and found_inf (one-element float32 tensors on the param's device, or
 * None) are passed to the kernels as pointers, which skip the whole step
 * when *found_inf != 0 and use grad / *grad_scale, writing that unscaled
 * gradient back to the grad tensor as torch's fused kernels do; and Adam's step may be a float32 tensor on the param's
 * device, which the kernel advances (unless skipped) and takes the bias
 * corrections from: a step then never waits for the GPU.
 */
#include "ampc.h"

#include <math.h>

#include "nn_math.h"
#include "ops.h"

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
         (ampc_check_same_device(param, t) < 0 ||
          ampc_arg_dtype(fn, arg, t, param->dtype, "param") < 0 ||
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

/* An optional one-element float32 tensor on the param's device (grad_scale,
 * found_inf, Adam's step tensor): *ptr = its element's address, or NULL for
 * None. */
static int
scalar_state(const char *fn, const char *arg, PyObject *obj,
             AmpcTensorObject *param, float **ptr)
{
    *ptr = NULL;
    if (obj == Py_None) {
        return 0;
    }
    AmpcTensorObject *t = ampc_arg_tensor(fn, arg, obj);
    if (t == NULL) {
        return -1;
    }
    if (t->dtype != AMPC_FLOAT32 || ampc_numel(t) != 1) {
        char buf[256];
        ampc_format_shape(buf, sizeof(buf), t->ndim, t->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to be a one-element float32 tensor, "
                     "got %s of shape %s",
                     fn, arg, ampc_dtype_name(t->dtype), buf);
        return -1;
    }
    if (ampc_check_same_device(param, t) < 0) {
        return -1;
    }
    *ptr = (float *)t->data;
    return 0;
}

/* A grad on the param's device, contiguous (new reference). */
static AmpcTensorObject *
grad_tensor(const char *fn, PyObject *obj, AmpcTensorObject *p)
{
    AmpcTensorObject *g = ampc_arg_tensor(fn, "grad", obj);
    if (g == NULL || ampc_check_same_device(p, g) < 0 ||
        ampc_arg_dtype(fn, "grad", g, p->dtype, "param") < 0 ||
        ampc_arg_shape(fn, "grad", g, p->ndim, p->shape, "param") < 0) {
        return NULL;
    }
    return ampc_contiguous(g);
}

/* After a step with a grad_scale, which unscaled the contiguous grad gc in
 * place (unless found_inf skipped it): a non-contiguous grad gets gc's
 * values copied back, unchanged ones included. */
static int
write_back_grad(PyObject *g_obj, AmpcTensorObject *gc)
{
    AmpcTensorObject *g = AMPC_TENSOR(g_obj);
    if (gc != g && ampc_copy_into(g, gc) < 0) {
        return -1;
    }
    g->storage->version++;
    return 0;
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
                             "nesterov", "maximize", "first_step",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "sgd_step_";
    PyObject *p_obj, *g_obj, *b_obj;
    PyObject *gs_obj = Py_None, *fi_obj = Py_None;
    double lr, momentum, dampening, weight_decay;
    int nesterov, maximize, first_step;
    AmpcTensorObject *p, *buf = NULL;
    float *grad_scale, *found_inf;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOddddppp|$OO:sgd_step_",
                                     kwlist, &p_obj, &g_obj, &b_obj, &lr,
                                     &momentum, &dampening, &weight_decay,
                                     &nesterov, &maximize, &first_step,
                                     &gs_obj, &fi_obj) ||
        (p = state_tensor(fn, "param", p_obj, NULL)) == NULL ||
        scalar_state(fn, "grad_scale", gs_obj, p, &grad_scale) < 0 ||
        scalar_state(fn, "found_inf", fi_obj, p, &found_inf) < 0 ||
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
        .grad_scale = grad_scale,
        .found_inf = found_inf,
    };
    if (ampc_cuda_enter(fn, p->device) < 0) {
        return NULL;
    }
    AmpcTensorObject *gc = grad_tensor(fn, g_obj, p);
    if (gc == NULL) {
        return NULL;
    }
    int64_t n = ampc_numel(p);
    void *bdata = buf != NULL ? buf->data : NULL;
    if (ampc_is_cuda(p)) {
        int rc = ampc_cuda.sgd_step(&a, p->dtype, n, p->data, gc->data,
                                    bdata);
        if (rc != 0) {
            Py_DECREF(gc);
            return ampc_cuda_raise(fn, rc);
        }
    }
    else if (n >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.sgd_step(&a, p->dtype, n, p->data, gc->data, bdata);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.sgd_step(&a, p->dtype, n, p->data, gc->data, bdata);
    }
    if (grad_scale != NULL && write_back_grad(g_obj, gc) < 0) {
        Py_DECREF(gc);
        return NULL;
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
                             "maximize", "decoupled_weight_decay",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "adam_step_";
    PyObject *p_obj, *g_obj, *m_obj, *v_obj, *x_obj, *step_obj;
    PyObject *gs_obj = Py_None, *fi_obj = Py_None;
    double step = 0.0, lr, beta1, beta2, eps, weight_decay;
    int amsgrad, maximize, decoupled;
    AmpcTensorObject *p, *m, *v, *vmax = NULL;
    float *grad_scale, *found_inf, *step_ptr = NULL;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOOdddddppp|$OO:adam_step_", kwlist, &p_obj,
            &g_obj, &m_obj, &v_obj, &x_obj, &step_obj, &lr, &beta1, &beta2,
            &eps, &weight_decay, &amsgrad, &maximize, &decoupled, &gs_obj,
            &fi_obj) ||
        (p = state_tensor(fn, "param", p_obj, NULL)) == NULL ||
        scalar_state(fn, "grad_scale", gs_obj, p, &grad_scale) < 0 ||
        scalar_state(fn, "found_inf", fi_obj, p, &found_inf) < 0 ||
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
    /* step: the 1-based number of this step, or the state's float32
     * counter tensor, which the kernel advances */
    if (ampc_tensor_check(step_obj)) {
        if (scalar_state(fn, "step", step_obj, p, &step_ptr) < 0) {
            return NULL;
        }
    }
    else if (!PyFloat_Check(step_obj) && !PyLong_Check(step_obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'step' must be a number or a "
                     "one-element float32 tensor, not %.100s",
                     fn, Py_TYPE(step_obj)->tp_name);
        return NULL;
    }
    else if ((step = PyFloat_AsDouble(step_obj)) == -1.0 &&
             PyErr_Occurred()) {
        return NULL;
    }
    if (step_ptr == NULL && !(step >= 1.0)) {
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
    ampc_adam_args a = {
        .one_minus_beta1 = (float)(1.0 - beta1),
        .beta2 = (float)beta2,
        .one_minus_beta2 = (float)(1.0 - beta2),
        .eps = (float)eps,
        .weight_decay = (float)weight_decay,
        .decay = (float)(1.0 - lr * weight_decay),
        .maximize = maximize,
        .decoupled = decoupled,
        .grad_scale = grad_scale,
        .found_inf = found_inf,
        .step = step_ptr,
        .lr = lr,
        .beta1 = beta1,
        .beta2_f64 = beta2,
    };
    /* torch: step_size = lr / (1 - beta1 ** step), and the second moment
     * is divided by (1 - beta2 ** step) ** 0.5, all in Python floats (with
     * a step tensor, the kernel does this from the advanced counter) */
    if (step_ptr == NULL) {
        ampc_adam_bias_corrections(lr, beta1, beta2, step, &a.neg_step_size,
                                   &a.bias_correction2_sqrt);
    }
    if (ampc_cuda_enter(fn, p->device) < 0) {
        return NULL;
    }
    AmpcTensorObject *gc = grad_tensor(fn, g_obj, p);
    if (gc == NULL) {
        return NULL;
    }
    int64_t n = ampc_numel(p);
    void *xdata = vmax != NULL ? vmax->data : NULL;
    if (ampc_is_cuda(p)) {
        int rc = ampc_cuda.adam_step(&a, p->dtype, n, p->data, gc->data,
                                     m->data, v->data, xdata);
        if (rc != 0) {
            Py_DECREF(gc);
            return ampc_cuda_raise(fn, rc);
        }
    }
    else if (n >= RELEASE_GIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        ampc_cpu.adam_step(&a, p->dtype, n, p->data, gc->data, m->data,
                           v->data, xdata);
        Py_END_ALLOW_THREADS
    }
    else {
        ampc_cpu.adam_step(&a, p->dtype, n, p->data, gc->data, m->data,
                           v->data, xdata);
    }
    if (grad_scale != NULL && write_back_grad(g_obj, gc) < 0) {
        Py_DECREF(gc);
        return NULL;
    }
    Py_DECREF(gc);
    p->storage->version++;
    m->storage->version++;
    v->storage->version++;
    if (vmax != NULL) {
        vmax->storage->version++;
    }
    if (step_ptr != NULL) {
        AMPC_TENSOR(step_obj)->storage->version++;
    }
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_optim_methods[] = {
    {"sgd_step_", (PyCFunction)(void (*)(void))op_sgd_step_,
     METH_VARARGS | METH_KEYWORDS,
     "sgd_step_(param, grad, momentum_buffer, lr, momentum, dampening, "
     "weight_decay, nesterov, maximize, first_step, *, grad_scale=None, "
     "found_inf=None): one fused in-place torch.optim.SGD step; skipped "
     "entirely when found_inf != 0, the gradient divided by grad_scale "
     "and written back"},
    {"adam_step_", (PyCFunction)(void (*)(void))op_adam_step_,
     METH_VARARGS | METH_KEYWORDS,
     "adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, "
     "lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, "
     "decoupled_weight_decay, *, grad_scale=None, found_inf=None): one "
     "fused in-place torch.optim.Adam (AdamW when decoupled) step; step is "
     "the step's number or a float32 counter tensor that the step "
     "advances (unless skipped: found_inf != 0)"},
    {NULL},
};
