/* nn_loss.c - the Python-facing class-index losses of ampc._C, each with
 * its backward: nll_loss and cross_entropy (mse_loss is in nn_mse.c).  Each
 * op parses and checks its arguments, makes its inputs contiguous,
 * allocates its outputs and runs a kernel slot; the losses then reduce the
 * kernels' per-row doubles here, in order (on a GPU, on the device).
 *
 * The two class-index losses keep nothing but their inputs between forward
 * and backward: cross_entropy returns (loss, log_probs), and its backward
 * takes log_probs and, optionally, total_weight (the sum of the target
 * weights, which it recomputes from target and weight when None).
 */
#include "ampc.h"

#include <math.h>

#include "cpu/loops.h"
#include "nn_ops.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// argument helpers

/* A Python float (or int) argument. */
static int
parse_double(const char *fn, const char *arg, PyObject *obj, double *out)
{
    if (!PyFloat_Check(obj) && !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a number, not %.100s", fn,
                     arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

// ----------------------------------------------------------------------------
// class-index losses: nll_loss and cross_entropy

/* The checked arguments of a class-index loss.  The tensors are new
 * references (contiguous); on the CPU weight is a float32 copy or NULL, on
 * a GPU weight_t is the (contiguous) weight tensor or NULL. */
typedef struct {
    const char *fn;
    AmpcTensorObject *input;    /* (N, C) or (C,) */
    AmpcTensorObject *target;   /* (N,) or () int64 */
    float *weight;
    AmpcTensorObject *weight_t;
    ampc_class_loss_shape s;
    int reduction;
    int batched;                /* input is 2-D */
    int cuda;
} class_loss;

static void
class_loss_clear(class_loss *a)
{
    Py_CLEAR(a->input);
    Py_CLEAR(a->target);
    Py_CLEAR(a->weight_t);
    PyMem_Free(a->weight);
    a->weight = NULL;
}

static int
class_loss_init(class_loss *a, const char *fn, PyObject *in_obj,
                PyObject *t_obj, PyObject *w_obj, PyObject *red_obj,
                long long ignore_index, double label_smoothing)
{
    AmpcTensorObject *in, *t, *w = NULL;
    memset(a, 0, sizeof(*a));
    a->fn = fn;
    if ((in = ampc_arg_tensor(fn, "input", in_obj)) == NULL ||
        (t = ampc_arg_tensor(fn, "target", t_obj)) == NULL ||
        (w_obj != Py_None &&
         (w = ampc_arg_tensor(fn, "weight", w_obj)) == NULL) ||
        ampc_arg_float(fn, "input", in) < 0 ||
        (a->reduction = ampc_nn_parse_reduction(fn, red_obj)) < 0 ||
        ampc_nn_cuda_prologue(fn, 3, (AmpcTensorObject *[]){in, t, w}) < 0) {
        return -1;
    }
    a->cuda = ampc_is_cuda(in);
    if (in->ndim != 1 && in->ndim != 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input tensor should be 1D (C) or 2D (N, C), got "
                     "%dD",
                     fn, in->ndim);
        return -1;
    }
    if (t->dtype != AMPC_INT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected target to have dtype int64 (class "
                     "indices), got %s",
                     fn, ampc_dtype_name(t->dtype));
        return -1;
    }
    a->batched = in->ndim == 2;
    a->s.n = a->batched ? in->shape[0] : 1;
    a->s.c = in->shape[in->ndim - 1];
    a->s.ignore_index = ignore_index;
    a->s.label_smoothing = label_smoothing;
    if (a->batched && (t->ndim != 1 || t->shape[0] != a->s.n)) {
        char buf[256];
        ampc_format_shape(buf, sizeof(buf), t->ndim, t->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected input batch_size (%lld) to match "
                     "target batch_size: target must have shape [%lld], got "
                     "%s",
                     fn, (long long)a->s.n, (long long)a->s.n, buf);
        return -1;
    }
    if (!a->batched && t->ndim != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): 1D input (C) expects a 0-D target, got a %d-D "
                     "target",
                     fn, t->ndim);
        return -1;
    }
    if (w != NULL) {
        if (ampc_arg_dtype(fn, "weight", w, in->dtype, "input") < 0) {
            return -1;
        }
        if (w->ndim != 1 || w->shape[0] != a->s.c) {
            char buf[256];
            ampc_format_shape(buf, sizeof(buf), w->ndim, w->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): weight tensor should be defined either for "
                         "all %lld classes or no classes but got weight "
                         "tensor of shape: %s",
                         fn, (long long)a->s.c, buf);
            return -1;
        }
    }
    a->input = ampc_contiguous(in);
    a->target = a->input == NULL ? NULL : ampc_contiguous(t);
    if (a->target == NULL) {
        return -1;
    }
    if (a->cuda) {
        /* the kernels validate the targets (check_deferred) */
        if (w != NULL && (a->weight_t = ampc_contiguous(w)) == NULL) {
            return -1;
        }
        return 0;
    }
    const int64_t *tv = (const int64_t *)a->target->data;
    for (int64_t i = 0; i < a->s.n; i++) {
        if (tv[i] != ignore_index && (tv[i] < 0 || tv[i] >= a->s.c)) {
            PyErr_Format(PyExc_IndexError,
                         "%s(): Target %lld is out of bounds (C = %lld).", fn,
                         (long long)tv[i], (long long)a->s.c);
            return -1;
        }
    }
    if (w != NULL) {
        a->weight = PyMem_Malloc(sizeof(float) * (size_t)(a->s.c + 1));
        if (a->weight == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        size_t es = ampc_dtype_size[w->dtype];
        for (int64_t k = 0; k < a->s.c; k++) {
            a->weight[k] = (float)ampc_scalar_as_double(
                w->dtype, w->data + k * w->strides[0] * (int64_t)es);
        }
    }
    return 0;
}

/* The sum of the target weights over the rows that are not ignored. */
static double
class_loss_total_weight(const class_loss *a)
{
    const int64_t *tv = (const int64_t *)a->target->data;
    double total = 0.0;
    for (int64_t i = 0; i < a->s.n; i++) {
        if (tv[i] != a->s.ignore_index) {
            total += a->weight != NULL ? a->weight[tv[i]] : 1.0;
        }
    }
    return total;
}

/* (loss, total_weight) from the kernels' rows: 'none' keeps the rows (N,)
 * (0-d for a 1-D input) and gives total_weight 0, as torch; 'sum' adds
 * them; 'mean' divides the sum by the total weight. */
static int
class_loss_reduce(const class_loss *a, const double *row_loss,
                  const double *row_weight, AmpcTensorObject **loss,
                  AmpcTensorObject **total_weight)
{
    ampc_dtype dt = a->input->dtype;
    double sum = 0.0, total = 0.0;
    *loss = *total_weight = NULL;
    if (a->reduction == AMPC_REDUCTION_NONE) {
        int64_t n = a->s.n;
        *loss = ampc_tensor_empty(a->batched ? 1 : 0, &n, dt,
                                  a->input->device);
        if (*loss == NULL) {
            return -1;
        }
        size_t es = ampc_dtype_size[dt];
        for (int64_t i = 0; i < n; i++) {
            ampc_store_f64(dt, (*loss)->data + i * (int64_t)es, row_loss[i]);
        }
    }
    else {
        for (int64_t i = 0; i < a->s.n; i++) {
            sum += row_loss[i];
            total += row_weight[i];
        }
        double v = a->reduction == AMPC_REDUCTION_MEAN ? sum / total : sum;
        *loss = ampc_nn_scalar_tensor(v, dt);
        if (*loss == NULL) {
            return -1;
        }
    }
    *total_weight = ampc_nn_scalar_tensor(total, AMPC_FLOAT32);
    if (*total_weight == NULL) {
        Py_CLEAR(*loss);
        return -1;
    }
    return 0;
}

/* The per-row gradient factors of a class-index loss: grad_loss's rows for
 * 'none' (shape (N,) or ()), its one value for 'sum', divided by the total
 * weight for 'mean' (total_weight: a number, a one-element tensor, or None
 * to recompute).  A PyMem array of N floats, or NULL. */
/* grad_output of a class-index loss, checked (borrowed), or NULL. */
static AmpcTensorObject *
class_loss_grad_output(const class_loss *a, PyObject *g_obj)
{
    const char *fn = a->fn;
    AmpcTensorObject *g = ampc_arg_tensor(fn, "grad_output", g_obj);
    if (g == NULL || ampc_arg_float(fn, "grad_output", g) < 0 ||
        ampc_check_same_device(a->input, g) < 0) {
        return NULL;
    }
    int64_t n = a->s.n;
    if (a->reduction == AMPC_REDUCTION_NONE) {
        if (ampc_arg_shape(fn, "grad_output", g, a->batched ? 1 : 0, &n,
                           "the unreduced loss") < 0) {
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
    return g;
}

/* total_weight of a 'mean' backward: a one-element float tensor or a
 * number -> *tw (the tensor, borrowed) or *total; None leaves both. */
static int
class_loss_total_arg(const class_loss *a, PyObject *tw_obj,
                     AmpcTensorObject **tw, double *total)
{
    *tw = NULL;
    if (tw_obj == Py_None) {
        return 0;
    }
    if (!ampc_tensor_check(tw_obj)) {
        return parse_double(a->fn, "total_weight", tw_obj, total);
    }
    *tw = AMPC_TENSOR(tw_obj);
    if (ampc_numel(*tw) != 1 || !ampc_dtype_is_float((*tw)->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): total_weight must be a one-element "
                     "floating-point tensor",
                     a->fn);
        return -1;
    }
    return 0;
}

static float *
class_loss_row_scale(const class_loss *a, PyObject *g_obj, PyObject *tw_obj)
{
    const char *fn = a->fn;
    AmpcTensorObject *g = class_loss_grad_output(a, g_obj);
    if (g == NULL) {
        return NULL;
    }
    int64_t n = a->s.n;
    double scale = 1.0;
    if (a->reduction == AMPC_REDUCTION_MEAN) {
        AmpcTensorObject *tw;
        double total;
        if (class_loss_total_arg(a, tw_obj, &tw, &total) < 0) {
            return NULL;
        }
        if (tw != NULL) {
            char buf[8];
            if (ampc_read_to_host(fn, tw, buf, ampc_dtype_size[tw->dtype]) <
                0) {
                return NULL;
            }
            total = ampc_scalar_as_double(tw->dtype, buf);
        }
        else if (tw_obj == Py_None) {
            /* as the forward's float32 total_weight holds it */
            total = (float)class_loss_total_weight(a);
        }
        scale = 1.0 / total;
    }
    float *rs = PyMem_Malloc(sizeof(float) * (size_t)(n + 1));
    if (rs == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    size_t es = ampc_dtype_size[g->dtype];
    for (int64_t i = 0; i < n; i++) {
        const char *p = g->data;
        if (a->reduction == AMPC_REDUCTION_NONE && a->batched) {
            p += i * g->strides[0] * (int64_t)es;
        }
        rs[i] = (float)(ampc_scalar_as_double(g->dtype, p) * scale);
    }
    return rs;
}

/* The forward on a GPU: (loss, total_weight) for nll_loss, (loss,
 * log_probs) for cross_entropy (xent), reduced on the device. */
static PyObject *
class_loss_fwd_cuda(const class_loss *a, int xent)
{
    ampc_dtype dt = a->input->dtype;
    ampc_device dev = a->input->device;
    int64_t n = a->s.n, one = 1;
    PyObject *result = NULL;
    AmpcTensorObject *loss, *total = NULL, *logp = NULL;
    if (a->reduction == AMPC_REDUCTION_NONE) {
        loss = ampc_tensor_empty(a->batched ? 1 : 0, &n, dt, dev);
    }
    else {
        loss = ampc_tensor_empty(0, &one, dt, dev);
    }
    if (loss == NULL ||
        (total = ampc_tensor_empty(0, &one, AMPC_FLOAT32, dev)) == NULL ||
        (xent && (logp = ampc_tensor_empty(a->input->ndim, a->input->shape,
                                           dt, dev)) == NULL)) {
        goto done;
    }
    ampc_cuda_class_loss_args c = {
        .s = a->s,
        .reduction = a->reduction,
        .dt = dt,
        .input = a->input->data,
        .target = (const int64_t *)a->target->data,
        .weight = a->weight_t != NULL ? a->weight_t->data : NULL,
        .logp = logp != NULL ? logp->data : NULL,
        .loss = loss->data,
        .total_weight = (float *)total->data,
    };
    int rc = xent ? ampc_cuda.cross_entropy_fwd(&c)
                  : ampc_cuda.nll_loss_fwd(&c);
    if (rc != 0) {
        ampc_cuda_raise(a->fn, rc);
        goto done;
    }
    result = PyTuple_Pack(2, loss, xent ? logp : total);
done:
    Py_XDECREF(loss);
    Py_XDECREF(total);
    Py_XDECREF(logp);
    return result;
}

/* The backward on a GPU: grad (N, C) (input's shape); the per-row factors
 * are formed on the device from grad_output and total_weight. */
static AmpcTensorObject *
class_loss_bwd_cuda(const class_loss *a, PyObject *g_obj, PyObject *tw_obj,
                    int xent)
{
    AmpcTensorObject *g = class_loss_grad_output(a, g_obj), *tw = NULL;
    double total = 0.0;
    if (g == NULL || (a->reduction == AMPC_REDUCTION_MEAN &&
                      class_loss_total_arg(a, tw_obj, &tw, &total) < 0)) {
        return NULL;
    }
    ampc_cuda_class_loss_args c = {
        .s = a->s,
        .reduction = a->reduction,
        .dt = a->input->dtype,
        .input = a->input->data,
        .target = (const int64_t *)a->target->data,
        .weight = a->weight_t != NULL ? a->weight_t->data : NULL,
        .grad_out = g->data,
        .gdt = g->dtype,
        .grad_stride = (a->reduction == AMPC_REDUCTION_NONE && a->batched)
                           ? g->strides[0]
                           : 0,
        .total_recompute = tw_obj == Py_None,
        .total_host = total,
    };
    if (tw != NULL && ampc_is_cuda(tw)) {
        if (ampc_check_same_device(a->input, tw) < 0) {
            return NULL;
        }
        c.total_in = tw->data;
        c.tdt = tw->dtype;
    }
    else if (tw != NULL) {
        /* a CPU total_weight: one small host read, no GPU wait */
        c.total_host = ampc_scalar_as_double(tw->dtype, tw->data);
    }
    AmpcTensorObject *grad = ampc_tensor_empty(
        a->input->ndim, a->input->shape, a->input->dtype, a->input->device);
    if (grad == NULL) {
        return NULL;
    }
    c.grad = grad->data;
    int rc = xent ? ampc_cuda.cross_entropy_bwd(&c)
                  : ampc_cuda.nll_loss_bwd(&c);
    if (rc != 0) {
        Py_DECREF(grad);
        return ampc_cuda_raise(a->fn, rc);
    }
    return grad;
}

static PyObject *
op_nll_loss(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "target", "weight", "reduction",
                             "ignore_index", NULL};
    PyObject *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    long long ignore_index = -100;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOL:nll_loss", kwlist,
                                     &in_obj, &t_obj, &w_obj, &red_obj,
                                     &ignore_index)) {
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    PyObject *result = NULL;
    double *rows = NULL;
    int rc = class_loss_init(&a, "nll_loss", in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, 0.0);
    Py_XDECREF(mean);
    if (rc < 0) {
        goto done;
    }
    if (a.cuda) {
        result = class_loss_fwd_cuda(&a, 0);
        goto done;
    }
    rows = PyMem_Malloc(sizeof(double) * (size_t)(2 * a.s.n + 1));
    if (rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    ampc_cpu.nll_loss_fwd(&a.s, a.input->dtype, a.input->data,
                          (const int64_t *)a.target->data, a.weight, rows,
                          rows + a.s.n);
    AmpcTensorObject *loss, *total;
    if (class_loss_reduce(&a, rows, rows + a.s.n, &loss, &total) == 0) {
        result = PyTuple_Pack(2, loss, total);
        Py_DECREF(loss);
        Py_DECREF(total);
    }
done:
    PyMem_Free(rows);
    class_loss_clear(&a);
    return result;
}

static PyObject *
op_nll_loss_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "input", "target", "weight",
                             "reduction", "ignore_index", "total_weight",
                             NULL};
    PyObject *g_obj, *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    PyObject *tw_obj = Py_None;
    long long ignore_index = -100;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|OOLO:nll_loss_backward",
                                     kwlist, &g_obj, &in_obj, &t_obj, &w_obj,
                                     &red_obj, &ignore_index, &tw_obj)) {
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    int rc = class_loss_init(&a, "nll_loss_backward", in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, 0.0);
    Py_XDECREF(mean);
    if (rc == 0 && a.cuda) {
        AmpcTensorObject *grad = class_loss_bwd_cuda(&a, g_obj, tw_obj, 0);
        class_loss_clear(&a);
        return (PyObject *)grad;
    }
    float *rs = rc < 0 ? NULL : class_loss_row_scale(&a, g_obj, tw_obj);
    AmpcTensorObject *grad = NULL;
    if (rs != NULL) {
        grad = ampc_tensor_empty(a.input->ndim, a.input->shape,
                                 a.input->dtype, a.input->device);
    }
    if (grad != NULL) {
        RUN_KERNEL(ampc_numel(grad),
                   ampc_cpu.nll_loss_bwd(&a.s, a.input->dtype,
                                         (const int64_t *)a.target->data,
                                         a.weight, rs, grad->data));
    }
    PyMem_Free(rs);
    class_loss_clear(&a);
    return (PyObject *)grad;
}

static PyObject *
op_cross_entropy(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "target", "weight", "reduction",
                             "ignore_index", "label_smoothing", NULL};
    static const char *fn = "cross_entropy";
    PyObject *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    long long ignore_index = -100;
    double ls = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOLd:cross_entropy",
                                     kwlist, &in_obj, &t_obj, &w_obj,
                                     &red_obj, &ignore_index, &ls)) {
        return NULL;
    }
    if (!(ls >= 0.0 && ls <= 1.0)) {
        ampc_nn_raise_number(PyExc_RuntimeError,
                     "%s(): label_smoothing must be between 0.0 and 1.0. "
                     "Got: %R",
                     fn, ls);
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    PyObject *result = NULL;
    double *rows = NULL;
    AmpcTensorObject *logp = NULL;
    int rc = class_loss_init(&a, fn, in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, ls);
    Py_XDECREF(mean);
    if (rc < 0) {
        goto done;
    }
    if (a.cuda) {
        result = class_loss_fwd_cuda(&a, 1);
        goto done;
    }
    rows = PyMem_Malloc(sizeof(double) * (size_t)(2 * a.s.n + 1));
    logp = ampc_tensor_empty(a.input->ndim, a.input->shape, a.input->dtype,
                             a.input->device);
    if (rows == NULL || logp == NULL) {
        if (rows == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    if (a.s.c > 0) {
        RUN_KERNEL(a.s.n * a.s.c,
                   ampc_cpu.cross_entropy_fwd(&a.s, a.input->dtype,
                                              a.input->data,
                                              (const int64_t *)a.target->data,
                                              a.weight, logp->data, rows,
                                              rows + a.s.n));
    }
    else {
        /* no classes: every row is ignored (init rejected any other
         * target) */
        memset(rows, 0, sizeof(double) * (size_t)(2 * a.s.n));
    }
    AmpcTensorObject *loss, *total;
    if (class_loss_reduce(&a, rows, rows + a.s.n, &loss, &total) == 0) {
        result = PyTuple_Pack(2, loss, logp);
        Py_DECREF(loss);
        Py_DECREF(total);
    }
done:
    Py_XDECREF(logp);
    PyMem_Free(rows);
    class_loss_clear(&a);
    return result;
}

static PyObject *
op_cross_entropy_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad_output", "log_probs", "target", "weight",
                             "reduction", "ignore_index", "label_smoothing",
                             "total_weight", NULL};
    static const char *fn = "cross_entropy_backward";
    PyObject *g_obj, *in_obj, *t_obj, *w_obj = Py_None, *red_obj = NULL;
    PyObject *tw_obj = Py_None;
    long long ignore_index = -100;
    double ls = 0.0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOO|OOLdO:cross_entropy_backward", kwlist, &g_obj,
            &in_obj, &t_obj, &w_obj, &red_obj, &ignore_index, &ls,
            &tw_obj)) {
        return NULL;
    }
    if (!(ls >= 0.0 && ls <= 1.0)) {
        ampc_nn_raise_number(PyExc_RuntimeError,
                     "%s(): label_smoothing must be between 0.0 and 1.0. "
                     "Got: %R",
                     fn, ls);
        return NULL;
    }
    PyObject *mean = red_obj == NULL ? PyUnicode_FromString("mean") : NULL;
    class_loss a;
    int rc = class_loss_init(&a, fn, in_obj, t_obj, w_obj,
                             red_obj ? red_obj : mean, ignore_index, ls);
    Py_XDECREF(mean);
    if (rc == 0 && a.cuda) {
        AmpcTensorObject *grad = class_loss_bwd_cuda(&a, g_obj, tw_obj, 1);
        class_loss_clear(&a);
        return (PyObject *)grad;
    }
    float *rs = rc < 0 ? NULL : class_loss_row_scale(&a, g_obj, tw_obj);
    AmpcTensorObject *grad = NULL;
    if (rs != NULL) {
        grad = ampc_tensor_empty(a.input->ndim, a.input->shape,
                                 a.input->dtype, a.input->device);
    }
    if (grad != NULL && a.s.c > 0) {
        RUN_KERNEL(ampc_numel(grad),
                   ampc_cpu.cross_entropy_bwd(&a.s, a.input->dtype,
                                              a.input->data,
                                              (const int64_t *)a.target->data,
                                              a.weight, rs, grad->data));
    }
    PyMem_Free(rs);
    class_loss_clear(&a);
    return (PyObject *)grad;
}

// ----------------------------------------------------------------------------

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_nn_loss_methods[] = {
    {"nll_loss", KW(op_nll_loss),
     "nll_loss(input, target, weight=None, reduction='mean', "
     "ignore_index=-100) -> (loss, total_weight)"},
    {"nll_loss_backward", KW(op_nll_loss_backward),
     "nll_loss_backward(grad_output, input, target, weight=None, "
     "reduction='mean', ignore_index=-100, total_weight=None) -> grad_input"},
    {"cross_entropy", KW(op_cross_entropy),
     "cross_entropy(input, target, weight=None, reduction='mean', "
     "ignore_index=-100, label_smoothing=0.0) -> (loss, log_probs)"},
    {"cross_entropy_backward", KW(op_cross_entropy_backward),
     "cross_entropy_backward(grad_output, log_probs, target, weight=None, "
     "reduction='mean', ignore_index=-100, label_smoothing=0.0, "
     "total_weight=None) -> grad_input"},
    {NULL},
};
