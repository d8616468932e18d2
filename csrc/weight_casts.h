/* weight_casts.h - kept weight casts (ampc.amp.keep_weight_casts; beyond
 * PyTorch, user_needs #9): a persistent float16/bfloat16 copy of a float32
 * parameter.  Autocast uses it where it would cast the weight at every
 * forward (autocast_policy.c), and the fused optimizer steps rewrite it
 * from the updated float32 values in the pass that updates the parameter
 * (optim_batch.c), so a training step casts no weight at all.
 *
 * A kept cast is known to hold the parameter's values while the
 * parameter's storage and its version are those it was made from; any
 * other write to the parameter (an in-place op, load_state_dict, a new
 * .data) makes it stale, and its next use casts it again first.
 */
#ifndef AMPC_WEIGHT_CASTS_H
#define AMPC_WEIGHT_CASTS_H

#include "ampc.h"

typedef struct {
    PyObject *ref;              /* weak reference to the parameter */
    AmpcTensorObject *cast;     /* the copy: contiguous, float16/bfloat16 */
    /* the parameter's storage and data when the copy was last made; the
     * storage reference keeps its address from being taken by another */
    ampc_storage *source;
    char *source_data;
    uint64_t version;           /* source's version then */
} ampc_kept_cast;

/* param's kept cast (borrowed), or NULL; never raises. */
ampc_kept_cast *ampc_kept_cast_find(AmpcTensorObject *param);
/* 1 when k's copy holds param's current values. */
int ampc_kept_cast_fresh(ampc_kept_cast *k,
                         AmpcTensorObject *param);
/* 1 when a step over param may write k's copy with it: same device and
 * number of elements. */
int ampc_kept_cast_writable(ampc_kept_cast *k,
                            AmpcTensorObject *param);
/* Makes k's copy hold param's values: cast into it, or into a new tensor
 * when param changed device or shape.  -1 with an exception. */
int ampc_kept_cast_refresh(ampc_kept_cast *k, AmpcTensorObject *param);
/* After a step wrote param and, from it, k's copy: the copy's version
 * advances; it stays fresh if it was before the step (a skipped step
 * writes neither). */
void ampc_kept_cast_stepped(ampc_kept_cast *k, AmpcTensorObject *param,
                            int was_fresh);

/* The empty registry, at module init. */
int ampc_weight_casts_init(void);

#endif /* AMPC_WEIGHT_CASTS_H */
