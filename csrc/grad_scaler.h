/* grad_scaler.h - private to grad_scaler.c and its companions
 * (grad_scaler_scale.c, grad_scaler_unscale.c, grad_scaler_clip.c,
 * grad_scaler_step.c, grad_scaler_update.c, grad_scaler_state.c,
 * grad_scaler_attrs.c): the GradScaler object struct, its warn-once flags
 * and stats() records, the module-level objects and the helpers that more
 * than one of them uses.  Included by those files only.
 */
#ifndef AMPC_GRAD_SCALER_H
#define AMPC_GRAD_SCALER_H

#include "ampc.h"

/* warn-once flags */
enum {
    WARN_BF16 = 1,
    WARN_UNSCALED_LOSS = 2,
    WARN_ZERO_GRADS = 4,
    WARN_SKIPS = 8,
    WARN_CLIP = 16,
};

/* What one unscale saw in one parameter's gradient (for stats()). */
typedef struct {
    uintptr_t opt;          /* id(optimizer) */
    uintptr_t param;        /* id(param) */
    int opt_rank;           /* order of the optimizer in this iteration */
    int group;
    Py_ssize_t index;
    int64_t numel;
    ampc_amp_counts c;      /* valid when dev_src < 0 */
    Py_ssize_t dev_src;     /* CUDA: c is row dev_row of dev_counts[dev_src],
                             * still on the device; -1: c is on the host */
    Py_ssize_t dev_row;
} scaler_record;

typedef struct AmpcGradScalerObject {
    PyObject_HEAD
    PyObject *dict;
    PyObject *weakreflist;
    /* PyTorch's attributes, as the Python objects it keeps.  NULL: the
     * attribute does not exist (a scaler disabled at construction never
     * gets them); Py_None for _scale and _growth_tracker: not created. */
    PyObject *device;
    PyObject *enabled;
    int is_enabled;
    PyObject *init_scale;
    PyObject *scale;                /* 0-d float32 tensor */
    PyObject *growth_factor;
    PyObject *backoff_factor;
    PyObject *growth_interval;
    PyObject *init_growth_tracker;
    PyObject *growth_tracker;       /* 0-d int64 tensor */
    PyObject *per_opt;              /* defaultdict: id(opt) -> state dict */
    /* beyond PyTorch */
    int64_t steps;
    int64_t skipped_steps;
    int last_skipped;
    int64_t consecutive_skips;      /* update()s in a row that backed off */
    int64_t warn_after_skips;
    double min_scale, max_scale;    /* update()'s bounds; 0 and inf: none */
    int64_t loss_streak;            /* ... of which the loss was not finite */
    int64_t stale_streak;           /* ... of which the infs persisted */
    int scaled;                     /* scale() ran since the last update() */
    int loss_nonfinite;             /* ... and saw a non-finite output */
    int stale_seen, stale_all;      /* persistence test of this iteration */
    int new_iteration;              /* the next unscale starts new records */
    int opt_count;                  /* optimizers recorded this iteration */
    int warned;
    scaler_record *records;
    Py_ssize_t n_records, cap_records;
    PyObject *prev_nonfinite;       /* id(param) -> (weakref(grad), count)
                                     * of the last iteration's inf/NaN */
    PyObject *cur_nonfinite;        /* ... of this iteration's */
    PyObject *unscaled;             /* set of data pointers unscaled */
    PyObject *watched;              /* a module, for parameter names */
    /* CUDA */
    PyObject *dev_counts;           /* list: the records' device counts */
    PyObject *dev_stats;            /* int64 AMPC_AMP_NUM_STATS on the
                                     * scale's device, or NULL */
    int64_t fused_steps;            /* CUDA fused steps this iteration */
    int last_fused;                 /* the last step() was a fused one */
    Py_ssize_t host_found_states;   /* optimizers whose found_inf step()
                                     * read this iteration ... */
    double host_found_sum;          /* ... and their sum */
} AmpcGradScalerObject;

/* module-level objects (grad_scaler.c) */
/* OptState's READY, UNSCALED and STEPPED members. */
extern PyObject *ampc_gs_stage_ready, *ampc_gs_stage_unscaled;
extern PyObject *ampc_gs_stage_stepped;
/* The scaler that called scale() last: the one whose loss the gradients
 * being clipped most likely come from.  Borrowed; cleared by dealloc. */
extern AmpcGradScalerObject *ampc_gs_last_scaler;
/* collections.abc.Iterable */
extern PyObject *ampc_gs_iterable_abc;

// ----------------------------------------------------------------------------
// small helpers (grad_scaler.c)

/* 1 when the field exists and is not None. */
int ampc_gs_is_init(PyObject *field);
/* The field, or AttributeError naming `name` when it does not exist. */
PyObject *ampc_gs_field_get(AmpcGradScalerObject *self, PyObject *field,
                            const char *name);
/* The 1-element float32 tensor t as a float (a host read on CUDA). */
int ampc_gs_read_scalar(const char *fn, AmpcTensorObject *t, float *dst);
/* The scale as a float (a host read on CUDA). */
int ampc_gs_read_scale(AmpcGradScalerObject *self, float *v);
/* v into the float32 tensor t, or iv into the int64 tensor t. */
int ampc_gs_write_scalar(AmpcTensorObject *t, double v, int64_t iv);
/* The state dict of `optimizer` (created READY when missing).  New ref. */
PyObject *ampc_gs_opt_state(AmpcGradScalerObject *self, PyObject *optimizer);
/* v is None or a 1-element tensor of dt, else TypeError naming `name`. */
int ampc_gs_check_state_tensor(PyObject *v, ampc_dtype dt, const char *name);
/* A per-optimizer state's stage (borrowed). */
PyObject *ampc_gs_state_stage(PyObject *st);
/* Sets a per-optimizer state's stage. */
int ampc_gs_set_stage(PyObject *st, PyObject *stage);
/* A warning at the Python line that called the scaler's method. */
int ampc_gs_warn(PyObject *category, const char *msg);
/* `obj` as an int64 the way torch.full(..., dtype=int32) takes a number. */
int ampc_gs_as_i64(PyObject *obj, int64_t *out);
/* AssertionError naming funcname unless _scale and _growth_tracker exist. */
int ampc_gs_check_scale_growth_tracker(AmpcGradScalerObject *self,
                                       const char *funcname);
/* Per-iteration bookkeeping back to "nothing recorded". */
int ampc_gs_reset_iteration(AmpcGradScalerObject *self);
/* Creates the scale and growth tracker on dev (the first scale() or
 * unscale_ on that device); 0 or -1 with an exception. */
int ampc_gs_lazy_init(AmpcGradScalerObject *self, ampc_device dev);
/* get_scale(): the scale as a Python float. */
PyObject *ampc_gs_get_scale(AmpcGradScalerObject *self);
/* _get_growth_tracker(): the growth tracker as a Python int. */
PyObject *ampc_gs_get_growth_tracker(AmpcGradScalerObject *self);

// ----------------------------------------------------------------------------
// scale() (grad_scaler_scale.c)

/* GradScaler.scale(outputs). */
PyObject *ampc_gs_scale(AmpcGradScalerObject *self, PyObject *outputs);
/* scale() of an enabled scaler (also _apply_scale, for nested outputs). */
PyObject *ampc_gs_apply_scale(AmpcGradScalerObject *self, PyObject *val);

// ----------------------------------------------------------------------------
// unscale_ (grad_scaler_unscale.c) and step (grad_scaler_step.c)

/* t on dev: t itself, or a copy there (new reference). */
AmpcTensorObject *ampc_gs_tensor_on(AmpcTensorObject *t, ampc_device dev);
/* GradScaler.unscale_(optimizer). */
PyObject *ampc_gs_unscale_(AmpcGradScalerObject *self, PyObject *optimizer);
/* The optimizer's gradients, in param_groups order, as unscale_ collects
 * and checks them (FP16 refused unless allow_fp16): a new list. */
PyObject *ampc_gs_grads_list(PyObject *optimizer, int allow_fp16);
/* unscale_()'s errors for a per-optimizer state already UNSCALED or
 * STEPPED: 0, or -1 with PyTorch's RuntimeError. */
int ampc_gs_check_unscale_stage(PyObject *st);
/* unscale_()'s work once its checks passed: the fused unscale-and-check
 * of the optimizer's gradients (multiplied by 1/scale, or by the 0-d
 * float32 tensor inv when not NULL), recorded for stats(), and its state
 * st made UNSCALED with found_inf_per_device.  0 or -1. */
int ampc_gs_unscale_with(AmpcGradScalerObject *self, PyObject *optimizer,
                         PyObject *st, AmpcTensorObject *inv);
/* GradScaler.clip_grad_norm_(optimizer, max_norm, norm_type=2.0)
 * (grad_scaler_clip.c). */
PyObject *ampc_gs_clip_grad_norm_(AmpcGradScalerObject *self,
                                  PyObject *args, PyObject *kwargs);
/* GradScaler._check_inf_per_device(optimizer). */
PyObject *ampc_gs_check_inf_per_device(AmpcGradScalerObject *self,
                                       PyObject *optimizer);
/* GradScaler._unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16). */
PyObject *ampc_gs_unscale_grads_(AmpcGradScalerObject *self, PyObject *args);
/* GradScaler.step(optimizer, *args, **kwargs). */
PyObject *ampc_gs_step(AmpcGradScalerObject *self, PyObject *args,
                       PyObject *kwargs);

// ----------------------------------------------------------------------------
// update and telemetry (grad_scaler_update.c)

/* The device skip statistics (AMPC_AMP_STAT_*): a host wait. */
int ampc_gs_read_dev_stats(AmpcGradScalerObject *self, int64_t *out);
/* GradScaler.update(new_scale=None). */
PyObject *ampc_gs_update(AmpcGradScalerObject *self, PyObject *args,
                         PyObject *kwds);
/* GradScaler.stats(model=None). */
PyObject *ampc_gs_stats(AmpcGradScalerObject *self, PyObject *args,
                        PyObject *kwds);
/* GradScaler.watch(model). */
PyObject *ampc_gs_watch(AmpcGradScalerObject *self, PyObject *model);

// ----------------------------------------------------------------------------
// serialisation (grad_scaler_state.c)

/* GradScaler.state_dict(). */
PyObject *ampc_gs_state_dict(AmpcGradScalerObject *self, PyObject *unused);
/* GradScaler.load_state_dict(state_dict). */
PyObject *ampc_gs_load_state_dict(AmpcGradScalerObject *self, PyObject *sd);
/* GradScaler.__getstate__(). */
PyObject *ampc_gs_getstate(AmpcGradScalerObject *self, PyObject *unused);
/* GradScaler.__setstate__(state). */
PyObject *ampc_gs_setstate(AmpcGradScalerObject *self, PyObject *state);

/* grad_scaler_attrs.c: the type's attributes (PyTorch's private fields),
 * and the methods (METH_NOARGS / METH_O; arg unused by the getters) that
 * read and write the settings and back PyTorch's private helpers. */
extern PyGetSetDef ampc_gs_getset[];
PyObject *ampc_gs_m_get_scale_async(AmpcGradScalerObject *self,
                                    PyObject *arg);
PyObject *ampc_gs_m_get_scale(AmpcGradScalerObject *self,
                              PyObject *arg);
PyObject *ampc_gs_m_get_growth_tracker(AmpcGradScalerObject *self,
                                       PyObject *arg);
PyObject *ampc_gs_m_get_growth_factor(AmpcGradScalerObject *self,
                                      PyObject *arg);
PyObject *ampc_gs_m_set_growth_factor(AmpcGradScalerObject *self,
                                      PyObject *arg);
PyObject *ampc_gs_m_get_backoff_factor(AmpcGradScalerObject *self,
                                       PyObject *arg);
PyObject *ampc_gs_m_set_backoff_factor(AmpcGradScalerObject *self,
                                       PyObject *arg);
PyObject *ampc_gs_m_get_growth_interval(AmpcGradScalerObject *self,
                                        PyObject *arg);
PyObject *ampc_gs_m_set_growth_interval(AmpcGradScalerObject *self,
                                        PyObject *arg);
PyObject *ampc_gs_m_is_enabled(AmpcGradScalerObject *self,
                               PyObject *arg);
PyObject *ampc_gs_m_found_inf_per_device(AmpcGradScalerObject *self,
                                         PyObject *arg);
PyObject *ampc_gs_m_check_scale_growth_tracker(AmpcGradScalerObject *self,
                                               PyObject *arg);
PyObject *ampc_gs_m_lazy_init(AmpcGradScalerObject *self,
                              PyObject *arg);

/* Sets min_scale and max_scale from Python values (None: no bound; else
 * a number > 0, min <= max); -1 with ValueError naming fn. */
int ampc_gs_set_bounds(AmpcGradScalerObject *self, PyObject *lo,
                       PyObject *hi, const char *fn);

#endif /* AMPC_GRAD_SCALER_H */
