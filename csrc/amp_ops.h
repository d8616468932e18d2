/* amp_ops.h - what amp_ops.c shares with grad_norm_ops.c: a batch of
 * tensors for one fused kernel call, and the argument checks in PyTorch's
 * words.  Private to the AMP ops (GradScaler goes through ampc.h).
 */
#ifndef AMPC_AMP_OPS_H
#define AMPC_AMP_OPS_H

#include "ampc.h"

/* Below this many elements a kernel call keeps the GIL. */
#define AMPC_AMP_RELEASE_GIL_MIN 65536

// ----------------------------------------------------------------------------
// a batch: tensors handed to one fused kernel call

/* data/numel/dtype describe the n tensors as the kernels see them: the
 * tensors themselves, or contiguous copies of non-dense ones (written back
 * by the unscale).  shared: two tensors share a storage, so a kernel must
 * take them one at a time. */
typedef struct {
    Py_ssize_t n;
    AmpcTensorObject *const *src;   /* the tensors given (borrowed) */
    AmpcTensorObject **copy;        /* contiguous copies of non-dense ones */
    void **data;
    int64_t *numel;
    ampc_dtype *dtype;
    int64_t total;
    int shared;                     /* two tensors share a storage */
} ampc_amp_batch;

/* Fills b for ts[0..n) (copies of non-dense tensors); -1 with an
 * exception.  ampc_amp_batch_free releases it. */
int ampc_amp_batch_init(ampc_amp_batch *b, AmpcTensorObject *const *ts,
                        Py_ssize_t n);
void ampc_amp_batch_free(ampc_amp_batch *b);

// ----------------------------------------------------------------------------
// argument checks, in PyTorch's words where PyTorch has them

/* -1 with PyTorch's TypeError unless v is a tensor. */
int ampc_amp_arg_tensor(const char *fn, const char *arg, int pos,
                        PyObject *v);
/* A sequence of tensors -> a new PySequence_Fast (its items borrowed). */
PyObject *ampc_amp_tensor_seq(const char *fn, PyObject *obj);
/* AMPC_DEV_CUDA when any of ts[0..n) or of seq's tensors is on a GPU. */
int ampc_amp_op_device_type(AmpcTensorObject *const *ts, int n,
                            PyObject *seq);
/* -1 with PyTorch's RuntimeError when t is not on dev. */
int ampc_amp_check_same_device(ampc_device dev, const AmpcTensorObject *t);
/* Every tensor of seq: on a device of type `type` (on CUDA, all on the
 * first one's device) and of a float dtype. */
int ampc_amp_check_grads(const char *kernel, const char *arg, PyObject *seq,
                         int type);

#endif /* AMPC_AMP_OPS_H */
