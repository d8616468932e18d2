/* allocator.c - tensor memory: 64-byte aligned host blocks, counted per
 * device (live and peak bytes), and the reference-counted storage that a
 * tensor and all of its views share.
 */
#include "ampc.h"

#include <stdlib.h>

#define AMPC_ALIGN 64

static int64_t live_bytes[AMPC_NUM_DEVICE_TYPES];
static int64_t peak_bytes[AMPC_NUM_DEVICE_TYPES];

// ----------------------------------------------------------------------------
// counted allocation

void *
ampc_alloc(ampc_device dev, size_t nbytes)
{
    /* aligned_alloc wants a multiple of the alignment; 0 bytes still gets a
     * unique pointer so empty tensors need no special case. */
    size_t rounded = (nbytes + AMPC_ALIGN - 1) / AMPC_ALIGN * AMPC_ALIGN;
    if (rounded == 0) {
        rounded = AMPC_ALIGN;
    }
    if (dev.type != AMPC_DEV_CPU) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ampc: CUDA tensors are not supported by this "
                        "build yet");
        return NULL;
    }
    void *p = aligned_alloc(AMPC_ALIGN, rounded);
    if (p == NULL) {
        PyErr_Format(PyExc_MemoryError,
                     "ampc: out of memory allocating %zu bytes on the CPU",
                     nbytes);
        return NULL;
    }
    live_bytes[dev.type] += (int64_t)nbytes;
    if (live_bytes[dev.type] > peak_bytes[dev.type]) {
        peak_bytes[dev.type] = live_bytes[dev.type];
    }
    return p;
}

void
ampc_free(ampc_device dev, void *ptr, size_t nbytes)
{
    if (ptr == NULL) {
        return;
    }
    live_bytes[dev.type] -= (int64_t)nbytes;
    free(ptr);
}

int64_t
ampc_memory_allocated(ampc_device dev)
{
    return live_bytes[dev.type];
}

int64_t
ampc_max_memory_allocated(ampc_device dev)
{
    return peak_bytes[dev.type];
}

void
ampc_reset_peak_memory(ampc_device dev)
{
    peak_bytes[dev.type] = live_bytes[dev.type];
}

// ----------------------------------------------------------------------------
// storage

ampc_storage *
ampc_storage_new(ampc_device dev, size_t nbytes)
{
    ampc_storage *s = PyMem_Malloc(sizeof(ampc_storage));
    if (s == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    s->data = ampc_alloc(dev, nbytes);
    if (s->data == NULL) {
        PyMem_Free(s);
        return NULL;
    }
    s->refcnt = 1;
    s->nbytes = nbytes;
    s->device = dev;
    s->owner = NULL;
    s->version = 0;
    return s;
}

ampc_storage *
ampc_storage_borrow(PyObject *owner, void *data, size_t nbytes)
{
    ampc_storage *s = PyMem_Malloc(sizeof(ampc_storage));
    if (s == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    s->refcnt = 1;
    s->data = data;
    s->nbytes = nbytes;
    s->device = (ampc_device){AMPC_DEV_CPU, 0};
    Py_INCREF(owner);
    s->owner = owner;
    s->version = 0;
    return s;
}

void
ampc_storage_decref(ampc_storage *s)
{
    if (s == NULL || --s->refcnt > 0) {
        return;
    }
    if (s->owner != NULL) {
        Py_DECREF(s->owner);
    }
    else {
        ampc_free(s->device, s->data, s->nbytes);
    }
    PyMem_Free(s);
}
