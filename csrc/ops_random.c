/* ops_random.c - the counter-based generator's state (seed, offset) and
 * the ops that fill tensors from it.  One state serves every device, and
 * the CPU and CUDA kernels compute the same function of (seed, offset + i)
 * (csrc/philox.h), so a draw does not depend on where it runs.
 */
#include "ampc.h"

#include <math.h>

#include "amp_math.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// random numbers

static const char *const random_names[] = {"uniform", "normal", "randint",
                                           "bernoulli"};

static PyObject *
op_random_(PyObject *module, PyObject *args)
{
    PyObject *t_obj, *name;
    double lo = 0.0, hi = 1.0;
    if (!PyArg_ParseTuple(args, "OO|dd:random_", &t_obj, &name, &lo, &hi) ||
        ampc_check_tensor_any("random_", "self", t_obj) < 0 ||
        ampc_cuda_enter("random_", AMPC_TENSOR(t_obj)->device) < 0) {
        return NULL;
    }
    int kind = ampc_lookup_name(random_names, 4, name, "random_");
    if (kind < 0) {
        return NULL;
    }
    AmpcTensorObject *t = AMPC_TENSOR(t_obj);
    if (!ampc_is_contiguous(t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "random_(): the tensor must be contiguous");
        return NULL;
    }
    if (kind == AMPC_RAND_UNIFORM && !(lo <= hi)) {
        PyErr_Format(PyExc_RuntimeError,
                     "uniform_(): expects to return a [from, to) range, but "
                     "found from=%g > to=%g",
                     lo, hi);
        return NULL;
    }
    if (kind == AMPC_RAND_NORMAL && !(hi >= 0.0)) {
        PyErr_Format(PyExc_RuntimeError,
                     "normal_(): expects std >= 0.0, but found std %g", hi);
        return NULL;
    }
    if (kind == AMPC_RAND_INT && !(lo < hi)) {
        PyErr_Format(PyExc_RuntimeError,
                     "random_(): expects 'from' to be less than 'to', but "
                     "got from=%g >= to=%g",
                     lo, hi);
        return NULL;
    }
    if (kind == AMPC_RAND_BERNOULLI && !(lo >= 0.0 && lo <= 1.0)) {
        PyErr_Format(PyExc_RuntimeError,
                     "bernoulli_(): expects p to be in [0, 1], but got p=%g",
                     lo);
        return NULL;
    }
    if (kind == AMPC_RAND_INT && t->dtype == AMPC_BOOL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "randint(): bool tensors are not supported");
        return NULL;
    }
    ampc_state *st = ampc_get_state();
    int64_t n = ampc_numel(t);
    uint64_t before = st->offset, offset;
    const uint64_t *base;
    ampc_rng_claim(n, t->device, &offset, &base);
    if (ampc_is_cuda(t)) {
        int code = ampc_cuda.random((ampc_random_kind)kind, t->dtype, n,
                                    t->data, st->seed, offset, base, lo, hi);
        if (code != 0) {
            st->offset = before;        /* nothing was drawn */
            return ampc_cuda_raise("random_", code);
        }
    }
    else {
        ampc_cpu.random((ampc_random_kind)kind, t->dtype, n, t->data,
                        st->seed, offset, lo, hi);
    }
    t->storage->version++;
    return Py_NewRef(t_obj);
}

void
ampc_rng_claim(int64_t n, ampc_device dev, uint64_t *offset,
               const uint64_t **base)
{
    ampc_state *st = ampc_get_state();
    *offset = st->offset;
    *base = NULL;
    /* Only a draw on the stream being captured goes through the graph's
     * base: one on another GPU runs now, and the base (device memory of
     * the capturing GPU) is not its to read.  The callers have made dev
     * current, which graph_capturing looks at; if it cannot tell, the draw
     * is taken as captured, as before. */
    int capturing = 1;
    if (dev.type == AMPC_DEV_CUDA && st->rng_capture_base != NULL &&
        ampc_cuda.graph_capturing(&capturing) != 0) {
        capturing = 1;
    }
    if (dev.type == AMPC_DEV_CUDA && st->rng_capture_base != NULL &&
        capturing) {
        *offset -= st->rng_capture_start;
        *base = st->rng_capture_base;
    }
    /* each element owns one counter; keep offsets 4-aligned for Philox */
    st->offset += ((uint64_t)n + 3) & ~(uint64_t)3;
}

static PyObject *
op_manual_seed(PyObject *module, PyObject *arg)
{
    PyObject *idx = PyNumber_Index(arg);
    if (idx == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "manual_seed(): seed must be an int, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    /* like PyTorch: any int in [-2^63, 2^64) */
    uint64_t seed = PyLong_AsUnsignedLongLongMask(idx);
    Py_DECREF(idx);
    if (seed == (uint64_t)-1 && PyErr_Occurred()) {
        return NULL;
    }
    ampc_state *st = ampc_get_state();
    st->seed = seed;
    st->offset = 0;
    Py_RETURN_NONE;
}

static PyObject *
op_initial_seed(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(ampc_get_state()->seed);
}

static PyObject *
op_get_rng_state(PyObject *module, PyObject *unused)
{
    ampc_state *st = ampc_get_state();
    return Py_BuildValue("(KK)", (unsigned long long)st->seed,
                         (unsigned long long)st->offset);
}

static PyObject *
op_set_rng_state(PyObject *module, PyObject *args)
{
    unsigned long long seed, offset;
    if (!PyArg_ParseTuple(args, "(KK):set_rng_state", &seed, &offset)) {
        return NULL;
    }
    ampc_state *st = ampc_get_state();
    st->seed = seed;
    st->offset = offset;
    Py_RETURN_NONE;
}

// ----------------------------------------------------------------------------

PyMethodDef ampc_random_methods[] = {
    {"random_", op_random_, METH_VARARGS,
     "random_(t, kind, a=0, b=1): uniform normal randint bernoulli"},
    {"manual_seed", op_manual_seed, METH_O, "manual_seed(seed)"},
    {"initial_seed", op_initial_seed, METH_NOARGS, "the current seed"},
    {"get_rng_state", op_get_rng_state, METH_NOARGS,
     "(seed, offset) of the generator"},
    {"set_rng_state", op_set_rng_state, METH_VARARGS,
     "set_rng_state((seed, offset))"},
    {NULL},
};
