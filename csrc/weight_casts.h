/* weight_casts.h - kept weight casts (ampc.amp.keep_weight_casts; beyond
 * PyTorch, user_needs #9): a persistent float16/bfloat16 copy of a float32
 * parameter.  Autocast uses it where it would cast the weight at every
 * forward (autocast_policy.c), and the fused optimizer steps rewrite it
 * from the updated float32 values in the pass that updates the parameter
 * (optim_batch.c), so a training step casts no weight at all.
 *
 * A kept cast is known to hold the parameter's values while the
 * parameter's storage, view and version are those it was made from and no
 * CUDA graph has replayed since; any other write to the parameter through
 * ampc (an in-place op, load_state_dict, a new .data) makes it stale, and
 * its next use casts it again first.
 */
#ifndef AMPC_WEIGHT_CASTS_H
#define AMPC_WEIGHT_CASTS_H

#include "ampc.h"

typedef struct {
    PyObject *ref;              /* weak reference to the parameter */
    AmpcTensorObject *cast;     /* the copy: contiguous, float16/bfloat16 */
    /* what the copy was last made from: the parameter's storage (by id,
     * so that no reference keeps it alive), data and strides, the
     * storage's version, and the CUDA graph replays until then (a replay
     * writes parameters without changing versions) */
    uint64_t source_id;
    char *source_data;
    int64_t source_strides[AMPC_MAX_DIMS];
    uint64_t version;
    uint64_t replays;
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
/* After a step wrote param and, from it, the copy `cast`: the copy's
 * version advances; param's entry, if it still holds `cast`, stays fresh
 * if it was before the step (a skipped step writes neither). */
void ampc_kept_cast_stepped(AmpcTensorObject *param, AmpcTensorObject *cast,
                            int was_fresh);
/* While a CUDA graph is captured, the copies that autocast reads or a
 * step writes are noted, so that the graph keeps them alive (its replays
 * use their memory): begin starts noting, end stops and returns the list
 * (a new reference; NULL with an exception). */
void ampc_kept_casts_capture_begin(void);
PyObject *ampc_kept_casts_capture_end(void);
void ampc_kept_cast_note_use(ampc_kept_cast *k);
/* A CUDA graph replay ran: every copy must be checked again. */
void ampc_kept_casts_replayed(void);

/* The empty registry, at module init. */
int ampc_weight_casts_init(void);

#endif /* AMPC_WEIGHT_CASTS_H */
