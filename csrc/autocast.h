/* autocast.h - what autocast.c (the context manager and its state) and
 * autocast_policy.c (the op policy applied at op entry, and the weight-cast
 * cache) share.
 */
#ifndef AMPC_AUTOCAST_H
#define AMPC_AUTOCAST_H

#include "ampc.h"

/* The immutable state snapshot held in the autocast context variable. */
typedef struct {
    PyObject_HEAD
    char enabled[AMPC_NUM_DEVICE_TYPES];
    ampc_dtype dtype[AMPC_NUM_DEVICE_TYPES];
    char cache_enabled;
    int nesting;
} AutocastState;

/* The current thread's (context's) state: a new reference, or NULL. */
AutocastState *ampc_autocast_state(void);
/* A new snapshot equal to src, to change before setting it. */
AutocastState *ampc_autocast_copy_state(const AutocastState *src);
/* Make st the current state; -1 on error. */
int ampc_autocast_set_state(AutocastState *st);
/* 'cpu' or 'cuda' -> ampc_device_type; -1 with PyTorch's errors. */
int ampc_autocast_device_type(PyObject *obj, const char *fn);

/* autocast_policy.c: the weight-cast cache, dropped when the outermost
 * context exits. */
int ampc_autocast_policy_init(void);
void ampc_autocast_clear_cache(void);

#endif /* AMPC_AUTOCAST_H */
