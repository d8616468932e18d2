/* nn_ops.h - what the NN op files share: nn_ops.c (the argument checks
 * and the CUDA prologue), nn_activation.c (relu_backward, softmax,
 * dropout), nn_pool.c (max_pool2d), nn_avg_pool.c (avg_pool2d,
 * adaptive_avg_pool2d), nn_loss.c (nll_loss, cross_entropy)
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

/* nn_pool.c, for nn_avg_pool.c too: an int, or a tuple or list of one or
 * two ints -> out[0], out[1]; TypeError naming fn and arg otherwise. */
int ampc_nn_parse_pair(const char *fn, const char *arg, PyObject *obj,
                       int64_t out[2]);
/* torch's pooling_output_shape: floor or ceil of the window count, where a
 * ceil-mode window must start inside the input or its left padding. */
int64_t ampc_nn_pool_out_size(int64_t in, int64_t k, int64_t pad,
                              int64_t stride, int64_t dil, int ceil_mode);
/* A pooling's stride: None (or NULL) or () means the kernel size k. */
int ampc_nn_parse_stride(const char *fn, PyObject *obj, const int64_t k[2],
                         int64_t st[2]);
/* A pooling's input: 3-D (C, H, W) or 4-D (N, C, H, W), C, H, W >= 1. */
int ampc_nn_pool_input_check(const char *fn, int nd, const int64_t *shape);
/* torch's checks of a pooling's kernel_size, stride, padding and dilation
 * (NULL: none, avg_pool2d), with the values in the message. */
int ampc_nn_pool_args_check(const char *fn, const int64_t k[2],
                            const int64_t st[2], const int64_t pad[2],
                            const int64_t dil[2]);
/* input_shape: a tuple or list of ndim non-negative ints -> shape. */
int ampc_nn_parse_input_shape(const char *fn, PyObject *obj, int ndim,
                              int64_t *shape);

/* The losses' reduction argument. */
enum { AMPC_REDUCTION_NONE = 0, AMPC_REDUCTION_MEAN, AMPC_REDUCTION_SUM };
/* 'none', 'mean' or 'sum' -> AMPC_REDUCTION_*; -1 with ValueError. */
int ampc_nn_parse_reduction(const char *fn, PyObject *obj);
/* A 0-d CPU tensor of dt holding d, rounded once. */
AmpcTensorObject *ampc_nn_scalar_tensor(double d, ampc_dtype dt);

#endif /* AMPC_NN_OPS_H */
