/* optim_batch.c - the argument checks and the parameter batches that the
 * optimizer ops of optim_ops.c share (optim_batch.h).
 */
#include "optim_batch.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"

// ----------------------------------------------------------------------------
// argument checks

const char *
ampc_optim_arg_name(char *buf, size_t size, const char *single,
                    const char *list, Py_ssize_t i)
{
    if (i < 0) {
        return single;
    }
    /* written by hand: snprintf, three names per parameter, cost most of
     * a small model's step */
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

AmpcTensorObject *
ampc_optim_state_arg(const char *fn, const char *arg, PyObject *obj,
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

int
ampc_optim_scalar_arg(const char *fn, const char *arg, PyObject *obj,
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

int
ampc_optim_entry_check(const char *fn, Py_ssize_t i, PyObject *p_obj,
                       PyObject *g_obj, AmpcTensorObject *p0,
                       ampc_optim_entry *e)
{
    char pn[48], gn[48];
    const char *pname = ampc_optim_arg_name(pn, sizeof(pn), "param",
                                            "params", i);
    const char *gname = ampc_optim_arg_name(gn, sizeof(gn), "grad", "grads",
                                            i);
    AmpcTensorObject *p = ampc_optim_state_arg(fn, pname, p_obj, NULL);
    if (p == NULL ||
        (p0 != NULL && (ampc_check_same_device(p0, p) < 0 ||
                        ampc_arg_dtype(fn, pname, p, p0->dtype,
                                       "params[0]") < 0))) {
        return -1;
    }
    AmpcTensorObject *g = ampc_arg_tensor(fn, gname, g_obj);
    if (g == NULL || ampc_check_same_device(p, g) < 0 ||
        ampc_arg_dtype(fn, gname, g, p->dtype, pname) < 0 ||
        ampc_arg_shape(fn, gname, g, p->ndim, p->shape, pname) < 0) {
        return -1;
    }
    memset(e, 0, sizeof(*e));
    e->param = p;
    e->grad_obj = g_obj;
    return 0;
}

PyObject *
ampc_optim_sequence(const char *fn, const char *arg, PyObject *obj)
{
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a list or tuple of tensors, not "
                     "%.100s",
                     fn, arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    /* a tuple holds its own references: the kernels may run without the
     * GIL, while another thread could empty a list */
    return PySequence_Tuple(obj);
}

int
ampc_optim_check_range(const char *what, double v, double lo, double hi,
                       int hi_open)
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
// batches

/* Tensors per parameter in the memory check: param, grad, the states and
 * the step counter. */
#define PER_ENTRY (2 + AMPC_OPTIM_STATES + 1)

static int
cmp_pair(const void *x, const void *y)
{
    const uintptr_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

/* 1 when a tensor of one parameter shares storage with a tensor of
 * another: the (storage, parameter) pairs sorted by storage. */
static int
parameters_share_memory(const ampc_optim_batch *b)
{
    uintptr_t *pairs = PyMem_Calloc((size_t)(b->n * PER_ENTRY),
                                    2 * sizeof(uintptr_t));
    if (pairs == NULL) {
        return 1;               /* the safe answer: one at a time */
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        const ampc_optim_entry *e = &b->e[i];
        AmpcTensorObject *ts[PER_ENTRY] = {e->param, b->grad[i], e->state[0],
                                           e->state[1], e->state[2],
                                           e->step};
        for (int j = 0; j < PER_ENTRY; j++) {
            if (ts[j] != NULL) {
                pairs[2 * k] = (uintptr_t)ts[j]->storage;
                pairs[2 * k + 1] = (uintptr_t)i;
                k++;
            }
        }
    }
    qsort(pairs, (size_t)k, 2 * sizeof(uintptr_t), cmp_pair);
    /* within a run of one storage, some neighbours differ in parameter
     * when more than one parameter is in it */
    int shared = 0;
    for (Py_ssize_t i = 1; i < k && !shared; i++) {
        shared = pairs[2 * i] == pairs[2 * i - 2] &&
                 pairs[2 * i + 1] != pairs[2 * i - 1];
    }
    PyMem_Free(pairs);
    return shared;
}

/* The parameters' kept casts that the step can rewrite (weight_casts.h);
 * the arrays stay NULL when there are none. */
static int
find_kept_casts(ampc_optim_batch *b)
{
    for (Py_ssize_t i = 0; i < b->n; i++) {
        AmpcTensorObject *p = b->e[i].param;
        ampc_kept_cast *k = ampc_kept_cast_find(p);
        if (k == NULL || !ampc_kept_cast_writable(k, p)) {
            continue;
        }
        if (b->kept == NULL) {
            b->kept = PyMem_Calloc((size_t)b->n, sizeof(*b->kept));
            b->kept_ptr = PyMem_Calloc((size_t)b->n, sizeof(void *));
            b->kept_dtype = PyMem_Calloc((size_t)b->n, 1);
            b->kept_fresh = PyMem_Calloc((size_t)b->n, 1);
            if (b->kept == NULL || b->kept_ptr == NULL ||
                b->kept_dtype == NULL || b->kept_fresh == NULL) {
                PyErr_NoMemory();
                return -1;
            }
        }
        ampc_kept_cast_note_use(k);
        b->kept[i] = (AmpcTensorObject *)Py_NewRef(k->cast);
        b->kept_ptr[i] = k->cast->data;
        b->kept_dtype[i] = (int8_t)k->cast->dtype;
        b->kept_fresh[i] = (char)ampc_kept_cast_fresh(k, p);
    }
    return 0;
}

int
ampc_optim_batch_init(const char *fn, ampc_optim_batch *b,
                      ampc_optim_entry *e, Py_ssize_t n)
{
    memset(b, 0, sizeof(*b));
    if (ampc_cuda_enter(fn, e[0].param->device) < 0) {
        return -1;
    }
    b->n = n;
    b->e = e;
    b->grad = PyMem_Calloc((size_t)n, sizeof(*b->grad));
    b->ptr = PyMem_Calloc((size_t)n * (2 + AMPC_OPTIM_STATES),
                          sizeof(void *));
    b->numel = PyMem_Calloc((size_t)n, sizeof(int64_t));
    if (e[0].step != NULL) {
        b->step = PyMem_Calloc((size_t)n, sizeof(float *));
    }
    if (b->grad == NULL || b->ptr == NULL || b->numel == NULL ||
        (e[0].step != NULL && b->step == NULL)) {
        ampc_optim_batch_free(b);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpcTensorObject *g = ampc_contiguous(AMPC_TENSOR(e[i].grad_obj));
        if (g == NULL) {
            ampc_optim_batch_free(b);
            return -1;
        }
        b->grad[i] = g;
        b->ptr[i] = e[i].param->data;
        b->ptr[n + i] = g->data;
        for (int s = 0; s < AMPC_OPTIM_STATES; s++) {
            AmpcTensorObject *t = e[i].state[s];
            b->ptr[(2 + s) * n + i] = t != NULL ? t->data : NULL;
        }
        if (b->step != NULL) {
            b->step[i] = (float *)e[i].step->data;
        }
        b->numel[i] = ampc_numel(e[i].param);
        b->total += b->numel[i];
    }
    /* the CPU steps one parameter after another anyway */
    b->shared = n > 1 && ampc_is_cuda(e[0].param) &&
                parameters_share_memory(b);
    if (e[0].param->dtype == AMPC_FLOAT32 && find_kept_casts(b) < 0) {
        ampc_optim_batch_free(b);
        return -1;
    }
    return 0;
}

ampc_optim_list
ampc_optim_batch_list(const ampc_optim_batch *b, Py_ssize_t i,
                      Py_ssize_t count)
{
    ampc_optim_list l = {count, b->numel + i, b->ptr + i, b->ptr + b->n + i,
                         {NULL, NULL, NULL}, NULL, NULL, NULL};
    for (int s = 0; s < AMPC_OPTIM_STATES; s++) {
        /* a state is kept for every parameter of a call or for none */
        if (b->e[0].state[s] != NULL) {
            l.state[s] = b->ptr + (2 + s) * b->n + i;
        }
    }
    if (b->step != NULL) {
        l.step = b->step + i;
    }
    if (b->kept != NULL) {
        l.kept = b->kept_ptr + i;
        l.kept_dtype = b->kept_dtype + i;
    }
    return l;
}

int
ampc_optim_batch_finish(ampc_optim_batch *b, int unscaled)
{
    /* the versions first: every parameter was written, even when a copy
     * below fails */
    for (Py_ssize_t i = 0; i < b->n; i++) {
        ampc_optim_entry *e = &b->e[i];
        if (unscaled) {
            AMPC_TENSOR(e->grad_obj)->storage->version++;
        }
        e->param->storage->version++;
        for (int s = 0; s < AMPC_OPTIM_STATES; s++) {
            if (e->state[s] != NULL) {
                e->state[s]->storage->version++;
            }
        }
        if (e->step != NULL) {
            e->step->storage->version++;
        }
        if (b->kept != NULL && b->kept[i] != NULL) {
            ampc_kept_cast_stepped(e->param, b->kept[i], b->kept_fresh[i]);
        }
    }
    for (Py_ssize_t i = 0; unscaled && i < b->n; i++) {
        /* NOTE: on CUDA the copy is queued after the kernel */
        AmpcTensorObject *g = AMPC_TENSOR(b->e[i].grad_obj);
        if (b->grad[i] != g && ampc_copy_into(g, b->grad[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

void
ampc_optim_batch_free(ampc_optim_batch *b)
{
    if (b->grad != NULL) {
        for (Py_ssize_t i = 0; i < b->n; i++) {
            Py_XDECREF(b->grad[i]);
        }
    }
    PyMem_Free(b->grad);
    PyMem_Free(b->ptr);
    PyMem_Free(b->numel);
    PyMem_Free(b->step);
    if (b->kept != NULL) {
        for (Py_ssize_t i = 0; i < b->n; i++) {
            Py_XDECREF(b->kept[i]);
        }
    }
    PyMem_Free(b->kept);
    PyMem_Free(b->kept_ptr);
    PyMem_Free(b->kept_dtype);
    PyMem_Free(b->kept_fresh);
    memset(b, 0, sizeof(*b));
}

// ----------------------------------------------------------------------------
// the calls

int
ampc_optim_amp_args(const char *fn, PyObject *gs_obj, PyObject *fi_obj,
                    AmpcTensorObject *p0, const float **grad_scale,
                    const float **found_inf)
{
    float *gs, *fi;
    if (ampc_optim_scalar_arg(fn, "grad_scale", gs_obj, p0, &gs) < 0 ||
        ampc_optim_scalar_arg(fn, "found_inf", fi_obj, p0, &fi) < 0) {
        return -1;
    }
    *grad_scale = gs;
    *found_inf = fi;
    return 0;
}

int
ampc_optim_list_args(const char *fn, PyObject *const *objs,
                     const char *const *names, const int *optional, int k,
                     PyObject **seq, Py_ssize_t *n)
{
    for (int j = 0; j < k; j++) {
        seq[j] = NULL;
    }
    for (int j = 0; j < k; j++) {
        if (optional[j] && objs[j] == Py_None) {
            continue;
        }
        if ((seq[j] = ampc_optim_sequence(fn, names[j], objs[j])) == NULL) {
            return -1;
        }
    }
    *n = PySequence_Fast_GET_SIZE(seq[0]);
    for (int j = 1; j < k; j++) {
        if (seq[j] != NULL && PySequence_Fast_GET_SIZE(seq[j]) != *n) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): %s has %zd tensors but %s has %zd; every "
                         "list needs one per parameter",
                         fn, names[j], PySequence_Fast_GET_SIZE(seq[j]),
                         names[0], *n);
            return -1;
        }
    }
    return 0;
}

void
ampc_optim_free_lists(PyObject **seq, int k)
{
    for (int j = 0; j < k; j++) {
        Py_XDECREF(seq[j]);
    }
}

PyObject *
ampc_optim_item(PyObject *seq, Py_ssize_t i)
{
    return seq != NULL ? PySequence_Fast_GET_ITEM(seq, i) : Py_None;
}

PyObject *
ampc_optim_run_step(const char *fn, const void *args, int unscaled,
                    ampc_optim_entry *e, Py_ssize_t n,
                    ampc_optim_cuda_step_fn cuda_step,
                    ampc_optim_cpu_step_fn cpu_step)
{
    ampc_optim_batch b;
    if (ampc_optim_batch_init(fn, &b, e, n) < 0) {
        return NULL;
    }
    ampc_dtype dt = e[0].param->dtype;
    if (ampc_is_cuda(e[0].param)) {
        Py_ssize_t per = b.shared ? 1 : n;
        for (Py_ssize_t i = 0; i < n; i += per) {
            ampc_optim_list l = ampc_optim_batch_list(&b, i, per);
            int rc = cuda_step(args, dt, &l);
            if (rc != 0) {
                ampc_optim_batch_free(&b);
                return ampc_cuda_raise(fn, rc);
            }
        }
    }
    else {
        PyThreadState *save = b.total >= RELEASE_GIL_MIN ? PyEval_SaveThread()
                                                         : NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            ampc_optim_list l = ampc_optim_batch_list(&b, i, 1);
            cpu_step(args, dt, &l);
        }
        if (save != NULL) {
            PyEval_RestoreThread(save);
        }
    }
    int rc = ampc_optim_batch_finish(&b, unscaled);
    ampc_optim_batch_free(&b);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

int
ampc_optim_step_number(const char *fn, PyObject *step_obj, double *step)
{
    if (!PyFloat_Check(step_obj) && !PyLong_Check(step_obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'step' must be a number or a "
                     "one-element float32 tensor, not %.100s",
                     fn, Py_TYPE(step_obj)->tp_name);
        return -1;
    }
    *step = PyFloat_AsDouble(step_obj);
    if (*step == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (!(*step >= 1.0)) {
        PyObject *num = PyFloat_FromDouble(*step);
        if (num != NULL) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): step is the 1-based number of this step and "
                         "must be >= 1, got %R",
                         fn, num);
            Py_DECREF(num);
        }
        return -1;
    }
    return 0;
}
