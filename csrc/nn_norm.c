/* nn_norm.c - the Python-facing normalisation ops of ampc._C: batch_norm
 * and layer_norm, each forward (returning the statistics that backward
 * needs) and backward, and the argument checks and backward driver that
 * nn_group_norm.c shares (nn_norm.h).  Each op checks its arguments with
 * PyTorch's rules (a 16-bit input may take float32 parameters; all
 * parameters share one dtype), makes its inputs contiguous, allocates its
 * outputs and runs a kernel slot (kernels.h, kernels_cuda.h).  No autograd
 * here: ampc/nn/_norm.py wraps these.
 */
#include "ampc.h"

#include "linalg_ops.h"
#include "nn_norm.h"
#include "nn_ops.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// argument checks

/* None -> NULL, a tensor -> itself (borrowed); -1 with TypeError. */
int
ampc_norm_opt_tensor(const char *fn, const char *arg, PyObject *obj,
                     AmpcTensorObject **out)
{
    *out = NULL;
    if (obj == Py_None) {
        return 0;
    }
    *out = ampc_arg_tensor(fn, arg, obj);
    return *out == NULL ? -1 : 0;
}

/* The dtype of the n parameters ps (NULL entries absent): every one of
 * them a float tensor of one dtype, the input's or float32 (PyTorch's
 * mixed precision: a 16-bit input with float32 parameters).  xdt when none
 * is given. */
int
ampc_norm_param_dtype(const char *fn, ampc_dtype xdt, int n,
                      AmpcTensorObject *const *ps, const char *const *names,
                      ampc_dtype *pdt)
{
    const char *first = NULL;
    *pdt = xdt;
    for (int k = 0; k < n; k++) {
        if (ps[k] == NULL) {
            continue;
        }
        ampc_dtype dt = ps[k]->dtype;
        if (first == NULL) {
            if (dt != xdt && dt != AMPC_FLOAT32) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s(): expected %s to have dtype %s (the "
                             "input's)%s, got %s",
                             fn, names[k], ampc_dtype_name(xdt),
                             xdt == AMPC_FLOAT32 ? "" : " or float32",
                             ampc_dtype_name(dt));
                return -1;
            }
            first = names[k];
            *pdt = dt;
        }
        else if (dt != *pdt) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): expected %s to have dtype %s (the same as "
                         "%s), got %s",
                         fn, names[k], ampc_dtype_name(*pdt), first,
                         ampc_dtype_name(dt));
            return -1;
        }
    }
    return 0;
}

/* Each present tensor of ps holds `count` elements (one per `what`). */
int
ampc_norm_check_counts(const char *fn, int n, AmpcTensorObject *const *ps,
                       const char *const *names, int64_t count,
                       const char *what)
{
    for (int k = 0; k < n; k++) {
        if (ps[k] != NULL && ampc_numel(ps[k]) != count) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): %s should contain %lld elements (one per "
                         "%s), not %lld",
                         fn, names[k], (long long)count, what,
                         (long long)ampc_numel(ps[k]));
            return -1;
        }
    }
    return 0;
}

/* A tensor of the statistics saved by a forward: float32, count
 * elements. */
int
ampc_norm_check_saved(const char *fn, const char *arg, AmpcTensorObject *t,
                      int64_t count, const char *what)
{
    if (t->dtype != AMPC_FLOAT32) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have dtype float32 (as the "
                     "forward saves it), got %s",
                     fn, arg, ampc_dtype_name(t->dtype));
        return -1;
    }
    return ampc_norm_check_counts(fn, 1, &t, &arg, count, what);
}

/* Contiguous versions of the n tensors ts (NULL stays NULL; new
 * references); -1 with an exception, every entry of out then NULL. */
int
ampc_norm_contiguous_all(int n, AmpcTensorObject *const *ts,
                         AmpcTensorObject **out)
{
    for (int k = 0; k < n; k++) {
        out[k] = NULL;
    }
    for (int k = 0; k < n; k++) {
        if (ts[k] != NULL && (out[k] = ampc_contiguous(ts[k])) == NULL) {
            for (int j = 0; j < k; j++) {
                Py_CLEAR(out[j]);
            }
            return -1;
        }
    }
    return 0;
}

void
ampc_norm_release_all(int n, AmpcTensorObject **ts)
{
    for (int k = 0; k < n; k++) {
        Py_CLEAR(ts[k]);
    }
}

void *
ampc_norm_data(AmpcTensorObject *t)
{
    return t == NULL ? NULL : t->data;
}

/* A kernel's return code as an exception: a CUDA error code, or an
 * ampc_nn_status from a CPU kernel.  0 when it succeeded. */
int
ampc_norm_kernel_status(const char *fn, int cuda, int rc)
{
    if (rc == 0) {
        return 0;
    }
    if (cuda) {
        ampc_cuda_raise(fn, rc);
    }
    else {
        PyErr_NoMemory();
    }
    return -1;
}

/* The gradients a backward returns: each a new (C,) or (D,) tensor of dt
 * or None, as `needs` asks. */
static PyObject *
grads_tuple(AmpcTensorObject *gx, AmpcTensorObject *gw, AmpcTensorObject *gb)
{
    PyObject *t = PyTuple_New(3);
    if (t == NULL) {
        return NULL;
    }
    AmpcTensorObject *gs[3] = {gx, gw, gb};
    for (int k = 0; k < 3; k++) {
        PyObject *g = gs[k] != NULL ? (PyObject *)gs[k] : Py_None;
        Py_INCREF(g);
        PyTuple_SET_ITEM(t, k, g);
    }
    return t;
}

/* New gradient tensors for the needs that can be met (NULL otherwise):
 * grad_x like x, grad_weight and grad_bias of shape (nd, shape) and dtype
 * pdt. */
static int
new_grads(AmpcTensorObject *x, const int needs[3], int nd,
          const int64_t *shape, ampc_dtype pdt, AmpcTensorObject **g)
{
    g[0] = g[1] = g[2] = NULL;
    if (needs[0] && (g[0] = ampc_tensor_empty(x->ndim, x->shape, x->dtype,
                                              x->device)) == NULL) {
        return -1;
    }
    for (int k = 1; k < 3; k++) {
        if (needs[k] && (g[k] = ampc_tensor_empty(nd, shape, pdt,
                                                  x->device)) == NULL) {
            ampc_norm_release_all(3, g);
            return -1;
        }
    }
    return 0;
}

/* The backward kernel of `kind` (shape: its ampc_*_norm_shape), on the
 * contiguous c = {grad_output, input, weight or NULL, mean, invstd or
 * rstd} into the gradients gr (NULL where not needed).  The kernel's
 * return code. */
static int
backward_kernel(ampc_norm_kind kind, const void *shape, int cuda,
                ampc_dtype xdt, ampc_dtype pdt, AmpcTensorObject *const *c,
                AmpcTensorObject *const *gr)
{
    const void *gy = c[0]->data, *x = c[1]->data, *w = ampc_norm_data(c[2]);
    const float *m = (const float *)c[3]->data;
    const float *r = (const float *)c[4]->data;
    void *gx = ampc_norm_data(gr[0]), *gw = ampc_norm_data(gr[1]);
    void *gb = ampc_norm_data(gr[2]);
    if (kind == AMPC_NORM_KIND_BATCH) {
        const ampc_batch_norm_shape *s = shape;
        return cuda ? ampc_cuda.batch_norm_bwd(s, xdt, pdt, gy, x, w, m, r,
                                               gx, gw, gb)
                    : ampc_cpu.batch_norm_bwd(s, xdt, pdt, gy, x, w, m, r,
                                              gx, gw, gb);
    }
    if (kind == AMPC_NORM_KIND_GROUP) {
        const ampc_group_norm_shape *s = shape;
        return cuda ? ampc_cuda.group_norm_bwd(s, xdt, pdt, gy, x, w, m, r,
                                               gx, gw, gb)
                    : ampc_cpu.group_norm_bwd(s, xdt, pdt, gy, x, w, m, r,
                                              gx, gw, gb);
    }
    const ampc_layer_norm_shape *s = shape;
    return cuda ? ampc_cuda.layer_norm_bwd(s, xdt, pdt, gy, x, w, m, r, gx,
                                           gw, gb)
                : ampc_cpu.layer_norm_bwd(s, xdt, pdt, gy, x, w, m, r, gx,
                                          gw, gb);
}

PyObject *
ampc_norm_backward(const char *fn, ampc_norm_kind kind, const void *shape,
                   int work, AmpcTensorObject *const *in, int needs[3],
                   int pnd, const int64_t *pshape, const char *const *names)
{
    AmpcTensorObject *x = in[1], *w = in[2];
    ampc_dtype pdt = w != NULL ? w->dtype : AMPC_FLOAT32;
    if ((w != NULL &&
         ampc_norm_param_dtype(fn, x->dtype, 1, &w, names, &pdt) < 0) ||
        ampc_nn_cuda_prologue(fn, 5, (AmpcTensorObject *[]){x, in[0], w,
                                                          in[3], in[4]}) <
            0) {
        return NULL;
    }
    needs[1] = needs[1] && w != NULL;

    PyObject *result = NULL;
    AmpcTensorObject *c[5], *gr[3] = {NULL};
    if (ampc_norm_contiguous_all(5, in, c) < 0) {
        return NULL;
    }
    if (new_grads(x, needs, pnd, pshape, pdt, gr) < 0) {
        goto done;
    }
    int rc = 0, cuda = ampc_is_cuda(x);
    if (work && (needs[0] || needs[1] || needs[2])) {
        if (cuda) {
            rc = backward_kernel(kind, shape, 1, x->dtype, pdt, c, gr);
        }
        else {
            RUN_KERNEL(2 * ampc_numel(x),
                       rc = backward_kernel(kind, shape, 0, x->dtype, pdt,
                                            c, gr));
        }
    }
    if (ampc_norm_kernel_status(fn, cuda, rc) == 0) {
        result = grads_tuple(gr[0], gr[1], gr[2]);
    }
done:
    ampc_norm_release_all(5, c);
    ampc_norm_release_all(3, gr);
    return result;
}

// ----------------------------------------------------------------------------
// batch_norm

static const char *const bn_names[] = {"weight", "bias", "running_mean",
                                       "running_var"};

/* x (N, C, *) -> (n, c, hw) */
static int
bn_shape(const char *fn, AmpcTensorObject *x, ampc_batch_norm_shape *s)
{
    if (x->ndim < 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected input to have 2 or more dimensions "
                     "(N, C, *), got %d-D",
                     fn, x->ndim);
        return -1;
    }
    s->n = x->shape[0];
    s->c = x->shape[1];
    s->hw = 1;
    for (int d = 2; d < x->ndim; d++) {
        s->hw *= x->shape[d];
    }
    return 0;
}

static PyObject *
op_batch_norm(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "weight", "bias", "running_mean",
                             "running_var", "training", "momentum", "eps",
                             NULL};
    static const char *fn = "batch_norm";
    PyObject *x_obj, *objs[4];
    int training;
    double momentum, eps;
    AmpcTensorObject *x, *ps[4];
    ampc_batch_norm_shape s;
    ampc_dtype pdt;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOpdd:batch_norm",
                                     kwlist, &x_obj, &objs[0], &objs[1],
                                     &objs[2], &objs[3], &training,
                                     &momentum, &eps) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_arg_float(fn, "input", x) < 0 || bn_shape(fn, x, &s) < 0) {
        return NULL;
    }
    for (int k = 0; k < 4; k++) {
        if (ampc_norm_opt_tensor(fn, bn_names[k], objs[k], &ps[k]) < 0) {
            return NULL;
        }
    }
    AmpcTensorObject *rm = ps[2], *rv = ps[3];
    if ((rm == NULL) != (rv == NULL)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): running_mean and running_var must both be "
                     "tensors or both be None",
                     fn);
        return NULL;
    }
    if (!training && rm == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): running_mean must be defined in evaluation mode "
                     "(training=False normalises with the running "
                     "statistics)",
                     fn);
        return NULL;
    }
    if (ampc_norm_check_counts(fn, 4, ps, bn_names, s.c,
                               "channel of input") < 0 ||
        ampc_norm_param_dtype(fn, x->dtype, 4, ps, bn_names, &pdt) < 0 ||
        ampc_nn_cuda_prologue(fn, 5, (AmpcTensorObject *[]){x, ps[0], ps[1],
                                                          rm, rv}) < 0) {
        return NULL;
    }
    s.training = training;
    s.momentum = momentum;
    s.eps = eps;

    PyObject *result = NULL;
    int64_t cshape[1] = {s.c};
    AmpcTensorObject *in[5] = {x, ps[0], ps[1], rm, rv}, *c[5];
    AmpcTensorObject *y = NULL, *mean = NULL, *invstd = NULL;
    if (ampc_norm_contiguous_all(5, in, c) < 0) {
        return NULL;
    }
    if ((y = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)) ==
            NULL ||
        (mean = ampc_tensor_empty(1, cshape, AMPC_FLOAT32, x->device)) ==
            NULL ||
        (invstd = ampc_tensor_empty(1, cshape, AMPC_FLOAT32, x->device)) ==
            NULL) {
        goto done;
    }
    void *rmd = ampc_norm_data(c[3]), *rvd = ampc_norm_data(c[4]);
    int rc, cuda = ampc_is_cuda(x);
    if (cuda) {
        rc = ampc_cuda.batch_norm_fwd(&s, x->dtype, pdt, c[0]->data,
                                      ampc_norm_data(c[1]),
                                      ampc_norm_data(c[2]),
                                      rmd, rvd, (float *)mean->data,
                                      (float *)invstd->data, y->data);
    }
    else {
        RUN_KERNEL(ampc_numel(x),
                   rc = ampc_cpu.batch_norm_fwd(
                       &s, x->dtype, pdt, c[0]->data, ampc_norm_data(c[1]),
                       ampc_norm_data(c[2]), rmd, rvd, (float *)mean->data,
                       (float *)invstd->data, y->data));
    }
    if (ampc_norm_kernel_status(fn, cuda, rc) < 0) {
        goto done;
    }
    if (training && rm != NULL && s.n * s.hw > 0) {
        /* the running statistics were updated in place, or in a
         * contiguous copy that goes back now (either way a new version) */
        for (int k = 3; k < 5; k++) {
            if (c[k] == in[k]) {
                in[k]->storage->version++;
            }
            else if (ampc_copy_into(in[k], c[k]) < 0) {
                goto done;
            }
        }
    }
    result = PyTuple_Pack(3, y, mean, invstd);
done:
    ampc_norm_release_all(5, c);
    Py_XDECREF(y);
    Py_XDECREF(mean);
    Py_XDECREF(invstd);
    return result;
}

static PyObject *
op_batch_norm_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input", "weight", "save_mean",
                             "save_invstd", "training", "needs", NULL};
    static const char *fn = "batch_norm_backward";
    PyObject *g_obj, *x_obj, *w_obj, *m_obj, *i_obj, *needs_obj;
    AmpcTensorObject *g, *x, *w, *m, *inv;
    ampc_batch_norm_shape s = {0};
    int training, needs[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOpO:batch_norm_backward",
                                     kwlist, &g_obj, &x_obj, &w_obj, &m_obj,
                                     &i_obj, &training, &needs_obj) ||
        (g = ampc_arg_tensor(fn, "grad_output", g_obj)) == NULL ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        (m = ampc_arg_tensor(fn, "save_mean", m_obj)) == NULL ||
        (inv = ampc_arg_tensor(fn, "save_invstd", i_obj)) == NULL ||
        ampc_norm_opt_tensor(fn, "weight", w_obj, &w) < 0 ||
        ampc_la_parse_needs(fn, needs_obj,
                            "need_input, need_weight, need_bias",
                            needs) < 0 ||
        ampc_arg_float(fn, "input", x) < 0 || bn_shape(fn, x, &s) < 0 ||
        ampc_arg_dtype(fn, "grad_output", g, x->dtype, "input") < 0 ||
        ampc_arg_shape(fn, "grad_output", g, x->ndim, x->shape,
                       "input") < 0 ||
        ampc_norm_check_saved(fn, "save_mean", m, s.c,
                              "channel of input") < 0 ||
        ampc_norm_check_saved(fn, "save_invstd", inv, s.c,
                              "channel of input") < 0 ||
        ampc_norm_check_counts(fn, 1, &w, bn_names, s.c,
                               "channel of input") < 0) {
        return NULL;
    }
    s.training = training;
    AmpcTensorObject *in[5] = {g, x, w, m, inv};
    return ampc_norm_backward(fn, AMPC_NORM_KIND_BATCH, &s, 1, in, needs, 1,
                              &s.c, bn_names);
}

// ----------------------------------------------------------------------------
// layer_norm

static const char *const ln_names[] = {"weight", "bias"};

/* normalized_shape (a sequence of ints) against x's trailing dims ->
 * (rows, D); its dims into ns[], their count into *nd. */
static int
ln_shape(const char *fn, AmpcTensorObject *x, PyObject *obj, int *nd,
         int64_t *ns, ampc_layer_norm_shape *s)
{
    PyObject *seq = PySequence_Fast(obj, "");
    if (seq == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'normalized_shape' must be a tuple of "
                     "ints, not %.100s",
                     fn, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int ok = n <= AMPC_MAX_DIMS;
    for (Py_ssize_t k = 0; ok && k < n; k++) {
        PyObject *v = PySequence_Fast_GET_ITEM(seq, k);
        ok = PyLong_Check(v) && !PyBool_Check(v);
        ns[k] = ok ? PyLong_AsLongLong(v) : 0;
        ok = ok && !PyErr_Occurred();
    }
    Py_DECREF(seq);
    if (!ok) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'normalized_shape' must be a tuple "
                         "of ints, got %R",
                         fn, obj);
        }
        return -1;
    }
    char want[256], got[256];
    *nd = (int)n;
    ampc_format_shape(want, sizeof(want), *nd, ns);
    if (n == 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected normalized_shape to be at least "
                     "1-dimensional, i.e., containing at least one element, "
                     "but got normalized_shape = %s",
                     fn, want);
        return -1;
    }
    ok = x->ndim >= *nd;
    for (int k = 0; ok && k < *nd; k++) {
        ok = x->shape[x->ndim - *nd + k] == ns[k];
    }
    if (!ok) {
        ampc_format_shape(got, sizeof(got), x->ndim, x->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Given normalized_shape=%s, expected input with "
                     "shape [*, %s, but got input of size%s",
                     fn, want, want + 1, got);
        return -1;
    }
    s->rows = 1;
    s->d = 1;
    for (int k = 0; k < x->ndim; k++) {
        if (k < x->ndim - *nd) {
            s->rows *= x->shape[k];
        }
        else {
            s->d *= x->shape[k];
        }
    }
    return 0;
}

/* weight and bias (either may be NULL) of normalized_shape's shape */
static int
ln_params(const char *fn, AmpcTensorObject *const *ps, int nd,
          const int64_t *ns)
{
    for (int k = 0; k < 2; k++) {
        AmpcTensorObject *p = ps[k];
        int ok = p == NULL || p->ndim == nd;
        for (int d = 0; ok && p != NULL && d < nd; d++) {
            ok = p->shape[d] == ns[d];
        }
        if (!ok) {
            char want[256], got[256];
            ampc_format_shape(want, sizeof(want), nd, ns);
            ampc_format_shape(got, sizeof(got), p->ndim, p->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): Expected %s to be of same shape as "
                         "normalized_shape, but got %s of shape %s and "
                         "normalized_shape = %s",
                         fn, ln_names[k], ln_names[k], got, want);
            return -1;
        }
    }
    return 0;
}

static PyObject *
op_layer_norm(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "normalized_shape", "weight", "bias",
                             "eps", NULL};
    static const char *fn = "layer_norm";
    PyObject *x_obj, *ns_obj, *w_obj = Py_None, *b_obj = Py_None;
    double eps = 1e-5;
    AmpcTensorObject *x, *ps[2];
    ampc_layer_norm_shape s;
    ampc_dtype pdt;
    int nd;
    int64_t ns[AMPC_MAX_DIMS];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOd:layer_norm", kwlist,
                                     &x_obj, &ns_obj, &w_obj, &b_obj, &eps) ||
        (x = ampc_arg_tensor(fn, "input", x_obj)) == NULL ||
        ampc_norm_opt_tensor(fn, "weight", w_obj, &ps[0]) < 0 ||
        ampc_norm_opt_tensor(fn, "bias", b_obj, &ps[1]) < 0 ||
        ampc_arg_float(fn, "input", x) < 0 ||
        ln_shape(fn, x, ns_obj, &nd, ns, &s) < 0 ||
        ln_params(fn, ps, nd, ns) < 0 ||
        ampc_norm_param_dtype(fn, x->dtype, 2, ps, ln_names, &pdt) < 0 ||
        ampc_nn_cuda_prologue(fn, 3, (AmpcTensorObject *[]){x, ps[0],
                                                          ps[1]}) < 0) {
        return NULL;
    }
    s.eps = eps;

    PyObject *result = NULL;
    int64_t rshape[1] = {s.rows};
    AmpcTensorObject *in[3] = {x, ps[0], ps[1]}, *c[3];
    AmpcTensorObject *y = NULL, *mean = NULL, *rstd = NULL;
    if (ampc_norm_contiguous_all(3, in, c) < 0) {
        return NULL;
    }
    if ((y = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device)) ==
            NULL ||
        (mean = ampc_tensor_empty(1, rshape, AMPC_FLOAT32, x->device)) ==
            NULL ||
        (rstd = ampc_tensor_empty(1, rshape, AMPC_FLOAT32, x->device)) ==
            NULL) {
        goto done;
    }
    int rc = 0, cuda = ampc_is_cuda(x);
    if (s.rows * s.d > 0 && cuda) {
        rc = ampc_cuda.layer_norm_fwd(&s, x->dtype, pdt, c[0]->data,
                                      ampc_norm_data(c[1]),
                                      ampc_norm_data(c[2]),
                                      (float *)mean->data,
                                      (float *)rstd->data, y->data);
    }
    else if (s.rows * s.d > 0) {
        RUN_KERNEL(ampc_numel(x),
                   rc = ampc_cpu.layer_norm_fwd(
                       &s, x->dtype, pdt, c[0]->data, ampc_norm_data(c[1]),
                       ampc_norm_data(c[2]), (float *)mean->data,
                       (float *)rstd->data, y->data));
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
op_layer_norm_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input", "normalized_shape",
                             "weight", "mean", "rstd", "needs", NULL};
    static const char *fn = "layer_norm_backward";
    PyObject *g_obj, *x_obj, *ns_obj, *w_obj, *m_obj, *r_obj, *needs_obj;
    AmpcTensorObject *g, *x, *w, *m, *r;
    ampc_layer_norm_shape s = {0};
    int nd, needs[3];
    int64_t ns[AMPC_MAX_DIMS];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOO:layer_norm_backward",
                                     kwlist, &g_obj, &x_obj, &ns_obj, &w_obj,
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
        ln_shape(fn, x, ns_obj, &nd, ns, &s) < 0 ||
        ln_params(fn, (AmpcTensorObject *[]){w, NULL}, nd, ns) < 0 ||
        ampc_arg_dtype(fn, "grad_output", g, x->dtype, "input") < 0 ||
        ampc_arg_shape(fn, "grad_output", g, x->ndim, x->shape,
                       "input") < 0 ||
        ampc_norm_check_saved(fn, "mean", m, s.rows, "row of input") < 0 ||
        ampc_norm_check_saved(fn, "rstd", r, s.rows, "row of input") < 0) {
        return NULL;
    }
    AmpcTensorObject *in[5] = {g, x, w, m, r};
    return ampc_norm_backward(fn, AMPC_NORM_KIND_LAYER, &s, s.d > 0, in,
                              needs, nd, ns, ln_names);
}

// ----------------------------------------------------------------------------

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_nn_norm_methods[] = {
    {"batch_norm", KW(op_batch_norm),
     "batch_norm(input, weight, bias, running_mean, running_var, training, "
     "momentum, eps) -> (output, save_mean, save_invstd); updates the "
     "running statistics in place when training"},
    {"batch_norm_backward", KW(op_batch_norm_backward),
     "batch_norm_backward(grad_output, input, weight, save_mean, "
     "save_invstd, training, needs) -> (grad_input, grad_weight, "
     "grad_bias), None where needs is False"},
    {"layer_norm", KW(op_layer_norm),
     "layer_norm(input, normalized_shape, weight=None, bias=None, "
     "eps=1e-5) -> (output, mean, rstd)"},
    {"layer_norm_backward", KW(op_layer_norm_backward),
     "layer_norm_backward(grad_output, input, normalized_shape, weight, "
     "mean, rstd, needs) -> (grad_input, grad_weight, grad_bias), None "
     "where needs is False"},
    {NULL},
};
