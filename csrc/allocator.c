/* allocator.c - tensor memory: 64-byte aligned host blocks with a small
 * cache of large freed blocks, device blocks from the CUDA caching allocator
 * (cuda/allocator.cu, through the ampc_cuda table), pinned host blocks for
 * pin_memory(), live and peak bytes per device, the out-of-memory error, and
 * the reference-counted storage that a tensor and all of its views share.
 */
#include "ampc.h"

#include <stdlib.h>

#define AMPC_ALIGN 64
static int64_t live_bytes[AMPC_NUM_DEVICE_TYPES][AMPC_MAX_CUDA_INDEX];
static int64_t peak_bytes[AMPC_NUM_DEVICE_TYPES][AMPC_MAX_CUDA_INDEX];

/* ampc.cuda.OutOfMemoryError (a RuntimeError subclass), made at import. */
static PyObject *oom_error;

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
// counters
//
// NOTE: changed only with the GIL held, which serialises them and the CPU
// cache (the CUDA allocator has its own lock).

static void
count_alloc(ampc_device dev, size_t nbytes)
{
    int64_t *live = &live_bytes[dev.type][dev.index];
    *live += (int64_t)nbytes;
    if (*live > peak_bytes[dev.type][dev.index]) {
        peak_bytes[dev.type][dev.index] = *live;
    }
}

int64_t
ampc_memory_allocated(ampc_device dev)
{
    return live_bytes[dev.type][dev.index];
}

int64_t
ampc_max_memory_allocated(ampc_device dev)
{
    return peak_bytes[dev.type][dev.index];
}

void
ampc_reset_peak_memory(ampc_device dev)
{
    peak_bytes[dev.type][dev.index] = live_bytes[dev.type][dev.index];
}

// ----------------------------------------------------------------------------
// device memory

int
ampc_allocator_init(PyObject *module)
{
    oom_error = PyErr_NewExceptionWithDoc(
        "ampc.cuda.OutOfMemoryError",
        "Raised when a CUDA allocation fails even after ampc's cache was "
        "emptied (a RuntimeError, like torch.cuda.OutOfMemoryError).  The "
        "process stays usable: free tensors, or use smaller batches, and "
        "retry.",
        PyExc_RuntimeError, NULL);
    if (oom_error == NULL) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "OutOfMemoryError", oom_error);
}

PyObject *
ampc_out_of_memory_error(void)
{
    return oom_error;
}

/* Formats n bytes as "1.50 GiB" into buf. */
static const char *
human_bytes(char *buf, size_t size, double n)
{
    const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (n >= 1024.0 && u < 4) {
        n /= 1024.0;
        u++;
    }
    snprintf(buf, size, u == 0 ? "%.0f %s" : "%.2f %s", n, units[u]);
    return buf;
}

static int
set_cuda_oom(ampc_device dev, size_t nbytes)
{
    size_t free_b = 0, total_b = 0;
    int64_t reserved = 0;
    /* NOTE: the queries may fail on a broken device; the message then
     * shows zeros rather than hiding the out-of-memory error. */
    (void)ampc_cuda.mem_info(dev.index, &free_b, &total_b);
    (void)ampc_cuda.memory_reserved(dev.index, &reserved);
    char asked[32], fr[32], tot[32], al[32], res[32];
    PyErr_Format(oom_error,
                 "CUDA out of memory. Tried to allocate %s (%zu bytes) on "
                 "cuda:%d, which has %s free of %s total. ampc holds %s in "
                 "live tensors (memory_allocated) and %s in all "
                 "(memory_reserved, including its cache, which was emptied "
                 "before this error). Free tensors you no longer need (del "
                 "them, and their .grad), use a smaller batch, or use "
                 "mixed precision (autocast) to need less memory.",
                 human_bytes(asked, sizeof(asked), (double)nbytes), nbytes,
                 dev.index, human_bytes(fr, sizeof(fr), (double)free_b),
                 human_bytes(tot, sizeof(tot), (double)total_b),
                 human_bytes(al, sizeof(al),
                             (double)live_bytes[AMPC_DEV_CUDA][dev.index]),
                 human_bytes(res, sizeof(res), (double)reserved));
    return -1;
}

static void *
cuda_alloc(ampc_device dev, size_t nbytes)
{
    if (ampc_cuda.malloc == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ampc: this build has no CUDA support");
        return NULL;
    }
    if (ampc_cuda_enter("empty", dev) < 0) {
        return NULL;
    }
    void *p = NULL;
    int rc = ampc_cuda.malloc(nbytes, &p);
    if (rc == AMPC_CUDA_ERROR_OOM) {
        set_cuda_oom(dev, nbytes);
        return NULL;
    }
    if (rc != 0) {
        ampc_cuda_raise("empty", rc);
        return NULL;
    }
    return p;
}

/* A failure while freeing cannot be raised (it happens in deallocators):
 * it is reported as unraisable, keeping any exception already set. */
static void
report_free_error(const char *what, int rc)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    ampc_cuda_raise(what, rc);
    PyErr_WriteUnraisable(NULL);
    PyErr_Restore(type, value, tb);
}

// ----------------------------------------------------------------------------
// counted allocation

void *
ampc_alloc(ampc_device dev, size_t nbytes)
{
    void *p;
    if (dev.type == AMPC_DEV_CUDA) {
        p = cuda_alloc(dev, nbytes);
        if (p == NULL) {
            return NULL;
        }
        count_alloc(dev, nbytes);
        return p;
    }
    size_t size = block_size(nbytes);
    p = size >= CACHE_MIN_BYTES ? cache_take(size) : NULL;
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
    count_alloc(dev, nbytes);
    return p;
}

void
ampc_free(ampc_device dev, void *ptr, size_t nbytes)
{
    if (ptr == NULL) {
        return;
    }
    live_bytes[dev.type][dev.index] -= (int64_t)nbytes;
    if (dev.type == AMPC_DEV_CUDA) {
        /* stream-ordered: the block is reused only by later work on the
         * ampc stream, so queued kernels may still read it safely */
        int rc = ampc_cuda.free(ptr);
        if (rc != 0) {
            report_free_error("free", rc);
        }
        return;
    }
    size_t size = block_size(nbytes);
    if (size >= CACHE_MIN_BYTES) {
        cache_put(ptr, size);
    }
    else {
        free(ptr);
    }
}

// ----------------------------------------------------------------------------
// storage

/* The last storage id given (storages are made with the GIL held). */
static uint64_t last_storage_id;

static ampc_storage *
storage_wrap(ampc_device dev, size_t nbytes, void *data, char pinned)
{
    ampc_storage *s = PyMem_Malloc(sizeof(ampc_storage));
    if (s == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    s->refcnt = 1;
    s->data = data;
    s->nbytes = nbytes;
    s->device = dev;
    s->owner = NULL;
    s->version = 0;
    s->id = ++last_storage_id;
    s->pinned = pinned;
    return s;
}

ampc_storage *
ampc_storage_new(ampc_device dev, size_t nbytes)
{
    void *data = ampc_alloc(dev, nbytes);
    if (data == NULL) {
        return NULL;
    }
    ampc_storage *s = storage_wrap(dev, nbytes, data, 0);
    if (s == NULL) {
        ampc_free(dev, data, nbytes);
    }
    return s;
}

ampc_storage *
ampc_storage_new_pinned(size_t nbytes)
{
    ampc_device cpu = {AMPC_DEV_CPU, 0};
    if (ampc_cuda.host_alloc == NULL || ampc_cuda_count() <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "pin_memory(): pinned memory needs a CUDA GPU, but %s",
                     ampc_cuda_built()
                         ? "no CUDA GPU was found on this machine"
                         : "ampc was built without CUDA");
        return NULL;
    }
    void *data = NULL;
    int rc = ampc_cuda.host_alloc(nbytes, &data);
    if (rc != 0) {
        return ampc_cuda_raise("pin_memory", rc);
    }
    ampc_storage *s = storage_wrap(cpu, nbytes, data, 1);
    if (s == NULL) {
        (void)ampc_cuda.host_free(data);
        return NULL;
    }
    count_alloc(cpu, nbytes);
    return s;
}

ampc_storage *
ampc_storage_borrow(PyObject *owner, void *data, size_t nbytes)
{
    ampc_storage *s = storage_wrap((ampc_device){AMPC_DEV_CPU, 0}, nbytes,
                                   data, 0);
    if (s != NULL) {
        Py_INCREF(owner);
        s->owner = owner;
    }
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
    else if (s->pinned) {
        live_bytes[AMPC_DEV_CPU][0] -= (int64_t)s->nbytes;
        /* deferred: reused only after queued copies from it have run */
        int rc = ampc_cuda.host_free(s->data);
        if (rc != 0) {
            report_free_error("free_pinned", rc);
        }
    }
    else {
        ampc_free(s->device, s->data, s->nbytes);
    }
    PyMem_Free(s);
}
