/* nn_embedding_bag.c - the Python-facing embedding_bag of ampc._C and its
 * weight gradient: the argument checks, then the kernel slots
 * (cpu/ref/embedding_bag.c, cuda/embedding_bag.cu).  ampc/nn/
 * _embedding_bag.py turns torch's arguments (2-D input, offsets without
 * the end, include_last_offset, max_norm) into these calls and adds
 * autograd.  On a GPU an index outside the weight is reported later,
 * through the deferred error record that nn_ops.c reads.
 */
#include "nn_ops.h"

/* indices (n) and offsets (bags + 1) int64 and 1-D; on the CPU offsets[0]
 * is 0 and every offset lies in [0, n] (the GPU kernels clamp them) */
static int
check_bags(const char *fn, AmpcTensorObject *ix, AmpcTensorObject *off)
{
    if (ix->dtype != AMPC_INT64 || off->dtype != AMPC_INT64 ||
        ix->ndim != 1 || off->ndim != 1 || off->shape[0] < 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): indices and offsets must be 1-D int64 tensors, "
                     "offsets with bags + 1 >= 1 entries, got %s %d-D and "
                     "%s %d-D",
                     fn, ampc_dtype_name(ix->dtype), ix->ndim,
                     ampc_dtype_name(off->dtype), off->ndim);
        return -1;
    }
    if (ampc_is_cuda(off)) {
        return 0;
    }
    const int64_t *o = (const int64_t *)off->data;
    int64_t n = ix->shape[0], step = off->strides[0];
    if (o[0] != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): offsets[0] has to be 0, i.e., the first sequence "
                     "in the mini-batch has to start from position 0. "
                     "However, got %lld",
                     fn, (long long)o[0]);
        return -1;
    }
    for (int64_t b = 1; b < off->shape[0]; b++) {
        int64_t v = o[b * step];
        if (v < 0 || v > n) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): offsets[%lld] = %lld lies outside [0, %lld] "
                         "(the input's length)",
                         fn, (long long)b, (long long)v, (long long)n);
            return -1;
        }
    }
    return 0;
}

static int
parse_mode(const char *fn, int mode, ampc_bag_mode *out)
{
    if (mode < AMPC_BAG_SUM || mode > AMPC_BAG_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): mode must be 0 (sum), 1 (mean) or 2 (max), got "
                     "%d",
                     fn, mode);
        return -1;
    }
    *out = (ampc_bag_mode)mode;
    return 0;
}

static PyObject *
op_embedding_bag(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"weight", "indices", "offsets", "mode",
                             "padding_idx", "per_sample_weights", NULL};
    static const char *fn = "embedding_bag";
    PyObject *w_obj, *i_obj, *o_obj, *p_obj = Py_None;
    int mode;
    long long padding_idx;
    AmpcTensorObject *w, *ix, *off, *psw = NULL;
    ampc_bag_shape s;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOiL|O:embedding_bag",
                                     kwlist, &w_obj, &i_obj, &o_obj, &mode,
                                     &padding_idx, &p_obj) ||
        (w = ampc_arg_tensor(fn, "weight", w_obj)) == NULL ||
        (ix = ampc_arg_tensor(fn, "indices", i_obj)) == NULL ||
        (off = ampc_arg_tensor(fn, "offsets", o_obj)) == NULL ||
        (p_obj != Py_None &&
         (psw = ampc_arg_tensor(fn, "per_sample_weights", p_obj)) == NULL) ||
        ampc_arg_float(fn, "weight", w) < 0 ||
        parse_mode(fn, mode, &s.mode) < 0 ||
        ampc_nn_cuda_prologue(fn, psw != NULL ? 4 : 3,
                              (AmpcTensorObject *[]){w, ix, off, psw}) < 0 ||
        check_bags(fn, ix, off) < 0) {
        return NULL;
    }
    if (w->ndim != 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): weight has to be a 2D Tensor, but got Tensor of "
                     "dimension %d",
                     fn, w->ndim);
        return NULL;
    }
    s.n = ix->shape[0];
    s.bags = off->shape[0] - 1;
    s.num = w->shape[0];
    s.d = w->shape[1];
    s.padding_idx = padding_idx;
    if (psw != NULL &&
        (ampc_arg_dtype(fn, "per_sample_weights", psw, w->dtype,
                        "weight") < 0 ||
         ampc_arg_shape(fn, "per_sample_weights", psw, 1, &s.n,
                        "indices") < 0)) {
        return NULL;
    }
    int64_t out_shape[2] = {s.bags, s.d};
    PyObject *result = NULL;
    AmpcTensorObject *wc = ampc_contiguous(w), *ic = NULL, *oc = NULL;
    AmpcTensorObject *pc = NULL, *out = NULL, *size = NULL, *mi = NULL;
    if (wc == NULL || (ic = ampc_contiguous(ix)) == NULL ||
        (oc = ampc_contiguous(off)) == NULL ||
        (psw != NULL && (pc = ampc_contiguous(psw)) == NULL) ||
        (out = ampc_tensor_empty(2, out_shape, w->dtype, w->device)) ==
            NULL ||
        (size = ampc_tensor_empty(1, &s.bags, AMPC_INT64, w->device)) ==
            NULL ||
        (s.mode == AMPC_BAG_MAX &&
         (mi = ampc_tensor_empty(2, out_shape, AMPC_INT64, w->device)) ==
             NULL)) {
        goto done;
    }
    const void *pdata = pc != NULL ? pc->data : NULL;
    int64_t *midata = mi != NULL ? (int64_t *)mi->data : NULL;
    int status = AMPC_NN_OK;
    if (s.bags > 0 && ampc_is_cuda(w)) {
        int rc = ampc_cuda.embedding_bag_fwd(
            &s, w->dtype, wc->data, (const int64_t *)ic->data,
            (const int64_t *)oc->data, pdata, out->data,
            (int64_t *)size->data, midata);
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto done;
        }
    }
    else if (s.bags > 0) {
        RUN_KERNEL(s.n * s.d + s.bags * s.d,
                   status = ampc_cpu.embedding_bag_fwd(
                       &s, w->dtype, wc->data, (const int64_t *)ic->data,
                       (const int64_t *)oc->data, pdata, out->data,
                       (int64_t *)size->data, midata));
    }
    if (status == AMPC_NN_NO_MEMORY) {
        PyErr_NoMemory();
    }
    else if (status != AMPC_NN_OK) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): an index of input is not in the valid range "
                     "[0, %lld) of the weight's rows",
                     fn, (long long)s.num);
    }
    else {
        result = PyTuple_Pack(3, out, size, mi != NULL ? (PyObject *)mi
                                                       : Py_None);
    }
done:
    Py_XDECREF(wc);
    Py_XDECREF(ic);
    Py_XDECREF(oc);
    Py_XDECREF(pc);
    Py_XDECREF(out);
    Py_XDECREF(size);
    Py_XDECREF(mi);
    return result;
}

static PyObject *
op_embedding_bag_backward(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"grad", "indices", "offsets", "bag_size",
                             "max_indices", "num_weights", "mode",
                             "padding_idx", "scale", NULL};
    static const char *fn = "embedding_bag_backward";
    PyObject *g_obj, *i_obj, *o_obj, *b_obj, *m_obj, *sc_obj = Py_None;
    long long num, padding_idx;
    int mode;
    AmpcTensorObject *g, *ix, *off, *bs, *mi = NULL, *sc = NULL;
    ampc_bag_shape s;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOLiL|O:embedding_bag_backward", kwlist, &g_obj,
            &i_obj, &o_obj, &b_obj, &m_obj, &num, &mode, &padding_idx,
            &sc_obj) ||
        (g = ampc_arg_tensor(fn, "grad", g_obj)) == NULL ||
        (ix = ampc_arg_tensor(fn, "indices", i_obj)) == NULL ||
        (off = ampc_arg_tensor(fn, "offsets", o_obj)) == NULL ||
        (bs = ampc_arg_tensor(fn, "bag_size", b_obj)) == NULL ||
        (m_obj != Py_None &&
         (mi = ampc_arg_tensor(fn, "max_indices", m_obj)) == NULL) ||
        (sc_obj != Py_None &&
         (sc = ampc_arg_tensor(fn, "scale", sc_obj)) == NULL) ||
        ampc_arg_float(fn, "grad", g) < 0 ||
        parse_mode(fn, mode, &s.mode) < 0 ||
        ampc_nn_cuda_prologue(fn, 4, (AmpcTensorObject *[]){g, ix, off,
                                                            bs}) < 0 ||
        check_bags(fn, ix, off) < 0) {
        return NULL;
    }
    if (num < 0 || g->ndim != 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): grad must be 2-D (bags, D) and num_weights >= 0",
                     fn);
        return NULL;
    }
    s.n = ix->shape[0];
    s.bags = off->shape[0] - 1;
    s.num = num;
    s.d = g->shape[1];
    s.padding_idx = padding_idx;
    int64_t gshape[2] = {s.bags, s.d};
    if (ampc_arg_shape(fn, "grad", g, 2, gshape, "output") < 0 ||
        ampc_arg_dtype(fn, "bag_size", bs, AMPC_INT64, "int64") < 0 ||
        ampc_arg_shape(fn, "bag_size", bs, 1, &s.bags, "bags") < 0 ||
        (s.mode == AMPC_BAG_MAX &&
         (mi == NULL ||
          ampc_arg_dtype(fn, "max_indices", mi, AMPC_INT64, "int64") < 0 ||
          ampc_arg_shape(fn, "max_indices", mi, 2, gshape, "output") < 0)) ||
        (sc != NULL &&
         (ampc_arg_dtype(fn, "scale", sc, AMPC_FLOAT32, "float32") < 0 ||
          ampc_arg_shape(fn, "scale", sc, 1, &s.n, "indices") < 0)) ||
        (mi != NULL && ampc_nn_cuda_prologue(fn, 2,
                                             (AmpcTensorObject *[]){g, mi})
                           < 0) ||
        (sc != NULL && ampc_nn_cuda_prologue(fn, 2,
                                             (AmpcTensorObject *[]){g, sc})
                           < 0)) {
        return NULL;
    }
    int64_t out_shape[2] = {s.num, s.d};
    PyObject *result = NULL;
    AmpcTensorObject *gc = ampc_contiguous(g), *ic = NULL, *oc = NULL;
    AmpcTensorObject *bc = NULL, *mc = NULL, *scc = NULL, *gw = NULL;
    if (gc == NULL || (ic = ampc_contiguous(ix)) == NULL ||
        (oc = ampc_contiguous(off)) == NULL ||
        (bc = ampc_contiguous(bs)) == NULL ||
        (mi != NULL && (mc = ampc_contiguous(mi)) == NULL) ||
        (sc != NULL && (scc = ampc_contiguous(sc)) == NULL) ||
        (gw = ampc_tensor_empty(2, out_shape, g->dtype, g->device)) ==
            NULL) {
        goto done;
    }
    const float *scale = scc != NULL ? (const float *)scc->data : NULL;
    const int64_t *midata = mc != NULL ? (const int64_t *)mc->data : NULL;
    int status = AMPC_NN_OK;
    if (ampc_is_cuda(g)) {
        int rc = ampc_cuda.embedding_bag_bwd(
            &s, g->dtype, gc->data, (const int64_t *)ic->data,
            (const int64_t *)oc->data, scale, (const int64_t *)bc->data,
            midata, gw->data);
        if (rc != 0) {
            ampc_cuda_raise(fn, rc);
            goto done;
        }
    }
    else {
        RUN_KERNEL(s.n * s.d + s.num * s.d,
                   status = ampc_cpu.embedding_bag_bwd(
                       &s, g->dtype, gc->data, (const int64_t *)ic->data,
                       (const int64_t *)oc->data, scale,
                       (const int64_t *)bc->data, midata, gw->data));
    }
    if (status != AMPC_NN_OK) {
        PyErr_NoMemory();
    }
    else {
        result = Py_NewRef(gw);
    }
done:
    Py_XDECREF(gc);
    Py_XDECREF(ic);
    Py_XDECREF(oc);
    Py_XDECREF(bc);
    Py_XDECREF(mc);
    Py_XDECREF(scc);
    Py_XDECREF(gw);
    return result;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef ampc_nn_embedding_bag_methods[] = {
    {"embedding_bag", KW(op_embedding_bag),
     "embedding_bag(weight, indices, offsets, mode, padding_idx, "
     "per_sample_weights=None) -> (output, bag_size, max_indices or None): "
     "offsets has bags + 1 entries (the last the end); mode 0 sum, 1 mean, "
     "2 max; padding_idx -1 for none"},
    {"embedding_bag_backward", KW(op_embedding_bag_backward),
     "embedding_bag_backward(grad, indices, offsets, bag_size, max_indices, "
     "num_weights, mode, padding_idx, scale=None) -> grad_weight; scale: "
     "float32 per index (per_sample_weights, frequency scaling)"},
    {NULL},
};
