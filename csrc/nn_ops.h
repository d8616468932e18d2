/* nn_ops.h - what the NN op files share: nn_ops.c (the argument checks
 * and the CUDA prologue), nn_activation.c (relu_backward, softmax,
 * dropout), nn_pool.c (max_pool2d), nn_loss.c (nll_loss, cross_entropy)
 * and nn_mse.c (mse_loss).  Private to them; the checks that optim_ops.c
 * uses too (ampc_arg_*) are declared in ampc.h.
 */
#ifndef AMPC_NN_OPS_H
#define AMPC_NN_OPS_H

#include "ampc.h"
#include "ops.h"

/* Runs `call` (a kernel call) without the GIL when `work` is large. */
#define RUN_KERNEL(work, call)                                              \
    do {                                                                    \
        if ((work) >= RELEASE_GIL_MIN) {                                    \
            Py_BEGIN_ALLOW_THREADS                                          \
            call;                                                           \
            Py_END_ALLOW_THREADS                                            \
        }                                                                   \
        else {                                                              \
            call;                                                           \
        }                                                                   \
    } while (0)

/* Before a CUDA op: one device, made current, no error pending. */
int ampc_nn_cuda_prologue(const char *fn, int n,
                          AmpcTensorObject *const *ts);
/* t's values, contiguous, in dtype dt (t itself when already both). */
AmpcTensorObject *ampc_nn_contiguous_as(AmpcTensorObject *t, ampc_dtype dt);
/* Raises exc with fmt, whose "%s" is fn and "%R" the number v. */
void ampc_nn_raise_number(PyObject *exc, const char *fmt, const char *fn,
                          double v);

/* The losses' reduction argument. */
enum { AMPC_REDUCTION_NONE = 0, AMPC_REDUCTION_MEAN, AMPC_REDUCTION_SUM };
/* 'none', 'mean' or 'sum' -> AMPC_REDUCTION_*; -1 with ValueError. */
int ampc_nn_parse_reduction(const char *fn, PyObject *obj);
/* A 0-d CPU tensor of dt holding d, rounded once. */
AmpcTensorObject *ampc_nn_scalar_tensor(double d, ampc_dtype dt);

#endif /* AMPC_NN_OPS_H */
