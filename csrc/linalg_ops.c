/* linalg_ops.c - the Python-facing linear algebra of ampc._C: linear,
 * linear_backward and matmul (raw ops, no autograd; conv2d is in
 * conv_ops.c), the argument helpers both files use (linalg_ops.h), and the
 * private peak-FLOP probe the benchmarks use.  Parse and check, allocate,
 * then run the gemm slot of the CPU table (with the GIL released) or, for
 * CUDA tensors, of the CUDA table (cuBLASLt, queued on the device's
 * stream).  Every error names the op, the argument and what was expected.
 * The flags of ampc.backends.cuda.matmul and ampc.backends.cudnn live here
 * and go to the CUDA slots.
 */
#include "linalg_ops.h"

/* ampc.backends.cuda.matmul.allow_tf32 and ampc.backends.cudnn.*, with
 * PyTorch's defaults (set with the GIL held, read by the ops). */
static int matmul_allow_tf32 = 0;
ampc_cudnn_opts ampc_la_cudnn_opts = {
    .enabled = 1, .benchmark = 0, .deterministic = 0, .allow_tf32 = 1,
};

/* The cuDNN flags a CUDA convolution runs with: ampc.backends.cudnn's,
 * deterministic also under use_deterministic_algorithms (as PyTorch's
 * convolutions).  Read with the GIL held, before the call. */
const ampc_cudnn_opts *
ampc_la_conv_opts(void)
{
    static ampc_cudnn_opts o;
    o = ampc_la_cudnn_opts;
    o.deterministic = o.deterministic || ampc_deterministic_algorithms();
    return &o;
}

// ----------------------------------------------------------------------------
// argument helpers

/* obj as a tensor (CPU or CUDA) of a float dtype; NULL with an exception
 * naming fn and arg otherwise.  Borrowed. */
AmpcTensorObject *
ampc_la_float_tensor(const char *fn, const char *arg, PyObject *obj)
{
    if (!ampc_tensor_check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a Tensor, not %.100s", fn,
                     arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    AmpcTensorObject *t = AMPC_TENSOR(obj);
    if (!ampc_dtype_is_float(t->dtype)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to be a floating point tensor "
                     "(float32, float16 or bfloat16), got %s",
                     fn, arg, ampc_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

static void
device_name(char *buf, size_t size, ampc_device dev)
{
    if (dev.type == AMPC_DEV_CUDA) {
        snprintf(buf, size, "cuda:%d", (int)dev.index);
    }
    else {
        snprintf(buf, size, "cpu");
    }
}

/* -1 with PyTorch's RuntimeError unless the n tensors (NULL entries
 * skipped) share ts[0]'s device; else 0, with that device made current
 * when it is a GPU. */
int
ampc_la_check_devices(const char *fn, int n, AmpcTensorObject *const *ts)
{
    char d0[32], d1[32];
    for (int i = 1; i < n; i++) {
        if (ts[i] != NULL && (ts[i]->device.type != ts[0]->device.type ||
                              ts[i]->device.index != ts[0]->device.index)) {
            device_name(d0, sizeof(d0), ts[0]->device);
            device_name(d1, sizeof(d1), ts[i]->device);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): Expected all tensors to be on the same "
                         "device, but found at least two devices, %s and "
                         "%s!",
                         fn, d0, d1);
            return -1;
        }
    }
    return ampc_cuda_enter(fn, ts[0]->device);
}

/* -1 with RuntimeError unless t has the dtype of `ref` (argument ref_arg). */
int
ampc_la_same_dtype(const char *fn, const char *arg, AmpcTensorObject *t,
                   const char *ref_arg, AmpcTensorObject *ref)
{
    if (t->dtype != ref->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected %s to have dtype %s (the %s's), got %s",
                     fn, arg, ampc_dtype_name(ref->dtype), ref_arg,
                     ampc_dtype_name(t->dtype));
        return -1;
    }
    return 0;
}

int
ampc_la_check_ndim(const char *fn, const char *arg, AmpcTensorObject *t,
                   int ndim, const char *layout)
{
    if (t->ndim != ndim) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): %s must be %d-D %s, got %d-D", fn, arg, ndim,
                     layout, t->ndim);
        return -1;
    }
    return 0;
}

/* needs = (need_0, need_1, need_2) -> flags; -1 with TypeError. */
int
ampc_la_parse_needs(const char *fn, PyObject *obj, const char *names,
                    int flags[3])
{
    if (!(PyTuple_Check(obj) || PyList_Check(obj)) ||
        PySequence_Fast_GET_SIZE(obj) != 3) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): needs must be a tuple of 3 bools (%s), got %R",
                     fn, names, obj);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        flags[i] = PyObject_IsTrue(PySequence_Fast_GET_ITEM(obj, i));
        if (flags[i] < 0) {
            return -1;
        }
    }
    return 0;
}

/* An int or a pair (tuple or list) of ints -> v[0], v[1]; -1 with an
 * exception. */
int
ampc_la_parse_pair(const char *fn, const char *arg, PyObject *obj,
                   int64_t v[2])
{
    PyObject *items[2] = {obj, obj};
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        if (PySequence_Fast_GET_SIZE(obj) != 2) {
            goto bad;
        }
        items[0] = PySequence_Fast_GET_ITEM(obj, 0);
        items[1] = PySequence_Fast_GET_ITEM(obj, 1);
    }
    for (int i = 0; i < 2; i++) {
        if (!PyLong_Check(items[i]) || PyBool_Check(items[i])) {
            goto bad;
        }
        v[i] = PyLong_AsLongLong(items[i]);
        if (v[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;

bad:
    PyErr_Format(PyExc_TypeError,
                 "%s(): %s must be an int or a pair of ints, got %R", fn,
                 arg, obj);
    return -1;
}

PyObject *
ampc_la_kernel_failed(const char *fn)
{
    return PyErr_Format(PyExc_MemoryError,
                        "%s(): out of memory for the kernel's scratch "
                        "buffers",
                        fn);
}

/* Runs the gemm slot of dev's table: on the CPU without the GIL when the
 * product is large; on a GPU queued (the GIL is kept: queuing is quick).
 * -1 with an exception naming fn. */
static int
run_gemm(const char *fn, ampc_device dev, const ampc_gemm_args *g)
{
    int err;
    if (dev.type == AMPC_DEV_CUDA) {
        err = ampc_cuda.gemm(g, matmul_allow_tf32);
        if (err != 0) {
            ampc_cuda_raise(fn, err);
            return -1;
        }
        return 0;
    }
    double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k *
                   (double)(g->batch > 1 ? g->batch : 1);
    if (flops >= AMPC_LA_RELEASE_GIL_FLOPS) {
        Py_BEGIN_ALLOW_THREADS
        err = ampc_cpu.gemm(g);
        Py_END_ALLOW_THREADS
    }
    else {
        err = ampc_cpu.gemm(g);
    }
    if (err != 0) {
        ampc_la_kernel_failed(fn);
        return -1;
    }
    return 0;
}

/* A matrix operand: element (i, j) at data[i*rs + j*cs].  A dimension of
 * size 1 gets unit stride, which keeps the packing on its fast paths. */
typedef struct {
    const char *data;
    int64_t rows, cols, rs, cs;
} matrix;

static matrix
make_matrix(const char *data, int64_t rows, int64_t cols, int64_t rs,
            int64_t cs)
{
    matrix m = {data, rows, cols, rows == 1 ? 1 : rs, cols == 1 ? 1 : cs};
    return m;
}

/* The packing reads quickly along rows or along columns; a matrix strided
 * both ways is worth copying first. */
static int
matrix_fast(const matrix *m)
{
    return m->rs == 1 || m->cs == 1;
}

/* t's leading dimensions as one: t viewed as (rows, t->shape[-1]), or -1
 * when they do not collapse into one stride. */
static int
collapse_rows(AmpcTensorObject *t, matrix *m)
{
    int nd = t->ndim;
    int64_t cols = t->shape[nd - 1], rows = 1, rs = 0;
    for (int d = 0; d < nd - 1; d++) {
        rows *= t->shape[d];
    }
    if (nd >= 2) {
        rs = t->strides[nd - 2];
        for (int d = nd - 3; d >= 0; d--) {
            if (t->shape[d] != 1 &&
                t->strides[d] != t->strides[d + 1] * t->shape[d + 1]) {
                return -1;
            }
        }
    }
    *m = make_matrix(t->data, rows, cols, rs, t->strides[nd - 1]);
    return 0;
}

/* t as a (rows, IN) matrix that the GEMM reads fast: t itself or a
 * contiguous copy, returned as a new reference in *hold. */
static int
rows_matrix(AmpcTensorObject *t, matrix *m, AmpcTensorObject **hold)
{
    if (collapse_rows(t, m) == 0 && matrix_fast(m)) {
        *hold = (AmpcTensorObject *)Py_NewRef(t);
        return 0;
    }
    *hold = ampc_contiguous(t);
    if (*hold == NULL) {
        return -1;
    }
    return collapse_rows(*hold, m);
}

// ----------------------------------------------------------------------------
// linear

/* x (*, IN), weight (OUT, IN), bias (OUT) or None: the shared checks. */
static int
check_linear(const char *fn, AmpcTensorObject *x, AmpcTensorObject *w,
             AmpcTensorObject *b)
{
    char buf[256];
    if (x->ndim < 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input must have at least 1 dimension (*, "
                     "in_features), got a 0-d tensor",
                     fn);
        return -1;
    }
    if (ampc_la_check_ndim(fn, "weight", w, 2,
                           "(out_features, in_features)") < 0 ||
        ampc_la_same_dtype(fn, "weight", w, "input", x) < 0) {
        return -1;
    }
    if (x->shape[x->ndim - 1] != w->shape[1]) {
        ampc_format_shape(buf, sizeof(buf), w->ndim, w->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input has %lld features (its last dimension) "
                     "but weight has shape %s (%lld in_features)",
                     fn, (long long)x->shape[x->ndim - 1], buf,
                     (long long)w->shape[1]);
        return -1;
    }
    if (b != NULL) {
        if (ampc_la_same_dtype(fn, "bias", b, "input", x) < 0) {
            return -1;
        }
        if (b->ndim != 1 || b->shape[0] != w->shape[0]) {
            ampc_format_shape(buf, sizeof(buf), b->ndim, b->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): expected bias to have shape [%lld] (one "
                         "per output feature), got %s",
                         fn, (long long)w->shape[0], buf);
            return -1;
        }
    }
    return 0;
}

/* x (*, IN) @ weight (OUT, IN)^T + bias -> y (*, OUT) [relu] */
static PyObject *
op_linear(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"input", "weight", "bias", "relu", NULL};
    PyObject *x_obj, *w_obj, *b_obj = Py_None;
    int relu = 0;
    AmpcTensorObject *x, *w, *b = NULL, *xc = NULL, *wc = NULL, *bc = NULL;
    AmpcTensorObject *y = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|Op:linear", kwlist,
                                     &x_obj, &w_obj, &b_obj, &relu) ||
        (x = ampc_la_float_tensor("linear", "input", x_obj)) == NULL ||
        (w = ampc_la_float_tensor("linear", "weight", w_obj)) == NULL ||
        (b_obj != Py_None &&
         (b = ampc_la_float_tensor("linear", "bias", b_obj)) == NULL) ||
        check_linear("linear", x, w, b) < 0 ||
        ampc_la_check_devices("linear", 3,
                              (AmpcTensorObject *[]){x, w, b}) < 0) {
        return NULL;
    }

    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * x->ndim);
    shape[x->ndim - 1] = w->shape[0];
    matrix a, wm;
    if (rows_matrix(x, &a, &xc) < 0 || rows_matrix(w, &wm, &wc) < 0 ||
        (b != NULL && (bc = ampc_contiguous(b)) == NULL) ||
        (y = ampc_tensor_empty(x->ndim, shape, x->dtype, x->device)) ==
            NULL) {
        goto error;
    }
    /* y (M, OUT) = x (M, IN) W^T (IN, OUT): B(p, j) = W[j, p] */
    ampc_gemm_args g = {
        .m = a.rows, .n = w->shape[0], .k = a.cols, .dt = x->dtype,
        .a = a.data, .rsa = a.rs, .csa = a.cs,
        .b = wm.data, .rsb = wm.cs, .csb = wm.rs,
        .c = y->data, .cdt = x->dtype, .ldc = w->shape[0],
        .bias = bc != NULL ? bc->data : NULL,
        .bias_mode = bc != NULL ? AMPC_BIAS_COL : AMPC_BIAS_NONE,
        .relu = relu,
    };
    if (run_gemm("linear", x->device, &g) < 0) {
        goto error;
    }
    Py_DECREF(xc);
    Py_DECREF(wc);
    Py_XDECREF(bc);
    return (PyObject *)y;

error:
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    Py_XDECREF(y);
    return NULL;
}

/* grad_out (*, OUT), x (*, IN), weight (OUT, IN) -> (grad_x (*, IN),
 * grad_w (OUT, IN), grad_b (OUT)), each None unless needed */
static PyObject *
op_linear_backward(PyObject *module, PyObject *args)
{
    const char *fn = "linear_backward";
    PyObject *go_obj, *x_obj, *w_obj, *needs_obj;
    AmpcTensorObject *go, *x, *w, *goc = NULL, *xc = NULL, *wc = NULL;
    AmpcTensorObject *gx = NULL, *gw = NULL, *gb = NULL;
    int need[3];
    char buf[256], buf2[256];
    if (!PyArg_ParseTuple(args, "OOOO:linear_backward", &go_obj, &x_obj,
                          &w_obj, &needs_obj) ||
        (go = ampc_la_float_tensor(fn, "grad_out", go_obj)) == NULL ||
        (x = ampc_la_float_tensor(fn, "input", x_obj)) == NULL ||
        (w = ampc_la_float_tensor(fn, "weight", w_obj)) == NULL ||
        check_linear(fn, x, w, NULL) < 0 ||
        ampc_la_same_dtype(fn, "grad_out", go, "input", x) < 0 ||
        ampc_la_parse_needs(fn, needs_obj,
                            "need_input, need_weight, need_bias", need) < 0 ||
        ampc_la_check_devices(fn, 3, (AmpcTensorObject *[]){go, x, w}) < 0) {
        return NULL;
    }
    int ok = go->ndim == x->ndim && go->shape[go->ndim - 1] == w->shape[0];
    for (int d = 0; ok && d < x->ndim - 1; d++) {
        ok = go->shape[d] == x->shape[d];
    }
    if (!ok) {
        int64_t want[AMPC_MAX_DIMS];
        memcpy(want, x->shape, sizeof(int64_t) * x->ndim);
        want[x->ndim - 1] = w->shape[0];
        ampc_format_shape(buf, sizeof(buf), go->ndim, go->shape);
        ampc_format_shape(buf2, sizeof(buf2), x->ndim, want);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected grad_out to have shape %s (the "
                     "output's), got %s",
                     fn, buf2, buf);
        return NULL;
    }

    matrix d, a, wm;
    int64_t out = w->shape[0], in = w->shape[1];
    if (rows_matrix(go, &d, &goc) < 0 ||
        (need[0] && rows_matrix(w, &wm, &wc) < 0) ||
        (need[1] && rows_matrix(x, &a, &xc) < 0)) {
        goto error;
    }
    if (need[0]) {
        /* grad_x (M, IN) = grad_out (M, OUT) W (OUT, IN) */
        gx = ampc_tensor_empty(x->ndim, x->shape, x->dtype, x->device);
        if (gx == NULL) {
            goto error;
        }
        ampc_gemm_args g = {
            .m = d.rows, .n = in, .k = out, .dt = x->dtype,
            .a = d.data, .rsa = d.rs, .csa = d.cs,
            .b = wm.data, .rsb = wm.rs, .csb = wm.cs,
            .c = gx->data, .cdt = x->dtype, .ldc = in,
        };
        if (run_gemm(fn, go->device, &g) < 0) {
            goto error;
        }
    }
    if (need[1]) {
        /* grad_w (OUT, IN) = grad_out^T (OUT, M) x (M, IN) */
        gw = ampc_tensor_empty(2, w->shape, x->dtype, x->device);
        if (gw == NULL) {
            goto error;
        }
        ampc_gemm_args g = {
            .m = out, .n = in, .k = d.rows, .dt = x->dtype,
            .a = d.data, .rsa = d.cs, .csa = d.rs,
            .b = a.data, .rsb = a.rs, .csb = a.cs,
            .c = gw->data, .cdt = x->dtype, .ldc = in,
        };
        if (run_gemm(fn, go->device, &g) < 0) {
            goto error;
        }
    }
    if (need[2]) {
        /* grad_b (OUT) = the column sums of grad_out (M, OUT), summed in
         * double by the reduce slot and rounded once */
        AmpcTensorObject *flat = ampc_contiguous(goc);
        gb = flat != NULL ? ampc_tensor_empty(1, &out, x->dtype, x->device)
                          : NULL;
        if (gb != NULL && ampc_is_cuda(x)) {
            /* float32 sums in a fixed order on the GPU (bias.cu) */
            int err = ampc_cuda.bias_grad(x->dtype, d.rows, out, 1,
                                          flat->data, gb->data);
            if (err != 0) {
                ampc_cuda_raise(fn, err);
                Py_CLEAR(gb);
            }
        }
        else if (gb != NULL && d.rows == 0) {
            memset(gb->data, 0, (size_t)out * ampc_dtype_size[x->dtype]);
        }
        else if (gb != NULL) {
            Py_BEGIN_ALLOW_THREADS
            ampc_cpu.reduce(AMPC_RED_SUM, x->dtype, 1, d.rows, out,
                            flat->data, gb->data, NULL);
            Py_END_ALLOW_THREADS
        }
        Py_XDECREF(flat);
        if (gb == NULL) {
            goto error;
        }
    }
    Py_DECREF(goc);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    return Py_BuildValue("(NNN)", gx ? (PyObject *)gx : Py_NewRef(Py_None),
                         gw ? (PyObject *)gw : Py_NewRef(Py_None),
                         gb ? (PyObject *)gb : Py_NewRef(Py_None));

error:
    Py_XDECREF(goc);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(gx);
    Py_XDECREF(gw);
    Py_XDECREF(gb);
    return NULL;
}

// ----------------------------------------------------------------------------
// matmul

/* torch.matmul: 1-D operands gain a dimension of size 1 for the product
 * (in front for a, behind for b) that the result drops; the dimensions
 * before the last two broadcast.  Each matrix is read through its strides
 * (a transposed view costs no copy); the batch goes to the gemm slot as one
 * strided dimension where it collapses into one, else in pieces. */
static PyObject *
op_matmul(PyObject *module, PyObject *args)
{
    const char *fn = "matmul";
    PyObject *a_obj, *b_obj;
    AmpcTensorObject *a, *b, *ah = NULL, *bh = NULL, *c = NULL;
    char sa[256], sb[256];
    if (!PyArg_ParseTuple(args, "OO:matmul", &a_obj, &b_obj) ||
        (a = ampc_la_float_tensor(fn, "input", a_obj)) == NULL ||
        (b = ampc_la_float_tensor(fn, "other", b_obj)) == NULL) {
        return NULL;
    }
    if (a->ndim == 0 || b->ndim == 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): both arguments to matmul need to be at least "
                     "1D, but they are %dD and %dD",
                     fn, a->ndim, b->ndim);
        return NULL;
    }
    if (ampc_la_same_dtype(fn, "other", b, "input", a) < 0 ||
        ampc_la_check_devices(fn, 2, (AmpcTensorObject *[]){a, b}) < 0) {
        return NULL;
    }
    ah = (AmpcTensorObject *)Py_NewRef(a);
    bh = (AmpcTensorObject *)Py_NewRef(b);

    /* each operand as (batch..., rows, cols) */
    int na = a->ndim, nb = b->ndim;
    int64_t m = na >= 2 ? a->shape[na - 2] : 1, k = a->shape[na - 1];
    int64_t k2 = nb >= 2 ? b->shape[nb - 2] : b->shape[0];
    int64_t n = nb >= 2 ? b->shape[nb - 1] : 1;
    if (k != k2) {
        ampc_format_shape(sa, sizeof(sa), na, a->shape);
        ampc_format_shape(sb, sizeof(sb), nb, b->shape);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): input (shape %s) and other (shape %s) cannot be "
                     "multiplied: input has %lld columns but other has "
                     "%lld rows",
                     fn, sa, sb, (long long)k, (long long)k2);
        goto error;
    }
    int bda = na > 2 ? na - 2 : 0, bdb = nb > 2 ? nb - 2 : 0;
    int bd = bda > bdb ? bda : bdb;
    int64_t bshape[AMPC_MAX_DIMS], astr[AMPC_MAX_DIMS], bstr[AMPC_MAX_DIMS];
    for (int d = 0; d < bd; d++) {
        int ia = d - (bd - bda), ib = d - (bd - bdb);
        int64_t ea = ia >= 0 ? a->shape[ia] : 1;
        int64_t eb = ib >= 0 ? b->shape[ib] : 1;
        if (ea != eb && ea != 1 && eb != 1) {
            ampc_format_shape(sa, sizeof(sa), na, a->shape);
            ampc_format_shape(sb, sizeof(sb), nb, b->shape);
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): the batch dimensions of input (shape %s) "
                         "and other (shape %s) do not broadcast",
                         fn, sa, sb);
            goto error;
        }
        bshape[d] = ea > eb ? ea : eb;
    }

    /* operands strided both ways are copied (gathering is slow) */
    matrix ma = make_matrix(a->data, m, k, na >= 2 ? a->strides[na - 2] : 0,
                            a->strides[na - 1]);
    matrix mb = make_matrix(b->data, k, n, b->strides[nb >= 2 ? nb - 2 : 0],
                            nb >= 2 ? b->strides[nb - 1] : 0);
    if (!matrix_fast(&ma)) {
        Py_SETREF(ah, ampc_contiguous(a));
        if (ah == NULL) {
            goto error;
        }
        ma = make_matrix(ah->data, m, k, k, 1);
    }
    if (!matrix_fast(&mb)) {
        Py_SETREF(bh, ampc_contiguous(b));
        if (bh == NULL) {
            goto error;
        }
        mb = make_matrix(bh->data, k, n, n, 1);
    }
    for (int d = 0; d < bd; d++) {
        int ia = d - (bd - bda), ib = d - (bd - bdb);
        astr[d] = ia >= 0 && ah->shape[ia] != 1 ? ah->strides[ia] : 0;
        bstr[d] = ib >= 0 && bh->shape[ib] != 1 ? bh->strides[ib] : 0;
    }

    int64_t cshape[AMPC_MAX_DIMS];
    int cd = 0;
    for (int d = 0; d < bd; d++) {
        cshape[cd++] = bshape[d];
    }
    if (na >= 2) {
        cshape[cd++] = m;
    }
    if (nb >= 2) {
        cshape[cd++] = n;
    }
    c = ampc_tensor_empty(cd, cshape, a->dtype, a->device);
    if (c == NULL) {
        goto error;
    }
    int64_t total = ampc_numel(c);
    if (total == 0) {
        goto done;
    }

    /* merge batch dimensions that step evenly for all three operands; the
     * last merged one goes to the kernel, the others are looped here */
    int64_t cstr[AMPC_MAX_DIMS], mshape[AMPC_MAX_DIMS];
    int64_t ma_s[AMPC_MAX_DIMS], mb_s[AMPC_MAX_DIMS], mc_s[AMPC_MAX_DIMS];
    int64_t step = m * n;
    for (int d = bd - 1; d >= 0; d--) {
        cstr[d] = step;
        step *= bshape[d];
    }
    int md = 0;
    for (int d = 0; d < bd; d++) {
        if (bshape[d] == 1) {
            continue;
        }
        if (md > 0 && ma_s[md - 1] == astr[d] * bshape[d] &&
            mb_s[md - 1] == bstr[d] * bshape[d] &&
            mc_s[md - 1] == cstr[d] * bshape[d]) {
            mshape[md - 1] *= bshape[d];
            ma_s[md - 1] = astr[d];
            mb_s[md - 1] = bstr[d];
            mc_s[md - 1] = cstr[d];
            continue;
        }
        mshape[md] = bshape[d];
        ma_s[md] = astr[d];
        mb_s[md] = bstr[d];
        mc_s[md] = cstr[d];
        md++;
    }
    int64_t inner = md > 0 ? mshape[md - 1] : 1, outer = 1;
    for (int d = 0; d + 1 < md; d++) {
        outer *= mshape[d];
    }
    size_t es = ampc_dtype_size[a->dtype];
    for (int64_t o = 0; o < outer; o++) {
        int64_t rem = o, oa = 0, ob = 0, oc = 0;
        for (int d = md - 2; d >= 0; d--) {
            int64_t i = rem % mshape[d];
            rem /= mshape[d];
            oa += i * ma_s[d];
            ob += i * mb_s[d];
            oc += i * mc_s[d];
        }
        ampc_gemm_args g = {
            .m = m, .n = n, .k = k, .dt = a->dtype,
            .a = ma.data + oa * (int64_t)es, .rsa = ma.rs, .csa = ma.cs,
            .b = mb.data + ob * (int64_t)es, .rsb = mb.rs, .csb = mb.cs,
            .c = c->data + oc * (int64_t)es, .cdt = a->dtype, .ldc = n,
            .batch = inner,
            .sba = md > 0 ? ma_s[md - 1] : 0,
            .sbb = md > 0 ? mb_s[md - 1] : 0,
            .sbc = md > 0 ? mc_s[md - 1] : 0,
        };
        if (run_gemm(fn, a->device, &g) < 0) {
            goto error;
        }
    }

done:
    Py_DECREF(ah);
    Py_DECREF(bh);
    return (PyObject *)c;

error:
    Py_XDECREF(ah);
    Py_XDECREF(bh);
    Py_XDECREF(c);
    return NULL;
}

// ----------------------------------------------------------------------------
// peak FLOP/s (for benchmarks/bench_train.py)

static PyObject *
op_peak_flops(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"seconds", "kind", "nthreads", NULL};
    double seconds = 0.2;
    const char *kind = "fma";
    int nthreads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|dsi:_peak_flops", kwlist,
                                     &seconds, &kind, &nthreads)) {
        return NULL;
    }
    ampc_peak_kind k;
    if (strcmp(kind, "fma") == 0) {
        k = AMPC_PEAK_FMA;
    }
    else if (strcmp(kind, "bf16_dot") == 0) {
        k = AMPC_PEAK_BF16_DOT;
    }
    else {
        return PyErr_Format(PyExc_ValueError,
                            "_peak_flops(): kind must be 'fma' or "
                            "'bf16_dot', got '%s'",
                            kind);
    }
    if (!(seconds > 0.0 && seconds <= 60.0) || nthreads < 0) {
        return PyErr_Format(PyExc_ValueError,
                            "_peak_flops(): expected 0 < seconds <= 60 and "
                            "nthreads >= 0, got %g and %d",
                            seconds, nthreads);
    }
    double r;
    Py_BEGIN_ALLOW_THREADS
    r = ampc_cpu.peak_flops(k, seconds, nthreads);
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(r);
}

// ----------------------------------------------------------------------------
// ampc.backends flags and the cuDNN algorithm cache

/* _linalg_cuda_flags() -> dict of the five flags. */
static PyObject *
op_linalg_cuda_flags(PyObject *module, PyObject *noargs)
{
    return Py_BuildValue(
        "{sNsNsNsNsN}", "matmul_allow_tf32",
        PyBool_FromLong(matmul_allow_tf32), "cudnn_enabled",
        PyBool_FromLong(ampc_la_cudnn_opts.enabled), "cudnn_benchmark",
        PyBool_FromLong(ampc_la_cudnn_opts.benchmark), "cudnn_deterministic",
        PyBool_FromLong(ampc_la_cudnn_opts.deterministic), "cudnn_allow_tf32",
        PyBool_FromLong(ampc_la_cudnn_opts.allow_tf32));
}

/* _set_linalg_cuda_flags(**flags): sets the flags given (bools). */
static PyObject *
op_set_linalg_cuda_flags(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"matmul_allow_tf32", "cudnn_enabled",
                             "cudnn_benchmark", "cudnn_deterministic",
                             "cudnn_allow_tf32", NULL};
    int v[5] = {matmul_allow_tf32, ampc_la_cudnn_opts.enabled,
                ampc_la_cudnn_opts.benchmark, ampc_la_cudnn_opts.deterministic,
                ampc_la_cudnn_opts.allow_tf32};
    if (!PyArg_ParseTupleAndKeywords(args, kwds,
                                     "|$ppppp:_set_linalg_cuda_flags",
                                     kwlist, &v[0], &v[1], &v[2], &v[3],
                                     &v[4])) {
        return NULL;
    }
    matmul_allow_tf32 = v[0];
    ampc_la_cudnn_opts.enabled = v[1];
    ampc_la_cudnn_opts.benchmark = v[2];
    ampc_la_cudnn_opts.deterministic = v[3];
    ampc_la_cudnn_opts.allow_tf32 = v[4];
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_linalg_methods[] = {
    {"linear", (PyCFunction)(void (*)(void))op_linear,
     METH_VARARGS | METH_KEYWORDS,
     "linear(input, weight, bias=None, relu=False) -> input @ weight.T + "
     "bias, ReLU fused when relu"},
    {"linear_backward", op_linear_backward, METH_VARARGS,
     "linear_backward(grad_out, input, weight, needs) -> (grad_input, "
     "grad_weight, grad_bias), None where needs is False"},
    {"matmul", op_matmul, METH_VARARGS,
     "matmul(input, other) -> torch.matmul's product (1-D, 2-D, batched)"},
    {"_peak_flops", (PyCFunction)(void (*)(void))op_peak_flops,
     METH_VARARGS | METH_KEYWORDS,
     "_peak_flops(seconds=0.2, kind='fma', nthreads=0) -> measured FLOP/s "
     "of independent multiply-add chains at the CPU level in use"},
    {"_linalg_cuda_flags", op_linalg_cuda_flags, METH_NOARGS,
     "_linalg_cuda_flags() -> dict: matmul_allow_tf32, cudnn_enabled, "
     "cudnn_benchmark, cudnn_deterministic, cudnn_allow_tf32"},
    {"_set_linalg_cuda_flags",
     (PyCFunction)(void (*)(void))op_set_linalg_cuda_flags,
     METH_VARARGS | METH_KEYWORDS,
     "_set_linalg_cuda_flags(*, matmul_allow_tf32, cudnn_enabled, "
     "cudnn_benchmark, cudnn_deterministic, cudnn_allow_tf32): sets those "
     "given"},
    {NULL},
};
