/* ops_mod.c - the checks fmod and remainder add to _C.binary's (in
 * ops_elementwise.c): PyTorch refuses bool operands, and on the CPU an
 * integer divisor holding a zero ("ZeroDivisionError").  The CUDA kernels
 * do not look at the divisor (that would wait for the GPU), as PyTorch's do
 * not: mod_math.h defines what they give.
 */
#include "ampc.h"

#include "ops.h"

/* 1 when the divisor, a Python number or a CPU int64 or bool tensor, holds
 * a zero; 0 when not; -1 on error. */
static int
has_zero(PyObject *b)
{
    if (!ampc_tensor_check(b)) {
        return PyObject_Not(b);
    }
    AmpcTensorObject *c = ampc_contiguous(AMPC_TENSOR(b));
    if (c == NULL) {
        return -1;
    }
    int64_t n = ampc_numel(c);
    int zero = 0;
    if (c->dtype == AMPC_INT64) {
        const int64_t *v = (const int64_t *)c->data;
        for (int64_t i = 0; i < n && !zero; i++) {
            zero = v[i] == 0;
        }
    }
    else {
        const uint8_t *v = (const uint8_t *)c->data;
        for (int64_t i = 0; i < n && !zero; i++) {
            zero = v[i] == 0;
        }
    }
    Py_DECREF(c);
    return zero;
}

int
ampc_mod_check(const char *fn, PyObject *b, ampc_dtype result,
               ampc_device dev)
{
    if (result == AMPC_BOOL) {
        PyErr_Format(PyExc_NotImplementedError,
                     "\"%s\" not implemented for 'Bool'", fn);
        return -1;
    }
    if (result != AMPC_INT64 || dev.type != AMPC_DEV_CPU) {
        return 0;
    }
    int zero = has_zero(b);
    if (zero > 0) {
        PyErr_SetString(PyExc_RuntimeError, "ZeroDivisionError");
    }
    return zero != 0 ? -1 : 0;
}
