/* pinned.cu - pinned (page-locked) host memory: the host_alloc and
 * host_free slots, cached as PyTorch's CachingHostAllocator caches them.
 *
 * A freed pinned block may still be read by an H2D copy queued on an ampc
 * stream, so host_free records an event on every device's ampc stream and
 * the block is reused only once those events have completed.  That is how
 * a caller of a queued H2D copy from pinned memory keeps the host bytes
 * alive: it simply frees the pinned storage through host_free, never with
 * cudaFreeHost.
 */
#include <map>
#include <mutex>
#include <vector>

#include "common.cuh"

// ----------------------------------------------------------------------------
// pinned host memory

namespace {

struct HostBlock {
    char *ptr;
    size_t size;
    bool in_use;
    std::vector<cudaEvent_t> events;    /* pending reads, after free */
    /* devices whose ampc stream was being captured into a CUDA graph at
     * free: an event recorded there would be a captured one, which the host
     * cannot query (cudaEventQuery fails, and that must not read as done),
     * and it would not follow the work queued before the capture.  The
     * event is recorded once the capture is over. */
    std::vector<int> deferred;
};

std::mutex host_mu;
std::map<uintptr_t, HostBlock *> host_blocks;       /* every block */
std::multimap<size_t, HostBlock *> host_ready;      /* free, no reads */
std::vector<HostBlock *> host_pending;              /* free, reads queued */

/* Powers of two from 4 KiB: a DataLoader pins batches of one size over and
 * over, and a power of two keeps the number of distinct sizes small. */
size_t
host_round(size_t n)
{
    size_t s = 4096;
    while (s < n) {
        s <<= 1;
    }
    return s;
}

/* True while `s` is being captured into a CUDA graph (by any thread). */
bool
stream_capturing(cudaStream_t s)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;       /* a broken stream: the record below fails too */
    }
    return cs != cudaStreamCaptureStatusNone;
}

/* *out = an event recorded on device d's ampc stream s after the work
 * queued there so far; 0 or an error code (*out NULL).  Leaves the
 * current device as it was. */
int
record_after(int d, cudaStream_t s, cudaEvent_t *out)
{
    *out = nullptr;
    int prev = ampc_cuda_current_device();
    int rc = ampc_set_device_cuda(d);
    if (rc != 0) {
        return rc;
    }
    cudaEvent_t e = nullptr;
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err == cudaSuccess) {
        err = cudaEventRecord(e, s);
        if (err != cudaSuccess) {
            (void)cudaEventDestroy(e);
        }
    }
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        ampc_cuda_record_error(__FILE__, __LINE__, "cudaEventRecord",
                               (int)err);
        (void)ampc_set_device_cuda(prev);
        return (int)err;
    }
    *out = e;
    return ampc_set_device_cuda(prev);
}

/* Keeps b from reuse until the work queued so far on device d's stream s
 * has run: an event, or (capturing) a deferred one; without an event, s is
 * waited for at once.  0 or the error that made it wait. */
int
guard_block(HostBlock *b, int d, cudaStream_t s)
{
    if (stream_capturing(s)) {
        b->deferred.push_back(d);
        return 0;
    }
    cudaEvent_t e = nullptr;
    int rc = record_after(d, s, &e);
    if (rc == 0) {
        b->events.push_back(e);
        return 0;
    }
    if (cudaStreamSynchronize(s) != cudaSuccess) {
        (void)cudaGetLastError();   /* a failed stream reads nothing more */
    }
    return rc;
}

/* Moves pending blocks whose reads have all completed to host_ready.  With
 * host_mu held.  `wait` blocks on the events instead (empty_cache); a block
 * whose stream is still being captured stays pending either way. */
void
host_collect(bool wait)
{
    size_t keep = 0;
    for (size_t i = 0; i < host_pending.size(); i++) {
        HostBlock *b = host_pending[i];
        /* captures that have ended since the free: record their events
         * now (guard_block defers again a stream still capturing) */
        std::vector<int> waiting;
        waiting.swap(b->deferred);
        for (int d : waiting) {
            cudaStream_t s = ampc_cuda_stream_if_created(d);
            if (s != nullptr) {
                (void)guard_block(b, d, s);
            }
        }
        bool done = b->deferred.empty();
        for (size_t k = 0; done && k < b->events.size(); k++) {
            cudaEvent_t e = b->events[k];
            cudaError_t err = wait ? cudaEventSynchronize(e)
                                   : cudaEventQuery(e);
            if (err == cudaErrorNotReady) {
                /* not an error, but the runtime may keep it as this
                 * thread's last error (PyTorch clears it too): left
                 * there, the next kernel launch's cudaGetLastError()
                 * check (AMPC_CUDA_CHECK_LAUNCH) would fail with it */
                (void)cudaGetLastError();
                done = false;
                break;
            }
            if (err != cudaSuccess) {
                /* a failed stream never reads the block again */
                (void)cudaGetLastError();
            }
        }
        if (!done) {
            host_pending[keep++] = b;
            continue;
        }
        for (cudaEvent_t e : b->events) {
            (void)cudaEventDestroy(e);
        }
        b->events.clear();
        host_ready.emplace(b->size, b);
    }
    host_pending.resize(keep);
}

int
host_alloc(size_t nbytes, void **out)
{
    *out = nullptr;
    size_t size = host_round(nbytes);
    std::lock_guard<std::mutex> lock(host_mu);
    host_collect(false);
    auto it = host_ready.find(size);
    if (it != host_ready.end()) {
        HostBlock *b = it->second;
        host_ready.erase(it);
        b->in_use = true;
        *out = b->ptr;
        return 0;
    }
    void *p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation && !host_ready.empty()) {
        (void)cudaGetLastError();
        for (auto &kv : host_ready) {
            host_blocks.erase((uintptr_t)kv.second->ptr);
            (void)cudaFreeHost(kv.second->ptr);
            delete kv.second;
        }
        host_ready.clear();
        err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    }
    AMPC_CUDA_CHECK(err);
    HostBlock *b = new HostBlock{(char *)p, size, true, {}, {}};
    host_blocks[(uintptr_t)p] = b;
    *out = p;
    return 0;
}

/* Records, on every device whose ampc stream exists, an event after the
 * work queued so far, and keeps the block until they complete. */
int
host_free(void *ptr)
{
    if (ptr == nullptr) {
        return 0;
    }
    std::lock_guard<std::mutex> lock(host_mu);
    auto it = host_blocks.find((uintptr_t)ptr);
    if (it == host_blocks.end() || !it->second->in_use) {
        ampc_cuda_record_error(__FILE__, __LINE__, "host_free(ptr)",
                               (int)cudaErrorInvalidHostPointer);
        return (int)cudaErrorInvalidHostPointer;
    }
    HostBlock *b = it->second;
    b->in_use = false;
    int rc = 0;
    for (int d = 0; d < AMPC_CUDA_MAX_DEVICES; d++) {
        cudaStream_t s = ampc_cuda_stream_if_created(d);
        if (s == nullptr) {
            continue;
        }
        /* NOTE: a stream whose event cannot be recorded is waited for
         * instead (never a capturing one: that would end its capture) */
        int drc = guard_block(b, d, s);
        if (rc == 0) {
            rc = drc;
        }
    }
    if (b->events.empty() && b->deferred.empty()) {
        host_ready.emplace(b->size, b);
    }
    else {
        host_pending.push_back(b);
    }
    return rc;
}

}  // namespace

/* Whether [p, p + n) lies inside one of our pinned blocks. */
bool
ampc_cuda_host_is_pinned(const void *p, size_t n)
{
    std::lock_guard<std::mutex> lock(host_mu);
    auto it = host_blocks.upper_bound((uintptr_t)p);
    if (it == host_blocks.begin()) {
        return false;
    }
    --it;
    HostBlock *b = it->second;
    uintptr_t start = (uintptr_t)b->ptr;
    return (uintptr_t)p + n <= start + b->size;
}

extern "C" int
ampc_host_alloc_cuda(size_t nbytes, void **host_ptr)
{
    return host_alloc(nbytes, host_ptr);
}

extern "C" int
ampc_host_free_cuda(void *host_ptr)
{
    return host_free(host_ptr);
}

/* Frees every idle pinned block (empty_cache; waits for pending reads). */
int
ampc_cuda_host_empty_cache(void)
{
    std::lock_guard<std::mutex> lock(host_mu);
    host_collect(true);
    for (auto &kv : host_ready) {
        host_blocks.erase((uintptr_t)kv.second->ptr);
        (void)cudaFreeHost(kv.second->ptr);
        delete kv.second;
    }
    host_ready.clear();
    return 0;
}
