/* ops.h - what the raw-op files (ops.c, ops_elementwise.c, ops_mod.c,
 * ops_reduce.c, ops_random.c) share: argument checks, copies and casts, overlap rules.
 */
#ifndef AMPC_OPS_H
#define AMPC_OPS_H

#include "ampc.h"

/* Below this many elements an op keeps the GIL: releasing it costs more. */
#define RELEASE_GIL_MIN 65536

#define OPS_BUF 1024      /* elements per stack buffer in chunked loops */

int ampc_same_device(AmpcTensorObject *a, AmpcTensorObject *b);
/* -1 with TypeError unless v is a Tensor (on any device). */
int ampc_check_tensor_any(const char *fn, const char *arg, PyObject *v);
/* -1 with PyTorch's RuntimeError ("Expected all tensors to be on the same
 * device, but found at least two devices, cuda:0 and cpu!") unless a and b
 * are on one device. */
int ampc_check_same_device(const AmpcTensorObject *a,
                           const AmpcTensorObject *b);
/* "cpu" or "cuda:N" into buf. */
void ampc_device_str(char *buf, size_t size, ampc_device dev);
/* A 0-d stand-in for a scalar operand, for ampc_iter_init only.
 * NOTE: never exposed to Python and never reference counted. */
void ampc_scalar_operand(AmpcTensorObject *t, ampc_dtype dt, char *buf);
/* ampc_iter_run, without the GIL when the op is large. */
void ampc_run_iter(ampc_iter *it, ampc_inner_fn fn, void *ctx,
                   int64_t numel);
/* 1 (with RuntimeError set) when t has several elements at one address. */
int ampc_has_internal_overlap(AmpcTensorObject *t);
/* in itself, or a copy when it shares memory with out but is not exactly
 * out, so writes cannot feed later reads.  New reference. */
AmpcTensorObject *ampc_unalias(AmpcTensorObject *in, AmpcTensorObject *out);
/* in, or a copy of it when it shares memory with out at all: an index
 * moves elements, so even in == out would feed out's writes into later
 * reads.  New reference. */
AmpcTensorObject *ampc_copy_if_shared(AmpcTensorObject *in,
                                      const AmpcTensorObject *out);
/* t itself when it has dtype dt, else a cast copy.  New reference. */
AmpcTensorObject *ampc_as_dtype(AmpcTensorObject *t, ampc_dtype dt);
/* Fills t (on a GPU) with the element at host_value, in t's dtype, as a
 * kernel argument: no wait, and safe during CUDA graph capture. */
int ampc_device_fill(AmpcTensorObject *t, const void *host_value,
                     const char *fn);
/* The output of an element-wise op: `out` checked (device, shape, dtype
 * the result casts to, no internal overlap) or, when None, a new tensor of
 * the broadcast shape.  New reference, or NULL with an exception. */
AmpcTensorObject *ampc_prepare_out(const char *fn, PyObject *out_obj, int nd,
                                   const int64_t *shape, ampc_dtype result,
                                   ampc_device dev);
/* OP(a) into out_obj (None: a new tensor), with _C.unary's dtype rules;
 * errors name fn.  New reference, or NULL with an exception. */
PyObject *ampc_unary_into(const char *fn, ampc_unary_op op,
                          AmpcTensorObject *a, PyObject *out_obj);
/* fmod's and remainder's own checks (ops_mod.c) of divisor b for result
 * dtype `result` on dev: -1 with PyTorch's exception (bool operands; an
 * integer zero divisor on the CPU), else 0. */
int ampc_mod_check(const char *fn, PyObject *b, ampc_dtype result,
                   ampc_device dev);
/* Fills t with the Python number value. */
int ampc_fill_value(AmpcTensorObject *t, PyObject *value, const char *fn);
/* The index of name in names, or -1 with ValueError naming fn. */
int ampc_lookup_name(const char *const *names, int n, PyObject *name,
                     const char *fn);

#endif /* AMPC_OPS_H */
