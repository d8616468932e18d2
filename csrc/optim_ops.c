/* optim_ops.c - the Python-facing fused optimizer steps of ampc._C, with
 * torch.optim.SGD's and Adam's (AdamW's) arithmetic, each parameter and its
 * state updated in place in one pass: sgd_step_ and adam_step_ take one
 * parameter, sgd_foreach_step_ and adam_foreach_step_ a list (torch's
 * _fused_sgd_ / _fused_adam_ form: one device, one dtype; one kernel
 * launch on a GPU).  The hyper-parameters are checked as torch's optimizer
 * constructors check them; Adam's bias corrections are computed here in
 * double, as torch computes them in Python floats.  ampc/optim wraps these.
 *
 * PyTorch's _step_supports_amp_scaling contract: grad_scale and found_inf
 * (one-element float32 tensors on the params' device, or None) are passed
 * to the kernels as pointers, which skip the whole step when *found_inf !=
 * 0 and use grad / *grad_scale, writing that unscaled gradient back to the
 * grad tensor as torch's fused kernels do; and Adam's step may be a
 * float32 tensor on the param's device, which the kernel advances (unless
 * skipped) and takes the bias corrections from: a step then never waits
 * for the GPU.
 */
#include "ampc.h"

#include <math.h>

#include "nn_math.h"
#include "ops.h"
#include "optim_batch.h"

// ----------------------------------------------------------------------------
// SGD

/* The hyper-parameters, checked as torch's constructor checks them. */
static int
sgd_args_check(const char *fn, ampc_sgd_args *a, double lr, double momentum,
               double dampening, double weight_decay)
{
    if (ampc_optim_check_range("learning rate", lr, 0.0, INFINITY, 0) < 0 ||
        ampc_optim_check_range("momentum value", momentum, 0.0, INFINITY,
                               0) < 0 ||
        ampc_optim_check_range("weight_decay value", weight_decay, 0.0,
                               INFINITY, 0) < 0) {
        return -1;
    }
    if (a->nesterov && (momentum <= 0.0 || dampening != 0.0)) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): Nesterov momentum requires a momentum and zero "
                     "dampening",
                     fn);
        return -1;
    }
    a->lr = (float)lr;
    a->momentum = (float)momentum;
    a->one_minus_dampening = (float)(1.0 - dampening);
    a->weight_decay = (float)weight_decay;
    return 0;
}

/* Parameter i's param, grad and (with momentum) buffer. */
static int
sgd_entry(const char *fn, Py_ssize_t i, PyObject *p_obj, PyObject *g_obj,
          PyObject *b_obj, int with_buf, AmpcTensorObject *p0,
          ampc_optim_entry *e)
{
    if (ampc_optim_entry_check(fn, i, p_obj, g_obj, p0, e) < 0) {
        return -1;
    }
    /* the buffer is read only with momentum, as torch keeps none without */
    if (!with_buf) {
        return 0;
    }
    char bn[64];
    const char *bname = ampc_optim_arg_name(bn, sizeof(bn), "momentum_buffer",
                                            "momentum_buffers", i);
    if (b_obj == Py_None) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): %s is required when momentum != 0 (pass a "
                     "tensor like the param, with first_step=True on the "
                     "first step)",
                     fn, bname);
        return -1;
    }
    e->state[0] = ampc_optim_state_arg(fn, bname, b_obj, e->param);
    return e->state[0] != NULL ? 0 : -1;
}

/* SGD's kernels for run_step: a list on a GPU, one parameter on the CPU */
static int
sgd_cuda(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    return ampc_cuda.sgd_step(args, dt, l);
}

static void
sgd_cpu(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    ampc_sgd_args one = *(const ampc_sgd_args *)args;
    if (l->kept != NULL) {
        one.kept = l->kept[0];
        one.kept_dtype = (ampc_dtype)l->kept_dtype[0];
    }
    ampc_cpu.sgd_step(&one, dt, l->numel[0], l->param[0], l->grad[0],
                      l->state[0] != NULL ? l->state[0][0] : NULL);
}

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
    ampc_sgd_args a = {0};
    ampc_optim_entry e;
    AmpcTensorObject *p;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOddddppp|$OO:sgd_step_",
                                     kwlist, &p_obj, &g_obj, &b_obj, &lr,
                                     &momentum, &dampening, &weight_decay,
                                     &a.nesterov, &a.maximize, &a.first_step,
                                     &gs_obj, &fi_obj) ||
        (p = ampc_optim_state_arg(fn, "param", p_obj, NULL)) == NULL ||
        ampc_optim_amp_args(fn, gs_obj, fi_obj, p, &a.grad_scale,
                            &a.found_inf) < 0 ||
        sgd_args_check(fn, &a, lr, momentum, dampening, weight_decay) < 0 ||
        sgd_entry(fn, -1, p_obj, g_obj, b_obj, momentum != 0.0, NULL, &e) <
            0) {
        return NULL;
    }
    return ampc_optim_run_step(fn, &a, a.grad_scale != NULL, &e, 1,
                               sgd_cuda, sgd_cpu);
}

static PyObject *
op_sgd_foreach_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"params", "grads", "momentum_buffers", "lr",
                             "momentum", "dampening", "weight_decay",
                             "nesterov", "maximize", "first_step",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "sgd_foreach_step_";
    static const char *const names[] = {"params", "grads",
                                        "momentum_buffers"};
    static const int optional[] = {0, 0, 1};
    PyObject *objs[3], *seq[3];
    PyObject *gs_obj = Py_None, *fi_obj = Py_None, *result = NULL;
    double lr, momentum, dampening, weight_decay;
    ampc_sgd_args a = {0};
    ampc_optim_entry *e = NULL;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOddddppp|$OO:sgd_foreach_step_", kwlist, &objs[0],
            &objs[1], &objs[2], &lr, &momentum, &dampening, &weight_decay,
            &a.nesterov, &a.maximize, &a.first_step, &gs_obj, &fi_obj) ||
        sgd_args_check(fn, &a, lr, momentum, dampening, weight_decay) < 0) {
        return NULL;
    }
    if (ampc_optim_list_args(fn, objs, names, optional, 3, seq, &n) < 0) {
        goto done;
    }
    if (n == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if ((e = PyMem_Calloc((size_t)n, sizeof(*e))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sgd_entry(fn, i, ampc_optim_item(seq[0], i),
                      ampc_optim_item(seq[1], i), ampc_optim_item(seq[2], i),
                      momentum != 0.0,
                      i > 0 ? e[0].param : NULL, &e[i]) < 0) {
            goto done;
        }
    }
    if (ampc_optim_amp_args(fn, gs_obj, fi_obj, e[0].param, &a.grad_scale,
                            &a.found_inf) == 0) {
        result = ampc_optim_run_step(fn, &a, a.grad_scale != NULL, e, n,
                                     sgd_cuda, sgd_cpu);
    }
done:
    PyMem_Free(e);
    ampc_optim_free_lists(seq, 3);
    return result;
}

// ----------------------------------------------------------------------------
// Adam and AdamW

/* The hyper-parameters, checked as torch's constructor checks them. */
static int
adam_args_check(ampc_adam_args *a, double lr, double beta1, double beta2,
                double eps, double weight_decay)
{
    if (ampc_optim_check_range("learning rate", lr, 0.0, INFINITY, 0) < 0 ||
        ampc_optim_check_range("epsilon value", eps, 0.0, INFINITY, 0) < 0 ||
        ampc_optim_check_range("beta parameter at index 0", beta1, 0.0, 1.0,
                               1) < 0 ||
        ampc_optim_check_range("beta parameter at index 1", beta2, 0.0, 1.0,
                               1) < 0 ||
        ampc_optim_check_range("weight_decay value", weight_decay, 0.0,
                               INFINITY, 0) < 0) {
        return -1;
    }
    a->one_minus_beta1 = (float)(1.0 - beta1);
    a->beta2 = (float)beta2;
    a->one_minus_beta2 = (float)(1.0 - beta2);
    a->eps = (float)eps;
    a->weight_decay = (float)weight_decay;
    a->decay = (float)(1.0 - lr * weight_decay);
    a->lr = lr;
    a->beta1 = beta1;
    a->beta2_f64 = beta2;
    return 0;
}

/* step as a number: the 1-based number of this step, whose bias
 * corrections go into a (torch: step_size = lr / (1 - beta1 ** step), the
 * second moment divided by (1 - beta2 ** step) ** 0.5, in Python floats). */
static int
adam_host_step(const char *fn, PyObject *step_obj, ampc_adam_args *a)
{
    double step;
    if (ampc_optim_step_number(fn, step_obj, &step) < 0) {
        return -1;
    }
    ampc_adam_bias_corrections(a->lr, a->beta1, a->beta2_f64, step,
                               &a->neg_step_size, &a->bias_correction2_sqrt);
    return 0;
}

/* Parameter i's param, grad, moments, (with amsgrad) running maximum and
 * (step_obj not None) float32 step counter. */
static int
adam_entry(const char *fn, Py_ssize_t i, PyObject *const *objs, int amsgrad,
           PyObject *step_obj, AmpcTensorObject *p0, ampc_optim_entry *e)
{
    static const char *const single[] = {"exp_avg", "exp_avg_sq",
                                         "max_exp_avg_sq"};
    static const char *const list[] = {"exp_avgs", "exp_avg_sqs",
                                       "max_exp_avg_sqs"};
    if (ampc_optim_entry_check(fn, i, objs[0], objs[1], p0, e) < 0) {
        return -1;
    }
    char name[64];
    for (int s = 0; s < AMPC_OPTIM_STATES; s++) {
        const char *arg = ampc_optim_arg_name(name, sizeof(name), single[s],
                                              list[s], i);
        if (s == 2 && !amsgrad) {
            break;
        }
        if (s == 2 && objs[4] == Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): %s is required when amsgrad is True", fn,
                         arg);
            return -1;
        }
        e->state[s] = ampc_optim_state_arg(fn, arg, objs[2 + s], e->param);
        if (e->state[s] == NULL) {
            return -1;
        }
    }
    if (step_obj != Py_None) {
        float *ptr;
        const char *arg = ampc_optim_arg_name(name, sizeof(name), "step",
                                              "steps", i);
        if (ampc_optim_scalar_arg(fn, arg, step_obj, e->param, &ptr) < 0) {
            return -1;
        }
        e->step = AMPC_TENSOR(step_obj);
    }
    return 0;
}

/* Adam's kernels for run_step; on the CPU one parameter, with its own
 * step counter when it has one */
static int
adam_cuda(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    return ampc_cuda.adam_step(args, dt, l);
}

static void
adam_cpu(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    ampc_adam_args one = *(const ampc_adam_args *)args;
    one.step = l->step != NULL ? l->step[0] : NULL;
    if (l->kept != NULL) {
        one.kept = l->kept[0];
        one.kept_dtype = (ampc_dtype)l->kept_dtype[0];
    }
    ampc_cpu.adam_step(&one, dt, l->numel[0], l->param[0], l->grad[0],
                       l->state[0][0], l->state[1][0],
                       l->state[2] != NULL ? l->state[2][0] : NULL);
}

static PyObject *
op_adam_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"param", "grad", "exp_avg", "exp_avg_sq",
                             "max_exp_avg_sq", "step", "lr", "beta1",
                             "beta2", "eps", "weight_decay", "amsgrad",
                             "maximize", "decoupled_weight_decay",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "adam_step_";
    PyObject *objs[5], *step_obj;
    PyObject *gs_obj = Py_None, *fi_obj = Py_None;
    double lr, beta1, beta2, eps, weight_decay;
    int amsgrad;
    ampc_adam_args a = {0};
    ampc_optim_entry e;
    AmpcTensorObject *p;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOOdddddppp|$OO:adam_step_", kwlist, &objs[0],
            &objs[1], &objs[2], &objs[3], &objs[4], &step_obj, &lr, &beta1,
            &beta2, &eps, &weight_decay, &amsgrad, &a.maximize,
            &a.decoupled, &gs_obj, &fi_obj) ||
        (p = ampc_optim_state_arg(fn, "param", objs[0], NULL)) == NULL ||
        ampc_optim_amp_args(fn, gs_obj, fi_obj, p, &a.grad_scale,
                            &a.found_inf) < 0 ||
        adam_args_check(&a, lr, beta1, beta2, eps, weight_decay) < 0) {
        return NULL;
    }
    /* step: the state's float32 counter tensor, which the kernel advances,
     * or the number of this step */
    int counter = ampc_tensor_check(step_obj);
    if ((!counter && adam_host_step(fn, step_obj, &a) < 0) ||
        adam_entry(fn, -1, objs, amsgrad, counter ? step_obj : Py_None, NULL,
                   &e) < 0) {
        return NULL;
    }
    return ampc_optim_run_step(fn, &a, a.grad_scale != NULL, &e, 1,
                               adam_cuda, adam_cpu);
}

static PyObject *
op_adam_foreach_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"params", "grads", "exp_avgs", "exp_avg_sqs",
                             "max_exp_avg_sqs", "steps", "lr", "beta1",
                             "beta2", "eps", "weight_decay", "amsgrad",
                             "maximize", "decoupled_weight_decay",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "adam_foreach_step_";
    static const char *const names[] = {"params", "grads", "exp_avgs",
                                        "exp_avg_sqs", "max_exp_avg_sqs",
                                        "steps"};
    int optional[] = {0, 0, 0, 0, 1, 1};
    PyObject *objs[6], *seq[6];
    PyObject *gs_obj = Py_None, *fi_obj = Py_None, *result = NULL;
    double lr, beta1, beta2, eps, weight_decay;
    int amsgrad;
    ampc_adam_args a = {0};
    ampc_optim_entry *e = NULL;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOOdddddppp|$OO:adam_foreach_step_", kwlist,
            &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &lr,
            &beta1, &beta2, &eps, &weight_decay, &amsgrad, &a.maximize,
            &a.decoupled, &gs_obj, &fi_obj) ||
        adam_args_check(&a, lr, beta1, beta2, eps, weight_decay) < 0) {
        return NULL;
    }
    /* steps: one float32 counter tensor per parameter, or the number of
     * this step for all */
    int counters = PyList_Check(objs[5]) || PyTuple_Check(objs[5]);
    if (!counters) {
        if (adam_host_step(fn, objs[5], &a) < 0) {
            return NULL;
        }
        optional[5] = 1;
        objs[5] = Py_None;
    }
    if (ampc_optim_list_args(fn, objs, names, optional, 6, seq, &n) < 0) {
        goto done;
    }
    if (n == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if ((e = PyMem_Calloc((size_t)n, sizeof(*e))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row[5];
        for (int j = 0; j < 5; j++) {
            row[j] = ampc_optim_item(seq[j], i);
        }
        PyObject *step_obj = ampc_optim_item(seq[5], i);
        if (counters && !ampc_tensor_check(step_obj)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): steps[%zd] must be a one-element float32 "
                         "tensor (steps is a list of counters, one per "
                         "parameter, or one number), not %.100s",
                         fn, i, Py_TYPE(step_obj)->tp_name);
            goto done;
        }
        if (adam_entry(fn, i, row, amsgrad, step_obj,
                       i > 0 ? e[0].param : NULL, &e[i]) < 0) {
            goto done;
        }
    }
    if (ampc_optim_amp_args(fn, gs_obj, fi_obj, e[0].param, &a.grad_scale,
                            &a.found_inf) == 0) {
        result = ampc_optim_run_step(fn, &a, a.grad_scale != NULL, e, n,
                                     adam_cuda, adam_cpu);
    }
done:
    PyMem_Free(e);
    ampc_optim_free_lists(seq, 6);
    return result;
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
    {"sgd_foreach_step_", (PyCFunction)(void (*)(void))op_sgd_foreach_step_,
     METH_VARARGS | METH_KEYWORDS,
     "sgd_foreach_step_(params, grads, momentum_buffers, lr, momentum, "
     "dampening, weight_decay, nesterov, maximize, first_step, *, "
     "grad_scale=None, found_inf=None): sgd_step_ on every parameter of "
     "the lists (one device, one dtype; momentum_buffers None without "
     "momentum) in one call, one launch on a GPU"},
    {"adam_step_", (PyCFunction)(void (*)(void))op_adam_step_,
     METH_VARARGS | METH_KEYWORDS,
     "adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, "
     "lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, "
     "decoupled_weight_decay, *, grad_scale=None, found_inf=None): one "
     "fused in-place torch.optim.Adam (AdamW when decoupled) step; step is "
     "the step's number or a float32 counter tensor that the step "
     "advances (unless skipped: found_inf != 0)"},
    {"adam_foreach_step_", (PyCFunction)(void (*)(void))op_adam_foreach_step_,
     METH_VARARGS | METH_KEYWORDS,
     "adam_foreach_step_(params, grads, exp_avgs, exp_avg_sqs, "
     "max_exp_avg_sqs, steps, lr, beta1, beta2, eps, weight_decay, amsgrad, "
     "maximize, decoupled_weight_decay, *, grad_scale=None, "
     "found_inf=None): adam_step_ on every parameter of the lists (one "
     "device, one dtype; max_exp_avg_sqs None without amsgrad; steps the "
     "step's number for all or a list of float32 counter tensors) in one "
     "call, one launch on a GPU"},
    {NULL},
};
