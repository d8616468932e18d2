/* optim_batch.h - what the optimizer ops of optim_ops.c share: the checks
 * of one parameter's tensors, in the words of the single-tensor call
 * ("param", "grad") or of the list call ("params[3]", "grads[3]"), and a
 * batch of checked parameters ready for the kernels (contiguous grads,
 * pointer arrays, whether two parameters share memory, the parameters'
 * kept casts), with the grads written back and the versions advanced after
 * the step.
 */
#ifndef AMPC_OPTIM_BATCH_H
#define AMPC_OPTIM_BATCH_H

#include "ampc.h"
#include "weight_casts.h"

/* The states an optimizer keeps per parameter (SGD: the momentum buffer;
 * Adam: exp_avg, exp_avg_sq, max_exp_avg_sq). */
#define AMPC_OPTIM_STATES 3

/* One parameter of a step, checked.  All borrowed; state[s] and step are
 * NULL where not kept. */
typedef struct {
    AmpcTensorObject *param;
    PyObject *grad_obj;                 /* the grad as given */
    AmpcTensorObject *state[AMPC_OPTIM_STATES];
    AmpcTensorObject *step;             /* Adam's float32 counter */
} ampc_optim_entry;

/* The n >= 1 checked parameters of one call, on one device, of one dtype,
 * ready for the kernels. */
typedef struct {
    Py_ssize_t n;
    ampc_optim_entry *e;
    AmpcTensorObject **grad;            /* contiguous grads (new refs) */
    void **ptr;                         /* param[n] grad[n] state[s][n]... */
    int64_t *numel;
    float **step;                       /* n counters, or NULL */
    int64_t total;                      /* elements of all parameters */
    int shared;                         /* two parameters share memory
                                         * (checked on a GPU only) */
    /* NULL unless a parameter keeps a cast (weight_casts.h); then per
     * parameter its copy (a reference held through the step, which may
     * run without the GIL; or NULL), the copy's data and dtype for the
     * kernels, and whether it was fresh before the step */
    AmpcTensorObject **kept;
    void **kept_ptr;
    int8_t *kept_dtype;
    char *kept_fresh;
} ampc_optim_batch;

/* "param" for the single-tensor call (i < 0), else "params[i]" in buf. */
const char *ampc_optim_arg_name(char *buf, size_t size, const char *single,
                                const char *list, Py_ssize_t i);

/* A tensor the step writes: float, contiguous and, unless param is NULL,
 * of param's device, dtype and shape.  Borrowed, or NULL with an error. */
AmpcTensorObject *ampc_optim_state_arg(const char *fn, const char *arg,
                                       PyObject *obj,
                                       AmpcTensorObject *param);

/* An optional one-element float32 tensor on param's device (grad_scale,
 * found_inf, a step counter): *ptr = its element's address, or NULL for
 * None. */
int ampc_optim_scalar_arg(const char *fn, const char *arg, PyObject *obj,
                          AmpcTensorObject *param, float **ptr);

/* Checks parameter i's param and grad (i < 0: the single-tensor call)
 * against the first parameter p0 (NULL for the first itself: same device
 * and dtype) and fills e->param and e->grad_obj. */
int ampc_optim_entry_check(const char *fn, Py_ssize_t i, PyObject *p_obj,
                           PyObject *g_obj, AmpcTensorObject *p0,
                           ampc_optim_entry *e);

/* A list or tuple of the list call (a tensor is refused, though it
 * iterates), as a new tuple (PySequence_Fast_GET_ITEM works on it). */
PyObject *ampc_optim_sequence(const char *fn, const char *arg,
                              PyObject *obj);

/* torch's constructor check: "Invalid learning rate: -1.0". */
int ampc_optim_check_range(const char *what, double v, double lo, double hi,
                           int hi_open);

/* Enters the parameters' device and fills b; -1 with an error set (b then
 * needs no free). */
int ampc_optim_batch_init(const char *fn, ampc_optim_batch *b,
                          ampc_optim_entry *e, Py_ssize_t n);

/* Parameters [i, i + count) of b as the kernels' list. */
ampc_optim_list ampc_optim_batch_list(const ampc_optim_batch *b,
                                      Py_ssize_t i, Py_ssize_t count);

/* After the step: with unscaled (a grad_scale was given), grads that were
 * copied to be contiguous get the unscaled values back; every tensor the
 * step wrote has its version advanced. */
int ampc_optim_batch_finish(ampc_optim_batch *b, int unscaled);

void ampc_optim_batch_free(ampc_optim_batch *b);

#endif /* AMPC_OPTIM_BATCH_H */
