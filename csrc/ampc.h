/* ampc.h - the one internal header of the _C extension: module state, the
 * tensor and storage structs, the allocator, and the helpers that the type
 * files (tensor.c, ...) and the Python-facing ops (ops.c) share.
 */
#ifndef AMPC_AMPC_H
#define AMPC_AMPC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "kernels.h"
#include "kernels_cuda.h"


typedef enum {
    AMPC_DEV_CPU = 0,
    AMPC_DEV_CUDA = 1,
    AMPC_NUM_DEVICE_TYPES
} ampc_device_type;

typedef struct {
    int8_t type;            /* ampc_device_type */
    int8_t index;           /* 0 for the CPU */
} ampc_device;

/* CUDA device indices ampc handles (AMPC_CUDA_MAX_DEVICES in
 * cuda/common.cuh): per-device counters and streams are kept for these. */
#define AMPC_MAX_CUDA_INDEX 64

// ----------------------------------------------------------------------------
// allocator (allocator.c): counts live and peak bytes per device

void *ampc_alloc(ampc_device dev, size_t nbytes);
void ampc_free(ampc_device dev, void *ptr, size_t nbytes);
int64_t ampc_memory_allocated(ampc_device dev);
int64_t ampc_max_memory_allocated(ampc_device dev);
void ampc_reset_peak_memory(ampc_device dev);
/* Returns the cached free blocks to the system. */
void ampc_empty_cache(void);

// ----------------------------------------------------------------------------
// storage: the memory behind a tensor and all of its views.  Either owned
// (allocated by ampc_alloc) or borrowed from `owner` (a NumPy array).

typedef struct {
    Py_ssize_t refcnt;      /* changed only with the GIL held */
    char *data;
    size_t nbytes;
    ampc_device device;
    PyObject *owner;        /* NULL when owned */
    uint64_t version;       /* bumped by every in-place write (autograd) */
    uint64_t id;            /* unique in the process, never reused */
    char pinned;            /* page-locked host memory (pin_memory()) */
} ampc_storage;

ampc_storage *ampc_storage_new(ampc_device dev, size_t nbytes);
ampc_storage *ampc_storage_borrow(PyObject *owner, void *data, size_t nbytes);
void ampc_storage_decref(ampc_storage *s);
/* CPU storage in pinned host memory (for fast, queued copies to a GPU);
 * RuntimeError naming pin_memory() without a GPU. */
ampc_storage *ampc_storage_new_pinned(size_t nbytes);
/* Makes OutOfMemoryError and adds it to the module (allocator.c). */
int ampc_allocator_init(PyObject *module);
/* ampc.cuda.OutOfMemoryError (borrowed). */
PyObject *ampc_out_of_memory_error(void);

// ----------------------------------------------------------------------------
// the tensor

typedef struct {
    PyObject_HEAD
    ampc_storage *storage;
    char *data;                         /* first element */
    int ndim;
    ampc_dtype dtype;
    ampc_device device;
    int64_t shape[AMPC_MAX_DIMS];
    int64_t strides[AMPC_MAX_DIMS];     /* in elements */
    char requires_grad;
    char retains_grad;
    PyObject *grad;                     /* Tensor or NULL */
    PyObject *grad_fn;                  /* autograd node or NULL */
    PyObject *base;                     /* the tensor a view was made of */
    PyObject *weakreflist;
} AmpcTensorObject;

typedef struct {
    PyObject_HEAD
    ampc_dtype dtype;
} AmpcDtypeObject;

// ----------------------------------------------------------------------------
// module state (module.c)

typedef struct {
    PyTypeObject *tensor_base_type;     /* _C.TensorBase */
    PyTypeObject *dtype_type;           /* _C.dtype */
    PyTypeObject *tensor_class;         /* what ops create: ampc.Tensor */
    PyObject *size_class;               /* ampc.Size, a tuple subclass */
    PyObject *dtypes[AMPC_NUM_DTYPES];  /* the dtype singletons */
    uint64_t seed;                      /* the random generator */
    uint64_t offset;
    /* While a CUDA graph is captured, GPU draws take their offsets
     * relative to rng_capture_start, plus the graph's device base offset
     * (rng_capture_base), which each replay sets to the offset then. */
    const uint64_t *rng_capture_base;   /* NULL unless capturing */
    uint64_t rng_capture_start;
} ampc_state;

extern PyModuleDef ampc_module;
extern PyType_Spec ampc_tensor_spec;
extern PyType_Spec ampc_dtype_spec;

/* The state of the imported module (a borrowed pointer). */
ampc_state *ampc_get_state(void);

#define AMPC_TENSOR(op) ((AmpcTensorObject *)(op))
int ampc_tensor_check(PyObject *op);

// ----------------------------------------------------------------------------
// tensor helpers (tensor.c)

/* A new, uninitialised, contiguous tensor of state->tensor_class. */
AmpcTensorObject *ampc_tensor_empty(int ndim, const int64_t *shape,
                                    ampc_dtype dt, ampc_device dev);
/* A view of `base`'s storage with its own shape, strides and data pointer;
 * same Python type as `base`; its _base is base's root tensor. */
AmpcTensorObject *ampc_tensor_view(AmpcTensorObject *base, int ndim,
                                   const int64_t *shape,
                                   const int64_t *strides, char *data);
int64_t ampc_numel(const AmpcTensorObject *t);
int ampc_is_contiguous(const AmpcTensorObject *t);
/* A contiguous tensor with t's values: t itself (new reference) when already
 * contiguous, else a copy. */
AmpcTensorObject *ampc_contiguous(AmpcTensorObject *t);

/* dtype objects */
PyObject *ampc_dtype_object(ampc_dtype dt);     /* borrowed */
/* Parse a dtype argument; -1 with TypeError naming fn and arg otherwise. */
int ampc_dtype_from_object(PyObject *obj, ampc_dtype *dt, const char *fn,
                           const char *arg);
const char *ampc_dtype_name(ampc_dtype dt);

/* Copies src into dst (same shape after broadcasting src), casting. */
int ampc_copy_into(AmpcTensorObject *dst, AmpcTensorObject *src);
/* dim in [-ndim, ndim) -> [0, ndim); IndexError naming fn otherwise. */
int ampc_wrap_dim(const char *fn, long dim, int ndim);
/* Copies the nbytes at the start of t's data (t contiguous, any device)
 * into host memory at dst; waits for the GPU when t is on one.  -1 with an
 * exception. */
int ampc_read_to_host(const char *fn, const AmpcTensorObject *t, void *dst,
                      size_t nbytes);
/* One element at p as a Python float, int or bool. */
PyObject *ampc_scalar_to_python(ampc_dtype dt, const char *p);
/* Writes Python number v as one element of dt at p; -1 on a bad value. */
int ampc_scalar_from_python(PyObject *v, ampc_dtype dt, char *p,
                            const char *fn, const char *arg);

double ampc_scalar_as_double(ampc_dtype dt, const char *p);
int ampc_is_python_scalar(PyObject *v);
/* Type promotion (scalar.c): PyTorch's result_type over tensors and Python
 * numbers; -1 (no exception) when an operand is neither. */
ampc_dtype ampc_promote(ampc_dtype a, ampc_dtype b);
int ampc_result_type(int n, PyObject *const *operands, ampc_dtype *out);
int ampc_can_cast(ampc_dtype from, ampc_dtype to);

/* ops_random.c: claims the generator's counters for n draws on dev (the
 * offset moves on by n rounded up to 4).  *offset is where the draw
 * starts and *base NULL; or, for a GPU while a CUDA graph is captured,
 * *offset is relative to the graph's device base offset *base. */
void ampc_rng_claim(int64_t n, ampc_device dev, uint64_t *offset,
                    const uint64_t **base);

/* Parses 'cpu' | 'cuda' | 'cuda:N' | None; -1 with an exception. */
int ampc_parse_device(PyObject *obj, ampc_device *dev, const char *fn);
/* module.c: CUDA build and device count (0 without CUDA or a GPU). */
int ampc_cuda_built(void);
int ampc_cuda_count(void);
/* module.c: this thread's current GPU (what "cuda" without an index
 * means, as in PyTorch); 0 without CUDA. */
int ampc_cuda_current_index(void);

/* "[2, 3]" for messages (static buffer per call site is not thread safe,
 * so callers pass one). */
void ampc_format_shape(char *buf, size_t size, int ndim,
                       const int64_t *shape);

int ampc_dtype_init(PyObject *module, ampc_state *st);
int ampc_tensor_type_prepare(void);
int ampc_numpy_init(void);
int ampc_autocast_init(PyObject *module);     /* autocast.c */

// ----------------------------------------------------------------------------
// element-wise iteration (iter.c)

/* ampc_iter itself is in kernels.h: the CUDA element-wise launchers take
 * the whole iteration. */

/* Called for each run of n elements along the innermost dimension, with one
 * pointer and one element stride per operand. */
typedef void (*ampc_inner_fn)(void *ctx, int64_t n, char **ptrs,
                              const int64_t *strides);

/* Operand 0 is the output with `shape`; every other operand is broadcast to
 * it (its strides along size-1 or missing dims become 0).  The caller has
 * checked that shapes broadcast. */
void ampc_iter_init(ampc_iter *it, int nops, AmpcTensorObject **ops);
/* Runs fn over the whole iteration space, in parallel when it is large. */
void ampc_iter_run(const ampc_iter *it, ampc_inner_fn fn, void *ctx);

/* The broadcast shape of a and b into out; -1 with ValueError naming fn. */
int ampc_broadcast_shapes(const char *fn, int nda, const int64_t *sa,
                          int ndb, const int64_t *sb, int *nd_out,
                          int64_t *out);

// ----------------------------------------------------------------------------
// dispatch (dispatch.c)

extern ampc_kernel_table ampc_cpu;              /* the table in use */
extern const char *const ampc_slot_names[AMPC_NUM_SLOTS];
/* Detects the CPU and fills ampc_cpu for the best level, or the level named
 * by AMPC_CPU_LEVEL; -1 with a Python exception set on a bad value. */
int ampc_dispatch_init(void);
/* Refills ampc_cpu for `level`; -1 with ValueError if the CPU lacks it. */
int ampc_dispatch_set_level(ampc_cpu_level level);
ampc_cpu_level ampc_dispatch_level(void);
ampc_cpu_level ampc_dispatch_best_level(void);
const char *ampc_cpu_level_name(ampc_cpu_level level);
/* The level name of the variant that runs for `slot`, or NULL. */
const char *ampc_kernel_variant(const char *slot);

/* The CUDA table (all NULL in a CPU-only build, where no CUDA tensor can
 * exist) and its filling at import. */
extern ampc_cuda_table ampc_cuda;
void ampc_dispatch_cuda_init(void);
/* Sets RuntimeError "fn(): CUDA error <code>: <file:line: call: text>"
 * for a code a CUDA slot returned (ampc.cuda.OutOfMemoryError when a
 * slot's scratch memory could not be had); returns NULL, so `return
 * ampc_cuda_raise()` fits functions returning a pointer. */
void *ampc_cuda_raise(const char *fn, int code);
/* Before a CUDA op on device dev: makes it current (cheap when it already
 * is); 0 for a CPU device; -1 with an exception. */
int ampc_cuda_enter(const char *fn, ampc_device dev);
/* cuda_graph.c: -1 with RuntimeError "fn(): cannot read a CUDA tensor
 * during CUDA graph capture ..." while the current device's ampc stream is
 * being captured (a host read would wait for the GPU); 0 otherwise. */
int ampc_cuda_check_not_capturing(const char *fn);
/* The same for other waits (synchronize(), copies between GPUs): "fn():
 * cannot wait for the GPU during CUDA graph capture ...". */
int ampc_cuda_check_no_wait(const char *fn);
/* 1 while the current device's ampc stream is being captured, 0 when not
 * (or in a CPU-only build), -1 with an exception. */
int ampc_cuda_capturing(const char *fn);

static inline int
ampc_is_cuda(const AmpcTensorObject *t)
{
    return t->device.type == AMPC_DEV_CUDA;
}

// ----------------------------------------------------------------------------
// AMP (amp_ops.c, grad_norm_ops.c, grad_scaler*.c)

extern PyType_Spec ampc_grad_scaler_spec;
extern PyMethodDef ampc_amp_methods[];
extern PyMethodDef ampc_grad_norm_methods[];

/* One fused unscale-and-check over n float CPU tensors (checked by the
 * caller): x *= inv_scale in place, *found_inf = 1.0f on any inf/NaN input,
 * per-tensor telemetry into counts (n entries, zeroed) unless NULL.
 * Non-dense tensors go through a contiguous copy.  -1 with an exception. */
int ampc_amp_unscale_tensors(AmpcTensorObject *const *ts, Py_ssize_t n,
                             float inv_scale, float *found_inf,
                             ampc_amp_counts *counts);
/* The CUDA twin (amp_ops.c): n >= 1 float tensors on one CUDA device, not
 * checked; inv_scale, found_inf: device floats, counts: n device entries or
 * NULL (ampc_cuda_amp_unscale_fn, flags AMPC_AMP_*).  Queued, no host
 * wait.  -1 with an exception. */
int ampc_amp_unscale_tensors_cuda(AmpcTensorObject *const *ts, Py_ssize_t n,
                                  const float *inv_scale, int flags,
                                  float *found_inf, ampc_amp_counts *counts);
/* clip_grad_norm_'s total p-norm of n float tensors on one device
 * (checked by the caller; PyTorch's _get_total_norm), a new 0-d tensor of
 * their promoted dtype there, in one fused read (grad_norm_ops.c).  scale
 * (a 0-d float32 tensor on that device, or NULL): the tensors are
 * gradients scaled by it and the norm is the unscaled gradients'.  NULL
 * with an exception. */
AmpcTensorObject *ampc_amp_total_norm(const char *fn,
                                      AmpcTensorObject *const *ts,
                                      Py_ssize_t n, double p,
                                      AmpcTensorObject *scale);
/* The multiplier of a clip to max_norm given the total norm (0-d): a new
 * 0-d float32 tensor on norm's device holding amp_reduce.h's
 * ampc_clip_coef, or with scale (as above) ampc_clip_multiplier, which
 * unscales too.  No host wait on CUDA.  NULL with an exception. */
AmpcTensorObject *ampc_amp_clip_multiplier(const char *fn,
                                           AmpcTensorObject *norm,
                                           double max_norm,
                                           AmpcTensorObject *scale);
/* ts (n float tensors on one device, checked by the caller) *= the 0-d
 * float32 multiplier m in one fused pass (none on the CPU when m is 1);
 * on CUDA m stays on the device.  0 or -1 with an exception. */
int ampc_amp_multiply_by(const char *fn, AmpcTensorObject *const *ts,
                         Py_ssize_t n, AmpcTensorObject *m);
/* Host reads of CUDA memory that waited for the GPU (ampc_read_to_host
 * counts them; defined in amp_ops.c, read by _C._cuda_host_reads()), so
 * tests can count the host syncs of a training step. */
extern uint64_t ampc_cuda_host_reads;
/* Creates the GradScaler type and OptState enum and adds them to module. */
int ampc_grad_scaler_init(PyObject *module);
/* 1 when the GradScaler that scaled a loss last is enabled, has not run
 * update() since, and did not unscale one of `grads` (a sequence of
 * tensors); it then stops reporting (warn once).  0 otherwise, -1 on
 * error. */
int ampc_grad_scaler_clip_pending(PyObject *grads);
/* 1 when use_deterministic_algorithms(True) is in force (deterministic.c):
 * the ops with a nondeterministic CUDA path take their deterministic one. */
int ampc_deterministic_algorithms(void);

// ----------------------------------------------------------------------------
// NN ops and optimizer steps (nn_ops.c, optim_ops.c): argument checks that
// raise with the op, the argument and what was expected; -1 or NULL then

/* obj as a tensor on any device (borrowed), else TypeError. */
AmpcTensorObject *ampc_arg_tensor(const char *fn, const char *arg,
                                  PyObject *obj);
/* t has a float dtype, else RuntimeError. */
int ampc_arg_float(const char *fn, const char *arg, AmpcTensorObject *t);
/* t has dtype dt, that of `whose` ("input"), else RuntimeError. */
int ampc_arg_dtype(const char *fn, const char *arg, AmpcTensorObject *t,
                   ampc_dtype dt, const char *whose);
/* t has the given shape, that of `whose`, else RuntimeError. */
int ampc_arg_shape(const char *fn, const char *arg, AmpcTensorObject *t,
                   int ndim, const int64_t *shape, const char *whose);

#endif /* AMPC_AMPC_H */
