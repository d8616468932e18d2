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

// ----------------------------------------------------------------------------
// the calls (optim_ops.c, optim_ops_adaptive.c)

/* The found_inf and grad_scale of a call, on its first parameter's device
 * (NULL for None). */
int ampc_optim_amp_args(const char *fn, PyObject *gs_obj, PyObject *fi_obj,
                        AmpcTensorObject *p0, const float **grad_scale,
                        const float **found_inf);

/* A step given as a number (Adam's, Adagrad's): the 1-based number of
 * this step, *step >= 1; -1 with TypeError or ValueError otherwise. */
int ampc_optim_step_number(const char *fn, PyObject *step_obj, double *step);

/* The list call's lists, as new PySequence_Fast objects in seq[k] (NULL
 * for an optional None), all of the first's length; *n = that length.
 * Free them with ampc_optim_free_lists, also after an error. */
int ampc_optim_list_args(const char *fn, PyObject *const *objs,
                         const char *const *names, const int *optional,
                         int k, PyObject **seq, Py_ssize_t *n);
void ampc_optim_free_lists(PyObject **seq, int k);

/* Item i of a list of ampc_optim_list_args (None for an absent list).
 * Borrowed. */
PyObject *ampc_optim_item(PyObject *seq, Py_ssize_t i);

/* An optimizer's kernels for ampc_optim_run_step: on a GPU the whole list
 * (the CUDA table's slot), on the CPU one parameter (l->n == 1). */
typedef int (*ampc_optim_cuda_step_fn)(const void *args, ampc_dtype dt,
                                       const ampc_optim_list *l);
typedef void (*ampc_optim_cpu_step_fn)(const void *args, ampc_dtype dt,
                                       const ampc_optim_list *l);

/* The step on n >= 1 checked parameters: on a GPU, cuda_step on the whole
 * list (parameters that share memory one launch each, in order); on the
 * CPU, cpu_step on each parameter, without the GIL when the step is large.
 * unscaled: a grad_scale was given (the grads are written back).  None, or
 * NULL with an exception. */
PyObject *ampc_optim_run_step(const char *fn, const void *args, int unscaled,
                              ampc_optim_entry *e, Py_ssize_t n,
                              ampc_optim_cuda_step_fn cuda_step,
                              ampc_optim_cpu_step_fn cpu_step);

#endif /* AMPC_OPTIM_BATCH_H */
