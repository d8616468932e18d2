/* nn_norm.h - what the normalisation op files share: the argument checks
 * and the backward driver of nn_norm.c (batch_norm, layer_norm), used by
 * nn_group_norm.c (group_norm) too.  Private to them.
 */
#ifndef AMPC_NN_NORM_H
#define AMPC_NN_NORM_H

#include "ampc.h"

typedef enum {
    AMPC_NORM_KIND_BATCH = 0,
    AMPC_NORM_KIND_LAYER,
    AMPC_NORM_KIND_GROUP
} ampc_norm_kind;

/* None -> NULL, a tensor -> itself (borrowed); -1 with TypeError. */
int ampc_norm_opt_tensor(const char *fn, const char *arg, PyObject *obj,
                         AmpcTensorObject **out);
/* The dtype of the n parameters ps (NULL entries absent, names[k] naming
 * ps[k]): one float dtype, the input's xdt or float32; xdt when none is
 * given.  -1 with RuntimeError. */
int ampc_norm_param_dtype(const char *fn, ampc_dtype xdt, int n,
                          AmpcTensorObject *const *ps,
                          const char *const *names, ampc_dtype *pdt);
/* Each present tensor of ps holds `count` elements (one per `what`). */
int ampc_norm_check_counts(const char *fn, int n,
                           AmpcTensorObject *const *ps,
                           const char *const *names, int64_t count,
                           const char *what);
/* A forward's saved statistics: float32, `count` elements. */
int ampc_norm_check_saved(const char *fn, const char *arg,
                          AmpcTensorObject *t, int64_t count,
                          const char *what);
/* Contiguous versions of the n tensors ts (NULL stays NULL; new
 * references); -1 with an exception, every entry of out then NULL. */
int ampc_norm_contiguous_all(int n, AmpcTensorObject *const *ts,
                             AmpcTensorObject **out);
void ampc_norm_release_all(int n, AmpcTensorObject **ts);
/* t's data, or NULL for an absent tensor. */
void *ampc_norm_data(AmpcTensorObject *t);
/* A kernel's return code (a CUDA error, or an ampc_nn_status) as an
 * exception: 0 when it succeeded, else -1. */
int ampc_norm_kernel_status(const char *fn, int cuda, int rc);

/* What the backward ops share once their arguments are checked: in =
 * {grad_output, input, weight or NULL, mean, invstd or rstd}; checks the
 * weight's dtype and the devices, makes new gradients (the parameter ones
 * of pnd dims pshape), runs the kind's backward slot on `shape` (its
 * ampc_*_norm_shape) unless `work` is 0, and returns the (grad_input,
 * grad_weight, grad_bias) tuple, None where needs[k] is 0.  names[0]
 * names the weight in messages. */
PyObject *ampc_norm_backward(const char *fn, ampc_norm_kind kind,
                             const void *shape, int work,
                             AmpcTensorObject *const *in, int needs[3],
                             int pnd, const int64_t *pshape,
                             const char *const *names);

#endif /* AMPC_NN_NORM_H */
