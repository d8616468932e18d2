/* allocator.c - tensor memory: 64-byte aligned host blocks, counted per
 * device (live and peak bytes), a small cache of large freed blocks, and the
 * reference-counted storage that a tensor and all of its views share.
 */
#include "ampc.h"

#include <stdlib.h>

#define AMPC_ALIGN 64

static int64_t live_bytes[AMPC_NUM_DEVICE_TYPES];
static int64_t peak_bytes[AMPC_NUM_DEVICE_TYPES];

// ----------------------------------------------------------------------------
// the block cache
//
// A fresh multi-megabyte block comes from mmap and costs a page fault per
// 4 KiB on first touch, which halves the speed of an element-wise op that
// writes a new output.  Training loops free and allocate the same sizes
// every step, so large freed blocks are kept (up to CACHE_MAX_BYTES) and
// handed out again for the same rounded size.  Cached bytes are not live:
// memory_allocated() does not count them.

#define CACHE_MIN_BYTES ((size_t)1 << 20)
#define CACHE_MAX_BYTES ((size_t)1 << 30)
#define CACHE_SLOTS 64
#define PAGE 4096

typedef struct {
    void *ptr;
    size_t size;
} cached_block;

static cached_block cache[CACHE_SLOTS];     /* oldest first */
static int cache_count;
static size_t cache_bytes;

static void
cache_evict_oldest(void)
{
    free(cache[0].ptr);
    cache_bytes -= cache[0].size;
    memmove(cache, cache + 1, sizeof(cached_block) * (size_t)--cache_count);
}

static void *
cache_take(size_t size)
{
    for (int i = cache_count - 1; i >= 0; i--) {
        if (cache[i].size == size) {
            void *p = cache[i].ptr;
            cache_bytes -= size;
            memmove(cache + i, cache + i + 1,
                    sizeof(cached_block) * (size_t)(cache_count - i - 1));
            cache_count--;
            return p;
        }
    }
    return NULL;
}

static void
cache_put(void *p, size_t size)
{
    if (size > CACHE_MAX_BYTES) {
        free(p);
        return;
    }
    while (cache_count > 0 &&
           (cache_count == CACHE_SLOTS ||
            cache_bytes + size > CACHE_MAX_BYTES)) {
        cache_evict_oldest();
    }
    cache[cache_count++] = (cached_block){p, size};
    cache_bytes += size;
}

void
ampc_empty_cache(void)
{
    while (cache_count > 0) {
        cache_evict_oldest();
    }
}

/* The size actually allocated for a request of nbytes. */
static size_t
block_size(size_t nbytes)
{
    size_t align = nbytes >= CACHE_MIN_BYTES ? PAGE : AMPC_ALIGN;
    size_t rounded = (nbytes + align - 1) / align * align;
    return rounded == 0 ? AMPC_ALIGN : rounded;
}

// ----------------------------------------------------------------------------
// counted allocation
//
// NOTE: called only with the GIL held, which serialises the counters and
// the cache.

void *
ampc_alloc(ampc_device dev, size_t nbytes)
{
    if (dev.type != AMPC_DEV_CPU) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ampc: CUDA tensors are not supported by this "
                        "build yet");
        return NULL;
    }
    size_t size = block_size(nbytes);
    void *p = size >= CACHE_MIN_BYTES ? cache_take(size) : NULL;
    if (p == NULL) {
        p = aligned_alloc(AMPC_ALIGN, size);
    }
    if (p == NULL && cache_count > 0) {     /* retry without the cache */
        ampc_empty_cache();
        p = aligned_alloc(AMPC_ALIGN, size);
    }
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
    size_t size = block_size(nbytes);
    if (size >= CACHE_MIN_BYTES) {
        cache_put(ptr, size);
    }
    else {
        free(ptr);
    }
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
