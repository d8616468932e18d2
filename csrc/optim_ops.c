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

/* One parameter of an SGD call, checked: param and buf are borrowed (buf
 * NULL without momentum); grad_obj is the grad as given. */
typedef struct {
    AmpcTensorObject *param;
    PyObject *grad_obj;
    AmpcTensorObject *buf;
} sgd_entry;

/* "param" for the single-tensor call (i < 0), else "params[i]".  Written
 * by hand: snprintf's cost, three names per parameter, was most of a
 * small model's step. */
static const char *
arg_name(char *buf, size_t size, const char *single, const char *list,
         Py_ssize_t i)
{
    if (i < 0) {
        return single;
    }
    char digits[24];
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + i % 10);
        i /= 10;
    } while (i > 0);
    size_t len = strlen(list);
    if (len + (size_t)nd + 3 > size) {
        return list;
    }
    memcpy(buf, list, len);
    buf[len++] = '[';
    while (nd > 0) {
        buf[len++] = digits[--nd];
    }
    buf[len++] = ']';
    buf[len] = '\0';
    return buf;
}

/* Checks parameter i (i < 0: the single-tensor call) against the first
 * one, p0 (NULL for the first itself): same device and dtype. */
static int
sgd_entry_check(const char *fn, Py_ssize_t i, PyObject *p_obj,
                PyObject *g_obj, PyObject *b_obj, int with_buf,
                AmpcTensorObject *p0, sgd_entry *e)
{
    char pn[48], gn[48], bn[64], p0n[48];
    const char *pname = arg_name(pn, sizeof(pn), "param", "params", i);
    const char *gname = arg_name(gn, sizeof(gn), "grad", "grads", i);
    const char *bname = arg_name(bn, sizeof(bn), "momentum_buffer",
                                 "momentum_buffers", i);
    AmpcTensorObject *p = state_tensor(fn, pname, p_obj, NULL);
    if (p == NULL ||
        (p0 != NULL &&
         (ampc_check_same_device(p0, p) < 0 ||
          ampc_arg_dtype(fn, pname, p, p0->dtype,
                         arg_name(p0n, sizeof(p0n), "", "params", 0)) <
              0))) {
        return -1;
    }
    AmpcTensorObject *g = ampc_arg_tensor(fn, gname, g_obj);
    if (g == NULL || ampc_check_same_device(p, g) < 0 ||
        ampc_arg_dtype(fn, gname, g, p->dtype, pname) < 0 ||
        ampc_arg_shape(fn, gname, g, p->ndim, p->shape, pname) < 0) {
        return -1;
    }
    e->param = p;
    e->grad_obj = g_obj;
    e->buf = NULL;
    /* the buffer is read only with momentum, as torch keeps none without */
    if (with_buf) {
        if (b_obj == Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): %s is required when momentum != 0 (pass a "
                         "tensor like the param, with first_step=True on "
                         "the first step)",
                         fn, bname);
            return -1;
        }
        if ((e->buf = state_tensor(fn, bname, b_obj, p)) == NULL) {
            return -1;
        }
    }
    return 0;
}

/* The hyper-parameters, checked as torch's constructor checks them. */
static int
sgd_args_check(const char *fn, ampc_sgd_args *a, double lr, double momentum,
               double dampening, double weight_decay)
{
    if (check_range("learning rate", lr, 0.0, INFINITY, 0) < 0 ||
        check_range("momentum value", momentum, 0.0, INFINITY, 0) < 0 ||
        check_range("weight_decay value", weight_decay, 0.0, INFINITY, 0) <
            0) {
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

static int
cmp_ptr_entry(const void *x, const void *y)
{
    const uintptr_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

/* 1 when two of the n parameters share memory (param, grad or buffer of
 * one with any of another's): pairs (storage, parameter) sorted. */
static int
entries_share_memory(AmpcTensorObject *const *ts, Py_ssize_t n, int per)
{
    Py_ssize_t m = n * per;
    uintptr_t *pairs = PyMem_Calloc((size_t)m, 2 * sizeof(uintptr_t));
    if (pairs == NULL) {
        return 1;               /* the safe answer: one launch each */
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (ts[i] != NULL) {
            pairs[2 * k] = (uintptr_t)ts[i]->storage;
            pairs[2 * k + 1] = (uintptr_t)(i / per);
            k++;
        }
    }
    qsort(pairs, (size_t)k, 2 * sizeof(uintptr_t), cmp_ptr_entry);
    int shared = 0;
    for (Py_ssize_t i = 1; i < k && !shared; i++) {
        shared = pairs[2 * i] == pairs[2 * i - 2] &&
                 pairs[2 * i + 1] != pairs[2 * i - 1];
    }
    PyMem_Free(pairs);
    return shared;
}

/* The step on the n checked parameters (n >= 1, one device, one dtype). */
static PyObject *
sgd_run(const char *fn, const ampc_sgd_args *a, sgd_entry *e, Py_ssize_t n)
{
    AmpcTensorObject *p0 = e[0].param;
    if (ampc_cuda_enter(fn, p0->device) < 0) {
        return NULL;
    }
    /* per parameter: the tensors [param, contiguous grad, buf] and their
     * data pointers and sizes */
    AmpcTensorObject **ts = PyMem_Calloc((size_t)n * 3, sizeof(*ts));
    void **ptr = PyMem_Calloc((size_t)n * 3, sizeof(void *));
    int64_t *numel = PyMem_Calloc((size_t)n, sizeof(int64_t));
    PyObject *result = NULL;
    Py_ssize_t made = 0;
    if (ts == NULL || ptr == NULL || numel == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total = 0;
    for (; made < n; made++) {
        AmpcTensorObject *g = ampc_contiguous(AMPC_TENSOR(e[made].grad_obj));
        if (g == NULL) {
            goto done;
        }
        ts[n + made] = g;
        ts[made] = e[made].param;
        ts[2 * n + made] = e[made].buf;
        ptr[made] = e[made].param->data;
        ptr[n + made] = g->data;
        ptr[2 * n + made] = e[made].buf != NULL ? e[made].buf->data : NULL;
        numel[made] = ampc_numel(e[made].param);
        total += numel[made];
    }
    if (ampc_is_cuda(p0)) {
        ampc_optim_list l = {n, numel, ptr, ptr + n,
                             {e[0].buf != NULL ? ptr + 2 * n : NULL}};
        /* NOTE: per parameter [param, grad, buf] are 3 consecutive
         * entries for the memory check */
        AmpcTensorObject **byp = PyMem_Calloc((size_t)n * 3, sizeof(*byp));
        if (byp == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            byp[3 * i] = ts[i];
            byp[3 * i + 1] = ts[n + i];
            byp[3 * i + 2] = ts[2 * n + i];
        }
        int shared = n > 1 && entries_share_memory(byp, n, 3);
        PyMem_Free(byp);
        int rc = 0;
        if (shared) {
            /* one launch each: the stream runs them in list order */
            for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
                ampc_optim_list one = {
                    1, numel + i, ptr + i, ptr + n + i,
                    {l.state[0] != NULL ? ptr + 2 * n + i : NULL}};
                rc = ampc_cuda.sgd_step(a, p0->dtype, &one);
            }
        }
        else {
            rc = ampc_cuda.sgd_step(a, p0->dtype, &l);
        }
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto done;
        }
    }
    else {
        PyThreadState *save = total >= RELEASE_GIL_MIN ? PyEval_SaveThread()
                                                       : NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            ampc_cpu.sgd_step(a, p0->dtype, numel[i], ptr[i], ptr[n + i],
                              ptr[2 * n + i]);
        }
        if (save != NULL) {
            PyEval_RestoreThread(save);
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (a->grad_scale != NULL &&
            write_back_grad(e[i].grad_obj, ts[n + i]) < 0) {
            goto done;
        }
        e[i].param->storage->version++;
        if (e[i].buf != NULL) {
            e[i].buf->storage->version++;
        }
    }
    result = Py_NewRef(Py_None);
done:
    if (ts != NULL) {
        for (Py_ssize_t i = 0; i < made; i++) {
            Py_DECREF(ts[n + i]);
        }
    }
    PyMem_Free(ts);
    PyMem_Free(ptr);
    PyMem_Free(numel);
    return result;
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
    sgd_entry e;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOddddppp|$OO:sgd_step_",
                                     kwlist, &p_obj, &g_obj, &b_obj, &lr,
                                     &momentum, &dampening, &weight_decay,
                                     &a.nesterov, &a.maximize, &a.first_step,
                                     &gs_obj, &fi_obj) ||
        state_tensor(fn, "param", p_obj, NULL) == NULL) {
        return NULL;
    }
    AmpcTensorObject *p = AMPC_TENSOR(p_obj);
    if (scalar_state(fn, "grad_scale", gs_obj, p,
                     (float **)&a.grad_scale) < 0 ||
        scalar_state(fn, "found_inf", fi_obj, p, (float **)&a.found_inf) <
            0 ||
        sgd_args_check(fn, &a, lr, momentum, dampening, weight_decay) < 0 ||
        sgd_entry_check(fn, -1, p_obj, g_obj, b_obj, momentum != 0.0, NULL,
                        &e) < 0) {
        return NULL;
    }
    return sgd_run(fn, &a, &e, 1);
}

/* A list or tuple (of tensors, checked one by one later): a new
 * PySequence_Fast.  A tensor is refused, though it iterates. */
static PyObject *
tensor_sequence(const char *fn, const char *arg, PyObject *obj)
{
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a list or tuple of tensors, not "
                     "%.100s",
                     fn, arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PySequence_Fast(obj, "");
}

/* torch._fused_sgd_'s list form: every parameter of one device and dtype
 * in one call (one launch on a GPU). */
static PyObject *
op_sgd_foreach_step_(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"params", "grads", "momentum_buffers", "lr",
                             "momentum", "dampening", "weight_decay",
                             "nesterov", "maximize", "first_step",
                             "grad_scale", "found_inf", NULL};
    static const char *fn = "sgd_foreach_step_";
    PyObject *ps_obj, *gs_list, *bs_obj;
    PyObject *gs_obj = Py_None, *fi_obj = Py_None;
    PyObject *ps = NULL, *gs = NULL, *bs = NULL, *result = NULL;
    double lr, momentum, dampening, weight_decay;
    ampc_sgd_args a = {0};
    sgd_entry *e = NULL;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOddddppp|$OO:sgd_foreach_step_", kwlist, &ps_obj,
            &gs_list, &bs_obj, &lr, &momentum, &dampening, &weight_decay,
            &a.nesterov, &a.maximize, &a.first_step, &gs_obj, &fi_obj) ||
        sgd_args_check(fn, &a, lr, momentum, dampening, weight_decay) < 0) {
        return NULL;
    }
    if ((ps = tensor_sequence(fn, "params", ps_obj)) == NULL ||
        (gs = tensor_sequence(fn, "grads", gs_list)) == NULL ||
        (bs_obj != Py_None &&
         (bs = tensor_sequence(fn, "momentum_buffers", bs_obj)) == NULL)) {
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ps);
    if (PySequence_Fast_GET_SIZE(gs) != n ||
        (bs != NULL && PySequence_Fast_GET_SIZE(bs) != n)) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): params, grads and momentum_buffers must have "
                     "the same length, got %zd, %zd and %zd",
                     fn, n, PySequence_Fast_GET_SIZE(gs),
                     bs != NULL ? PySequence_Fast_GET_SIZE(bs) : n);
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
        PyObject *b = bs != NULL ? PySequence_Fast_GET_ITEM(bs, i) : Py_None;
        if (sgd_entry_check(fn, i, PySequence_Fast_GET_ITEM(ps, i),
                            PySequence_Fast_GET_ITEM(gs, i), b,
                            momentum != 0.0, i > 0 ? e[0].param : NULL,
                            &e[i]) < 0) {
            goto done;
        }
    }
    if (scalar_state(fn, "grad_scale", gs_obj, e[0].param,
                     (float **)&a.grad_scale) < 0 ||
        scalar_state(fn, "found_inf", fi_obj, e[0].param,
                     (float **)&a.found_inf) < 0) {
        goto done;
    }
    result = sgd_run(fn, &a, e, n);
done:
    PyMem_Free(e);
    Py_XDECREF(ps);
    Py_XDECREF(gs);
    Py_XDECREF(bs);
    return result;
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
    {NULL},
};
