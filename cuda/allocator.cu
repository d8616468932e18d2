/* allocator.cu - the caching device allocator (slots malloc, free,
 * empty_cache, memory_reserved), scratch memory, and the private pools that
 * CUDA-graph capture draws from.
 *
 * Design.  cudaMalloc and cudaFree are slow (cudaFree synchronises the whole
 * device), and a training step frees and allocates the same sizes every
 * iteration, so memory taken from the driver is kept and handed out again:
 * - Every request is rounded up to a multiple of 512 bytes (so every block
 *   is 512-byte aligned, above the 256 the slot promises).
 * - Requests up to 1 MiB are "small": they are carved from 2 MiB segments
 *   that hold small blocks only.  Larger requests are "large": carved from
 *   20 MiB segments when under 10 MiB, else from a segment of their own size
 *   rounded up to 2 MiB.  Keeping the two apart stops a stream of small,
 *   long-lived tensors from pinning huge segments.
 * - A free list per (device, pool, small|large) is a set ordered by size
 *   then address: a request takes the best fit (the smallest block that is
 *   large enough) and splits off the rest when the rest is itself a useful
 *   block (>= 512 B small, > 1 MiB large).  A freed block merges with its
 *   free neighbours in the same segment, so fragmentation heals.
 * - Every block is used by work on the one ampc stream of its device
 *   (ampc_cuda_stream()).  Stream order makes reuse right after free safe:
 *   the next user's kernels run after the previous user's on that stream.
 * - reserved = bytes of all segments held from the driver; empty_cache
 *   returns every segment that is entirely free.  On cudaMalloc failure the
 *   cache is emptied and the call retried once.
 * Private pools (for CUDA graphs) own their own segments; see pool_begin.
 * AMPC_CUDA_NO_CACHING=1 turns the cache off for debugging (see
 * no_caching below).
 * A std::mutex protects everything here: C calls with the GIL held, but the
 * DataLoader's pinning thread and graph code may call from other threads.
 */
#include <stdlib.h>
#include <string.h>

#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "common.cuh"

namespace {

constexpr size_t kRound = 512;
constexpr size_t kSmallMax = (size_t)1 << 20;           /* 1 MiB */
constexpr size_t kSmallSegment = (size_t)2 << 20;       /* 2 MiB */
constexpr size_t kMidMax = (size_t)10 << 20;            /* 10 MiB */
constexpr size_t kMidSegment = (size_t)20 << 20;        /* 20 MiB */
constexpr size_t kLargeRound = (size_t)2 << 20;

struct Pool;

/* One block: a piece of a segment, free or in use.  prev/next link the
 * blocks of one segment in address order (NULL at the ends). */
struct Block {
    int device;
    bool small;
    bool allocated;
    size_t size;
    char *ptr;
    Block *prev;
    Block *next;
    Pool *pool;             /* the pool whose free lists it returns to */
};

struct BlockLess {
    bool
    operator()(const Block *a, const Block *b) const
    {
        if (a->size != b->size) {
            return a->size < b->size;
        }
        return a->ptr < b->ptr;
    }
};

typedef std::set<Block *, BlockLess> FreeList;

/* A pool: the general cache of a device (pool NULL in a block means
 * general, see general_pool()) or a private graph pool. */
struct Pool {
    FreeList small_free[AMPC_CUDA_MAX_DEVICES];
    FreeList large_free[AMPC_CUDA_MAX_DEVICES];
    /* general-pool blocks freed while this pool was capturing: kept out of
     * circulation until pool_release, since the graph may use them. */
    std::vector<Block *> held;
};

std::mutex mu;
Pool general;
int64_t reserved[AMPC_CUDA_MAX_DEVICES];
int64_t peak_reserved[AMPC_CUDA_MAX_DEVICES];
/* in-use blocks by address */
std::unordered_map<void *, Block *> live;
/* the private pool this thread allocates from while capturing, or NULL */
thread_local Pool *capture_pool = nullptr;
/* captures under way in the process (any thread): while one is, nothing
 * may cudaFree, which would synchronise the device and break it */
int captures_active = 0;
/* AMPC_CUDA_NO_CACHING mode: the allocations in use, by address, with
 * their device and size */
std::unordered_map<void *, std::pair<int, size_t>> exact_live;
/* every private pool not yet released: a pool's held list may hold another
 * pool's blocks, which must not point at that pool once it is deleted */
std::set<Pool *> private_pools;

/* AMPC_CUDA_NO_CACHING=1 (read once), as PyTorch's
 * PYTORCH_NO_CUDA_MEMORY_CACHING: outside graph capture, every allocation
 * is its own cudaMalloc of exactly the bytes asked and every free a
 * cudaFree (which waits for the device, so queued work that still reads
 * the block is done), so compute-sanitizer's memcheck sees each tensor's
 * true bounds.  Slow: a debugging aid. */
bool
no_caching(void)
{
    static const bool on = [] {
        const char *v = getenv("AMPC_CUDA_NO_CACHING");
        return v != nullptr && v[0] != '\0' && strcmp(v, "0") != 0;
    }();
    return on;
}

/* One exact allocation (no_caching).  Called with mu held. */
int
exact_alloc(int device, size_t nbytes, void **ptr)
{
    size_t n = nbytes > 0 ? nbytes : 1;
    cudaError_t err = cudaMalloc(ptr, n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        *ptr = nullptr;
        ampc_cuda_record_error(__FILE__, __LINE__, "cudaMalloc(ptr, n)",
                               (int)err);
        return (int)err;
    }
    exact_live[*ptr] = {device, n};
    reserved[device] += (int64_t)n;
    if (reserved[device] > peak_reserved[device]) {
        peak_reserved[device] = reserved[device];
    }
    return 0;
}

/* Frees an exact allocation; during any capture it is kept instead (the
 * graph may use it at every replay, and cudaFree would break the capture).
 * Called with mu held. */
int
exact_free(std::unordered_map<void *, std::pair<int, size_t>>::iterator it)
{
    if (captures_active > 0) {
        return 0;
    }
    AMPC_CUDA_CHECK(cudaFree(it->first));
    reserved[it->second.first] -= (int64_t)it->second.second;
    exact_live.erase(it);
    return 0;
}

size_t
round_size(size_t n)
{
    if (n < kRound) {
        return kRound;
    }
    return (n + kRound - 1) / kRound * kRound;
}

size_t
segment_size(size_t size)
{
    if (size <= kSmallMax) {
        return kSmallSegment;
    }
    if (size < kMidMax) {
        return kMidSegment;
    }
    return (size + kLargeRound - 1) / kLargeRound * kLargeRound;
}

FreeList &
free_list(Pool *p, int device, bool small)
{
    return small ? p->small_free[device] : p->large_free[device];
}

/* Returns the free segments of `pool` on `device` (every device when
 * device < 0) to the driver.  Called with mu held. */
int
release_free_segments(Pool *pool, int device)
{
    int current = ampc_cuda_current_device();
    for (int d = 0; d < AMPC_CUDA_MAX_DEVICES; d++) {
        if ((device >= 0 && d != device) ||
            (pool->small_free[d].empty() && pool->large_free[d].empty())) {
            continue;
        }
        /* cudaFree on the segment's own device, as cudaMalloc was */
        int rc = ampc_set_device_cuda(d);
        if (rc != 0) {
            (void)ampc_set_device_cuda(current);    /* an earlier d's */
            return rc;
        }
        for (int s = 0; s < 2; s++) {
            FreeList &fl = free_list(pool, d, s == 0);
            for (auto it = fl.begin(); it != fl.end();) {
                Block *b = *it;
                if (b->prev != nullptr || b->next != nullptr) {
                    ++it;               /* part of a segment in use */
                    continue;
                }
                it = fl.erase(it);
                /* NOTE: cudaFree waits for the whole device, so no queued
                 * work can still use the block. */
                cudaError_t err = cudaFree(b->ptr);
                reserved[d] -= (int64_t)b->size;
                delete b;
                if (err != cudaSuccess) {
                    (void)cudaGetLastError();
                    ampc_cuda_record_error(__FILE__, __LINE__,
                                           "cudaFree(b->ptr)", (int)err);
                    (void)ampc_set_device_cuda(current);
                    return (int)err;
                }
            }
        }
    }
    return ampc_set_device_cuda(current);
}

/* Puts a free block back into its pool's list, merging it with free
 * neighbours.  Called with mu held. */
void
insert_free(Block *b)
{
    FreeList &fl = free_list(b->pool, b->device, b->small);
    b->allocated = false;
    Block *p = b->prev;
    if (p != nullptr && !p->allocated) {
        fl.erase(p);
        p->size += b->size;
        p->next = b->next;
        if (b->next != nullptr) {
            b->next->prev = p;
        }
        delete b;
        b = p;
    }
    Block *n = b->next;
    if (n != nullptr && !n->allocated) {
        fl.erase(n);
        b->size += n->size;
        b->next = n->next;
        if (n->next != nullptr) {
            n->next->prev = b;
        }
        delete n;
    }
    fl.insert(b);
}

/* A block of `size` (rounded) on `device` from `pool`, or an error code.
 * Called with mu held. */
int
take_block(Pool *pool, int device, size_t size, Block **out)
{
    bool small = size <= kSmallMax;
    FreeList &fl = free_list(pool, device, small);
    Block key{device, small, false, size, nullptr, nullptr, nullptr, pool};
    auto it = fl.lower_bound(&key);
    Block *b = nullptr;
    if (it != fl.end()) {
        b = *it;
        fl.erase(it);
    }
    else {
        size_t seg = segment_size(size);
        void *ptr = nullptr;
        cudaError_t err = cudaMalloc(&ptr, seg);
        if (err == cudaErrorMemoryAllocation && captures_active == 0) {
            /* free what the cache holds (every pool's free segments of this
             * device) and try once more.  Not while any thread captures a
             * CUDA graph: cudaFree synchronises the device, which is
             * illegal during capture (the out-of-memory error is raised
             * instead of invalidating the capture). */
            (void)cudaGetLastError();
            int rc = release_free_segments(&general, device);
            if (rc != 0) {
                return rc;
            }
            if (pool != &general) {
                rc = release_free_segments(pool, device);
                if (rc != 0) {
                    return rc;
                }
            }
            err = cudaMalloc(&ptr, seg);
        }
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            ampc_cuda_record_error(__FILE__, __LINE__, "cudaMalloc(&ptr, seg)",
                                   (int)err);
            return (int)err;
        }
        reserved[device] += (int64_t)seg;
        if (reserved[device] > peak_reserved[device]) {
            peak_reserved[device] = reserved[device];
        }
        b = new Block{device, small, false, seg, (char *)ptr, nullptr,
                      nullptr, pool};
    }
    size_t rest = b->size - size;
    if ((small && rest >= kRound) || (!small && rest > kSmallMax)) {
        Block *r = new Block{device, small, false, rest, b->ptr + size, b,
                             b->next, pool};
        if (b->next != nullptr) {
            b->next->prev = r;
        }
        b->next = r;
        b->size = size;
        fl.insert(r);
    }
    b->allocated = true;
    *out = b;
    return 0;
}

int
alloc_block(size_t nbytes, void **ptr)
{
    *ptr = nullptr;
    int device = ampc_cuda_current_device();
    if (device < 0 || device >= AMPC_CUDA_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__,
                               "ampc_cuda_current_device()",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (no_caching() && capture_pool == nullptr) {
        return exact_alloc(device, nbytes, ptr);
    }
    Pool *pool = capture_pool != nullptr ? capture_pool : &general;
    Block *b = nullptr;
    int rc = take_block(pool, device, round_size(nbytes), &b);
    if (rc != 0) {
        return rc;
    }
    live[b->ptr] = b;
    *ptr = b->ptr;
    return 0;
}

int
free_block(void *ptr)
{
    if (ptr == nullptr) {
        return 0;
    }
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(ptr);
    if (it == live.end() && no_caching()) {
        auto ex = exact_live.find(ptr);
        if (ex != exact_live.end()) {
            return exact_free(ex);
        }
    }
    if (it == live.end()) {
        ampc_cuda_record_error(__FILE__, __LINE__, "ampc_free_cuda(ptr)",
                               (int)cudaErrorInvalidDevicePointer);
        return (int)cudaErrorInvalidDevicePointer;
    }
    Block *b = it->second;
    live.erase(it);
    if (capture_pool != nullptr && b->pool != capture_pool) {
        /* the graph being captured may use this block at every replay.
         * NOTE: it stays marked allocated, so that freeing a neighbour
         * never merges it into a free list before pool_release. */
        capture_pool->held.push_back(b);
        return 0;
    }
    insert_free(b);
    return 0;
}

}  // namespace

// ----------------------------------------------------------------------------
// the slots

extern "C" int
ampc_malloc_cuda(size_t nbytes, void **ptr)
{
    return alloc_block(nbytes, ptr);
}

extern "C" int
ampc_free_cuda(void *ptr)
{
    return free_block(ptr);
}

extern "C" int
ampc_empty_cache_cuda(void)
{
    {
        std::lock_guard<std::mutex> lock(mu);
        if (captures_active > 0) {
            /* cudaFree and waiting for pinned blocks' events synchronise,
             * which is illegal while any thread captures a CUDA graph */
            ampc_cuda_record_error(__FILE__, __LINE__,
                                   "empty_cache() during CUDA graph capture",
                                   (int)cudaErrorStreamCaptureUnsupported);
            return (int)cudaErrorStreamCaptureUnsupported;
        }
    }
    int rc = ampc_cuda_host_empty_cache();
    std::lock_guard<std::mutex> lock(mu);
    int rc2 = release_free_segments(&general, -1);
    return rc != 0 ? rc : rc2;
}

extern "C" int
ampc_memory_reserved_cuda(int index, int64_t *out)
{
    if (index < 0 || index >= AMPC_CUDA_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "memory_reserved(index)",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    std::lock_guard<std::mutex> lock(mu);
    *out = reserved[index];
    return 0;
}

// ----------------------------------------------------------------------------
// scratch memory: the same blocks, not counted as tensor memory (the C side
// counts tensor bytes itself)

int
ampc_cuda_scratch_alloc(size_t nbytes, void **ptr)
{
    return alloc_block(nbytes, ptr);
}

int
ampc_cuda_scratch_free(void *ptr)
{
    return free_block(ptr);
}

// ----------------------------------------------------------------------------
// private pools for CUDA graphs

int
ampc_cuda_pool_begin(void **pool)
{
    std::lock_guard<std::mutex> lock(mu);
    /* *pool non-NULL: continue that pool (graphs sharing memory) */
    Pool *p = *pool != nullptr ? (Pool *)*pool : new Pool();
    private_pools.insert(p);
    if (capture_pool == nullptr) {
        captures_active++;
    }
    capture_pool = p;
    *pool = p;
    return 0;
}

int
ampc_cuda_pool_end(void)
{
    std::lock_guard<std::mutex> lock(mu);
    if (capture_pool != nullptr) {
        captures_active--;
    }
    capture_pool = nullptr;
    return 0;
}

/* The pool's segments join the general cache: their free blocks move to
 * the general free lists and their blocks still in use (graph outputs that
 * tensors still hold) will return there when freed.  Blocks held back
 * during capture are freed for real. */
int
ampc_cuda_pool_release(void *pool)
{
    if (pool == nullptr) {
        return 0;
    }
    std::lock_guard<std::mutex> lock(mu);
    Pool *p = (Pool *)pool;
    if (capture_pool == p) {
        capture_pool = nullptr;
        captures_active--;
    }
    for (Block *b : p->held) {
        insert_free(b);
    }
    for (auto &kv : live) {
        if (kv.second->pool == p) {
            kv.second->pool = &general;
        }
    }
    /* p's blocks freed while another pool was capturing */
    private_pools.erase(p);
    for (Pool *q : private_pools) {
        for (Block *b : q->held) {
            if (b->pool == p) {
                b->pool = &general;
            }
        }
    }
    for (int d = 0; d < AMPC_CUDA_MAX_DEVICES; d++) {
        for (int s = 0; s < 2; s++) {
            FreeList &fl = free_list(p, d, s == 0);
            for (Block *b : fl) {
                b->pool = &general;
                free_list(&general, d, s == 0).insert(b);
            }
            fl.clear();
        }
    }
    delete p;
    return 0;
}

// ----------------------------------------------------------------------------
// statistics

extern "C" int
ampc_cuda_max_memory_reserved(int index, long long *peak)
{
    if (index < 0 || index >= AMPC_CUDA_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "max_memory_reserved",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    std::lock_guard<std::mutex> lock(mu);
    *peak = peak_reserved[index];
    return 0;
}

extern "C" int
ampc_cuda_reset_peak_reserved(int index)
{
    if (index < 0 || index >= AMPC_CUDA_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "reset_peak_reserved",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    std::lock_guard<std::mutex> lock(mu);
    peak_reserved[index] = reserved[index];
    return 0;
}
