/* linalg_ops.h - what linalg_ops.c (linear, matmul, the backend flags)
 * shares with conv_ops.c (conv2d): argument checks that name the op and
 * the argument, and the cuDNN options of ampc.backends.cudnn.
 */
#ifndef AMPC_LINALG_OPS_H
#define AMPC_LINALG_OPS_H

#include "ampc.h"

/* Below this many flops a kernel keeps the GIL: releasing it costs more. */
#define AMPC_LA_RELEASE_GIL_FLOPS 1.0e6

/* ampc.backends.cudnn.*, with PyTorch's defaults (set with the GIL held by
 * _set_linalg_cuda_flags, read by the conv2d ops). */
extern ampc_cudnn_opts ampc_la_cudnn_opts;
/* ampc_la_cudnn_opts with use_deterministic_algorithms folded in */
const ampc_cudnn_opts *ampc_la_conv_opts(void);

/* obj as a tensor (CPU or CUDA) of a float dtype; NULL with an exception
 * naming fn and arg otherwise.  Borrowed. */
AmpcTensorObject *ampc_la_float_tensor(const char *fn, const char *arg,
                                       PyObject *obj);
/* -1 with PyTorch's RuntimeError unless the n tensors (NULL entries
 * skipped) share ts[0]'s device; else 0, with that device made current
 * when it is a GPU. */
int ampc_la_check_devices(const char *fn, int n, AmpcTensorObject *const *ts);
/* -1 with RuntimeError unless t has the dtype of `ref` (argument ref_arg). */
int ampc_la_same_dtype(const char *fn, const char *arg, AmpcTensorObject *t,
                       const char *ref_arg, AmpcTensorObject *ref);
/* -1 with RuntimeError unless t is ndim-D ("layout" describes the dims). */
int ampc_la_check_ndim(const char *fn, const char *arg, AmpcTensorObject *t,
                       int ndim, const char *layout);
/* needs = (need_0, need_1, need_2) -> flags; -1 with TypeError. */
int ampc_la_parse_needs(const char *fn, PyObject *obj, const char *names,
                        int flags[3]);
/* An int or a pair (tuple or list) of ints -> v[0], v[1]; -1 with an
 * exception. */
int ampc_la_parse_pair(const char *fn, const char *arg, PyObject *obj,
                       int64_t v[2]);
/* NULL with MemoryError: a CPU kernel could not get its scratch buffers. */
PyObject *ampc_la_kernel_failed(const char *fn);

#endif /* AMPC_LINALG_OPS_H */
