/* optim_ops_adaptive.c - the Python-facing fused RMSprop and Adagrad steps
 * of ampc._C, with torch.optim.RMSprop's and Adagrad's arithmetic
 * (kernels_optim.h), each parameter and its state updated in place in one
 * pass: rmsprop_step_ and adagrad_step_ take one parameter,
 * rmsprop_foreach_step_ and adagrad_foreach_step_ a list (one device, one
 * dtype; one kernel launch on a GPU).  The hyper-parameters are checked as
 * torch's constructors check them; ampc/optim wraps these.
 *
 * Step counters: a parameter's state "step" (a one-element float32 tensor
 * on the parameter's device) may be handed to the kernel, which advances it
 * unless the step is skipped, and for Adagrad forms the step's learning
 * rate from it: a step then needs no host round trip, and the parameters of
 * one call may be at different steps.  Otherwise Adagrad takes the step's
 * number.  grad_scale and found_inf follow PyTorch's
 * _step_supports_amp_scaling contract, as in optim_ops.c.
 */
#include "ampc.h"

#include <math.h>

#include "nn_math.h"
#include "ops.h"
#include "optim_batch.h"

/* Parameter i's step counter (i < 0: the single-tensor call), when
 * step_obj is not None. */
static int
step_counter(const char *fn, Py_ssize_t i, PyObject *step_obj,
             ampc_optim_entry *e)
{
    if (step_obj == Py_None) {
        return 0;
    }
    char name[48];
    const char *arg = ampc_optim_arg_name(name, sizeof(name), "step",
                                          "steps", i);
    if (i >= 0 && !ampc_tensor_check(step_obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a one-element float32 tensor (steps "
                     "is a list of counters, one per parameter), not "
                     "%.100s",
                     fn, arg, Py_TYPE(step_obj)->tp_name);
        return -1;
    }
    float *ptr;
    if (ampc_optim_scalar_arg(fn, arg, step_obj, e->param, &ptr) < 0) {
        return -1;
    }
    e->step = AMPC_TENSOR(step_obj);
    return 0;
}

/* State s of parameter i: required (a tensor like the param) when `kept`,
 * ignored otherwise, as torch keeps none then. */
static int
state_arg(const char *fn, Py_ssize_t i, PyObject *obj, int s, int kept,
          const char *single, const char *list, const char *when,
          ampc_optim_entry *e)
{
    if (!kept) {
        return 0;
    }
    char name[64];
    const char *arg = ampc_optim_arg_name(name, sizeof(name), single, list,
                                          i);
    if (obj == Py_None) {
        PyErr_Format(PyExc_ValueError, "%s(): %s is required%s", fn, arg,
                     when);
        return -1;
    }
    e->state[s] = ampc_optim_state_arg(fn, arg, obj, e->param);
    return e->state[s] != NULL ? 0 : -1;
}

/* The list call's arguments: lists[k] parsed into seq, the entries checked
 * one by one by `entry`; NULL result and no exception when all is well
 * (then *e and *n are set; free *e with PyMem_Free). */
typedef int (*entry_fn)(const char *fn, Py_ssize_t i, PyObject *const *row,
                        const void *args, AmpcTensorObject *p0,
                        ampc_optim_entry *e);

static int
list_entries(const char *fn, PyObject *const *objs, const char *const *names,
             const int *optional, int k, entry_fn entry, const void *args,
             ampc_optim_entry **e_out, Py_ssize_t *n)
{
    PyObject *seq[6];
    ampc_optim_entry *e = NULL;
    int rc = -1;
    *e_out = NULL;
    if (ampc_optim_list_args(fn, objs, names, optional, k, seq, n) < 0) {
        goto done;
    }
    if (*n == 0) {
        rc = 0;
        goto done;
    }
    if ((e = PyMem_Calloc((size_t)*n, sizeof(*e))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *row[6];
        for (int j = 0; j < k; j++) {
            row[j] = ampc_optim_item(seq[j], i);
        }
        if (entry(fn, i, row, args, i > 0 ? e[0].param : NULL, &e[i]) < 0) {
            goto done;
        }
    }
    rc = 0;
done:
    ampc_optim_free_lists(seq, k);
    if (rc < 0) {
        PyMem_Free(e);
        e = NULL;
    }
    *e_out = e;
    return rc;
}

// ----------------------------------------------------------------------------
// RMSprop

/* The hyper-parameters, checked as torch's constructor checks them. */
static int
rmsprop_args_check(ampc_rmsprop_args *a, double lr, double alpha, double eps,
                   double weight_decay, double momentum)
{
    if (ampc_optim_check_range("learning rate", lr, 0.0, INFINITY, 0) < 0 ||
        ampc_optim_check_range("epsilon value", eps, 0.0, INFINITY, 0) < 0 ||
        ampc_optim_check_range("momentum value", momentum, 0.0, INFINITY,
                               0) < 0 ||
        ampc_optim_check_range("weight_decay value", weight_decay, 0.0,
                               INFINITY, 0) < 0 ||
        ampc_optim_check_range("alpha value", alpha, 0.0, INFINITY, 0) < 0) {
        return -1;
    }
    a->neg_lr = (float)-lr;
    a->alpha = (float)alpha;
    a->one_minus_alpha = (float)(1.0 - alpha);
    a->eps = (float)eps;
    a->weight_decay = (float)weight_decay;
    a->momentum = (float)momentum;
    return 0;
}

typedef struct {
    ampc_rmsprop_args a;
    int with_buf;               /* momentum > 0 */
    int centered;
} rmsprop_call;

/* row: param, grad, square_avg, momentum_buffer, grad_avg, step. */
static int
rmsprop_entry(const char *fn, Py_ssize_t i, PyObject *const *row,
              const void *args, AmpcTensorObject *p0, ampc_optim_entry *e)
{
    const rmsprop_call *c = args;
    if (ampc_optim_entry_check(fn, i, row[0], row[1], p0, e) < 0 ||
        state_arg(fn, i, row[2], 0, 1, "square_avg", "square_avgs", "", e) <
            0 ||
        state_arg(fn, i, row[3], 1, c->with_buf, "momentum_buffer",
                  "momentum_buffers", " when momentum > 0", e) < 0 ||
        state_arg(fn, i, row[4], 2, c->centered, "grad_avg", "grad_avgs",
                  " when centered is True", e) < 0) {
        return -1;
    }
    return step_counter(fn, i, row[5], e);
}

/* RMSprop's kernels for ampc_optim_run_step */
static int
rmsprop_cuda(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    return ampc_cuda.rmsprop_step(args, dt, l);
}

static void
rmsprop_cpu(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    ampc_rmsprop_args one = *(const ampc_rmsprop_args *)args;
    one.step = l->step != NULL ? l->step[0] : NULL;
    if (l->kept != NULL) {
        one.kept = l->kept[0];
        one.kept_dtype = (ampc_dtype)l->kept_dtype[0];
    }
    ampc_cpu.rmsprop_step(&one, dt, l->numel[0], l->param[0], l->grad[0],
                          l->state[0][0],
                          l->state[1] != NULL ? l->state[1][0] : NULL,
                          l->state[2] != NULL ? l->state[2][0] : NULL);
}

static PyObject *
op_rmsprop_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"param", "grad", "square_avg",
                             "momentum_buffer", "grad_avg", "step", "lr",
                             "alpha", "eps", "weight_decay", "momentum",
                             "centered", "maximize", "grad_scale",
                             "found_inf", NULL};
    static const char *fn = "rmsprop_step_";
    PyObject *row[6];
    PyObject *gs_obj = Py_None, *fi_obj = Py_None;
    double lr, alpha, eps, weight_decay, momentum;
    rmsprop_call c = {{0}};
    ampc_optim_entry e;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOOdddddpp|$OO:rmsprop_step_", kwlist, &row[0],
            &row[1], &row[2], &row[3], &row[4], &row[5], &lr, &alpha, &eps,
            &weight_decay, &momentum, &c.centered, &c.a.maximize, &gs_obj,
            &fi_obj) ||
        rmsprop_args_check(&c.a, lr, alpha, eps, weight_decay, momentum) <
            0) {
        return NULL;
    }
    c.with_buf = momentum > 0.0;
    if (row[5] != Py_None && !ampc_tensor_check(row[5])) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'step' must be None or a one-element "
                     "float32 tensor, not %.100s",
                     fn, Py_TYPE(row[5])->tp_name);
        return NULL;
    }
    if (rmsprop_entry(fn, -1, row, &c, NULL, &e) < 0 ||
        ampc_optim_amp_args(fn, gs_obj, fi_obj, e.param, &c.a.grad_scale,
                            &c.a.found_inf) < 0) {
        return NULL;
    }
    return ampc_optim_run_step(fn, &c.a, c.a.grad_scale != NULL, &e, 1,
                               rmsprop_cuda, rmsprop_cpu);
}

static PyObject *
op_rmsprop_foreach_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"params", "grads", "square_avgs",
                             "momentum_buffers", "grad_avgs", "steps", "lr",
                             "alpha", "eps", "weight_decay", "momentum",
                             "centered", "maximize", "grad_scale",
                             "found_inf", NULL};
    static const char *fn = "rmsprop_foreach_step_";
    static const char *const names[] = {"params", "grads", "square_avgs",
                                        "momentum_buffers", "grad_avgs",
                                        "steps"};
    static const int optional[] = {0, 0, 0, 1, 1, 1};
    PyObject *objs[6];
    PyObject *gs_obj = Py_None, *fi_obj = Py_None, *result = NULL;
    double lr, alpha, eps, weight_decay, momentum;
    rmsprop_call c = {{0}};
    ampc_optim_entry *e;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOOdddddpp|$OO:rmsprop_foreach_step_", kwlist,
            &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &lr,
            &alpha, &eps, &weight_decay, &momentum, &c.centered,
            &c.a.maximize, &gs_obj, &fi_obj) ||
        rmsprop_args_check(&c.a, lr, alpha, eps, weight_decay, momentum) <
            0) {
        return NULL;
    }
    c.with_buf = momentum > 0.0;
    if (list_entries(fn, objs, names, optional, 6, rmsprop_entry, &c, &e,
                     &n) < 0) {
        return NULL;
    }
    if (n == 0) {
        return Py_NewRef(Py_None);
    }
    if (ampc_optim_amp_args(fn, gs_obj, fi_obj, e[0].param, &c.a.grad_scale,
                            &c.a.found_inf) == 0) {
        result = ampc_optim_run_step(fn, &c.a, c.a.grad_scale != NULL, e, n,
                                     rmsprop_cuda, rmsprop_cpu);
    }
    PyMem_Free(e);
    return result;
}

// ----------------------------------------------------------------------------
// Adagrad

/* The hyper-parameters, checked as torch's constructor checks them. */
static int
adagrad_args_check(ampc_adagrad_args *a, double lr, double lr_decay,
                   double weight_decay, double eps)
{
    if (ampc_optim_check_range("learning rate", lr, 0.0, INFINITY, 0) < 0 ||
        ampc_optim_check_range("lr_decay value", lr_decay, 0.0, INFINITY,
                               0) < 0 ||
        ampc_optim_check_range("weight_decay value", weight_decay, 0.0,
                               INFINITY, 0) < 0 ||
        ampc_optim_check_range("epsilon value", eps, 0.0, INFINITY, 0) < 0) {
        return -1;
    }
    a->lr = lr;
    a->lr_decay = lr_decay;
    a->weight_decay = (float)weight_decay;
    a->eps = (float)eps;
    return 0;
}

/* step given as a number: this step's -clr into a. */
static int
adagrad_host_step(const char *fn, PyObject *step_obj, ampc_adagrad_args *a)
{
    double step;
    if (ampc_optim_step_number(fn, step_obj, &step) < 0) {
        return -1;
    }
    a->neg_clr = ampc_adagrad_neg_clr(a->lr, a->lr_decay, step);
    return 0;
}

/* row: param, grad, state_sum, step (None for a host step number). */
static int
adagrad_entry(const char *fn, Py_ssize_t i, PyObject *const *row,
              const void *args, AmpcTensorObject *p0, ampc_optim_entry *e)
{
    (void)args;
    if (ampc_optim_entry_check(fn, i, row[0], row[1], p0, e) < 0 ||
        state_arg(fn, i, row[2], 0, 1, "state_sum", "state_sums", "", e) <
            0) {
        return -1;
    }
    return step_counter(fn, i, row[3], e);
}

/* Adagrad's kernels for ampc_optim_run_step */
static int
adagrad_cuda(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    return ampc_cuda.adagrad_step(args, dt, l);
}

static void
adagrad_cpu(const void *args, ampc_dtype dt, const ampc_optim_list *l)
{
    ampc_adagrad_args one = *(const ampc_adagrad_args *)args;
    one.step = l->step != NULL ? l->step[0] : NULL;
    if (l->kept != NULL) {
        one.kept = l->kept[0];
        one.kept_dtype = (ampc_dtype)l->kept_dtype[0];
    }
    ampc_cpu.adagrad_step(&one, dt, l->numel[0], l->param[0], l->grad[0],
                          l->state[0][0]);
}

static PyObject *
op_adagrad_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"param", "grad", "state_sum", "step", "lr",
                             "lr_decay", "weight_decay", "eps", "maximize",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "adagrad_step_";
    PyObject *row[4];
    PyObject *gs_obj = Py_None, *fi_obj = Py_None;
    double lr, lr_decay, weight_decay, eps;
    ampc_adagrad_args a = {0};
    ampc_optim_entry e;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOddddp|$OO:adagrad_step_", kwlist, &row[0],
            &row[1], &row[2], &row[3], &lr, &lr_decay, &weight_decay, &eps,
            &a.maximize, &gs_obj, &fi_obj) ||
        adagrad_args_check(&a, lr, lr_decay, weight_decay, eps) < 0) {
        return NULL;
    }
    /* step: the state's float32 counter tensor, which the kernel advances,
     * or the number of this step */
    if (!ampc_tensor_check(row[3])) {
        if (adagrad_host_step(fn, row[3], &a) < 0) {
            return NULL;
        }
        row[3] = Py_None;
    }
    if (adagrad_entry(fn, -1, row, NULL, NULL, &e) < 0 ||
        ampc_optim_amp_args(fn, gs_obj, fi_obj, e.param, &a.grad_scale,
                            &a.found_inf) < 0) {
        return NULL;
    }
    return ampc_optim_run_step(fn, &a, a.grad_scale != NULL, &e, 1,
                               adagrad_cuda, adagrad_cpu);
}

static PyObject *
op_adagrad_foreach_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"params", "grads", "state_sums", "steps", "lr",
                             "lr_decay", "weight_decay", "eps", "maximize",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "adagrad_foreach_step_";
    static const char *const names[] = {"params", "grads", "state_sums",
                                        "steps"};
    static const int optional[] = {0, 0, 0, 1};
    PyObject *objs[4];
    PyObject *gs_obj = Py_None, *fi_obj = Py_None, *result = NULL;
    double lr, lr_decay, weight_decay, eps;
    ampc_adagrad_args a = {0};
    ampc_optim_entry *e;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOddddp|$OO:adagrad_foreach_step_", kwlist,
            &objs[0], &objs[1], &objs[2], &objs[3], &lr, &lr_decay,
            &weight_decay, &eps, &a.maximize, &gs_obj, &fi_obj) ||
        adagrad_args_check(&a, lr, lr_decay, weight_decay, eps) < 0) {
        return NULL;
    }
    /* steps: one float32 counter tensor per parameter, or the number of
     * this step for all */
    if (!PyList_Check(objs[3]) && !PyTuple_Check(objs[3])) {
        if (adagrad_host_step(fn, objs[3], &a) < 0) {
            return NULL;
        }
        objs[3] = Py_None;
    }
    if (list_entries(fn, objs, names, optional, 4, adagrad_entry, NULL, &e,
                     &n) < 0) {
        return NULL;
    }
    if (n == 0) {
        return Py_NewRef(Py_None);
    }
    if (ampc_optim_amp_args(fn, gs_obj, fi_obj, e[0].param, &a.grad_scale,
                            &a.found_inf) == 0) {
        result = ampc_optim_run_step(fn, &a, a.grad_scale != NULL, e, n,
                                     adagrad_cuda, adagrad_cpu);
    }
    PyMem_Free(e);
    return result;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_optim_adaptive_methods[] = {
    {"rmsprop_step_", (PyCFunction)(void (*)(void))op_rmsprop_step_,
     METH_VARARGS | METH_KEYWORDS,
     "rmsprop_step_(param, grad, square_avg, momentum_buffer, grad_avg, "
     "step, lr, alpha, eps, weight_decay, momentum, centered, maximize, *, "
     "grad_scale=None, found_inf=None): one fused in-place "
     "torch.optim.RMSprop step (momentum_buffer read when momentum > 0, "
     "grad_avg when centered); step None or a float32 counter tensor that "
     "the step advances (unless skipped: found_inf != 0)"},
    {"rmsprop_foreach_step_",
     (PyCFunction)(void (*)(void))op_rmsprop_foreach_step_,
     METH_VARARGS | METH_KEYWORDS,
     "rmsprop_foreach_step_(params, grads, square_avgs, momentum_buffers, "
     "grad_avgs, steps, lr, alpha, eps, weight_decay, momentum, centered, "
     "maximize, *, grad_scale=None, found_inf=None): rmsprop_step_ on "
     "every parameter of the lists (one device, one dtype; "
     "momentum_buffers, grad_avgs and steps may be None) in one call, one "
     "launch on a GPU"},
    {"adagrad_step_", (PyCFunction)(void (*)(void))op_adagrad_step_,
     METH_VARARGS | METH_KEYWORDS,
     "adagrad_step_(param, grad, state_sum, step, lr, lr_decay, "
     "weight_decay, eps, maximize, *, grad_scale=None, found_inf=None): one "
     "fused in-place torch.optim.Adagrad step; step is the step's number or "
     "a float32 counter tensor that the step advances (unless skipped: "
     "found_inf != 0)"},
    {"adagrad_foreach_step_",
     (PyCFunction)(void (*)(void))op_adagrad_foreach_step_,
     METH_VARARGS | METH_KEYWORDS,
     "adagrad_foreach_step_(params, grads, state_sums, steps, lr, lr_decay, "
     "weight_decay, eps, maximize, *, grad_scale=None, found_inf=None): "
     "adagrad_step_ on every parameter of the lists (one device, one dtype; "
     "steps the step's number for all or a list of float32 counter "
     "tensors) in one call, one launch on a GPU"},
    {NULL},
};
