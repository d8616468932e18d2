/* graph.cu - CUDA graphs: capture the work queued on the current device's
 * ampc stream into a graph, instantiate it, replay it with one launch, and
 * free it.  The graph's allocations come from a private memory pool of the
 * caching allocator (allocator.cu), so the addresses baked into the graph
 * stay the graph's until it is destroyed.
 *
 * Capture mode: cudaStreamCaptureModeRelaxed.  The caching allocator calls
 * cudaMalloc during capture whenever the graph's pool has no block to hand
 * out (a new pool always starts empty), and cudaMalloc is one of the calls
 * CUDA calls "potentially unsafe": in global or thread-local mode it would
 * invalidate the capture (PyTorch's allocator switches its thread to
 * relaxed mode around each such cudaMalloc for that reason).  The call is
 * safe here for the reason CUDA gives: the block is not observed by the
 * capture, and the pool never returns it to other work before the graph is
 * destroyed.  Relaxed mode also leaves other threads (the DataLoader's
 * pinned-memory thread calling cudaHostAlloc) free to run while a graph is
 * captured.  What relaxed mode does not catch, ampc refuses itself: a host
 * read of device data during capture (item(), numpy(), a Python bool) is
 * refused by the C side through the graph_capturing slot before it reaches
 * CUDA; synchronising the capturing stream or the device is still refused
 * by CUDA in every mode.
 */
#include <mutex>
#include <new>
#include <unordered_map>

#include "common.cuh"

struct ampc_cuda_graph {
    int device;             /* where it was captured and replays */
    cudaStream_t stream;    /* the ampc stream captured */
    cudaGraphExec_t exec;   /* NULL until capture_end succeeded */
    void *pool;             /* the private pool (allocator.cu) */
    bool capturing;         /* between capture_begin and capture_end */
    bool pool_open;         /* between pool_begin and pool_end */
};

// ----------------------------------------------------------------------------
// pools shared by several graphs

/* How many live graphs use each pool: a pool goes back to the cache when
 * the last graph that shares it is destroyed.  NOTE: graphs may be
 * destroyed by the garbage collector on any thread, hence the mutex. */
static std::mutex pool_mutex;
static std::unordered_map<void *, int> pool_users;

static void
pool_acquire(void *pool)
{
    std::lock_guard<std::mutex> lock(pool_mutex);
    pool_users[pool] += 1;
}

/* True while some live graph uses `pool`. */
static bool
pool_known(void *pool)
{
    std::lock_guard<std::mutex> lock(pool_mutex);
    return pool_users.count(pool) != 0;
}

/* Drops one user of `pool`; returns true when it was the last. */
static bool
pool_drop(void *pool)
{
    std::lock_guard<std::mutex> lock(pool_mutex);
    auto it = pool_users.find(pool);
    if (it == pool_users.end() || --it->second > 0) {
        return false;
    }
    pool_users.erase(it);
    return true;
}

// ----------------------------------------------------------------------------
// capture, replay, destroy

extern "C" int
ampc_graph_capturing_cuda(int *capturing)
{
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    AMPC_CUDA_CHECK(cudaStreamIsCapturing(ampc_cuda_stream(), &status));
    /* An invalidated capture still counts: it is only over at
     * cudaStreamEndCapture. */
    *capturing = status != cudaStreamCaptureStatusNone;
    return 0;
}

extern "C" int
ampc_graph_capture_begin_cuda(void *share_pool, ampc_cuda_graph **graph)
{
    *graph = NULL;
    cudaStream_t stream = ampc_cuda_stream();
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    AMPC_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
    if (status != cudaStreamCaptureStatusNone) {
        /* One capture at a time per stream: CUDA would refuse the nested
         * begin, but only after the pool had been switched. */
        AMPC_CUDA_CHECK(cudaErrorIllegalState);
    }
    if (share_pool != NULL && !pool_known(share_pool)) {
        /* Every graph that used this pool has been destroyed. */
        AMPC_CUDA_CHECK(cudaErrorInvalidValue);
    }
    ampc_cuda_graph *g = new (std::nothrow) ampc_cuda_graph();
    if (g == NULL) {
        AMPC_CUDA_CHECK(cudaErrorMemoryAllocation);
    }
    g->device = ampc_cuda_current_device();
    g->stream = stream;
    g->exec = NULL;
    g->pool = share_pool;
    g->capturing = false;
    g->pool_open = false;
    /* NOTE: pool_begin with *pool non-NULL continues that pool (a shared
     * one); with NULL it makes a new one. */
    int rc = ampc_cuda_pool_begin(&g->pool);
    if (rc != 0) {
        delete g;
        return rc;
    }
    pool_acquire(g->pool);
    cudaError_t err = cudaStreamBeginCapture(stream,
                                             cudaStreamCaptureModeRelaxed);
    if (err != cudaSuccess) {
        /* Nothing is left behind on failure: the pool is closed and, when
         * no other graph shares it, released. */
        (void)ampc_cuda_pool_end();
        if (pool_drop(g->pool)) {
            (void)ampc_cuda_pool_release(g->pool);
        }
        delete g;
        AMPC_CUDA_CHECK(err);
    }
    g->pool_open = true;
    g->capturing = true;
    *graph = g;
    return 0;
}

/* Ends g's capture if one is in progress and closes its pool; the graph
 * CUDA returns (NULL when the capture was invalidated) in *out. */
static int
graph_end(ampc_cuda_graph *g, cudaGraph_t *out)
{
    *out = NULL;
    cudaError_t err = cudaSuccess;
    if (g->capturing) {
        g->capturing = false;
        err = cudaStreamEndCapture(g->stream, out);
    }
    if (g->pool_open) {
        g->pool_open = false;
        int rc = ampc_cuda_pool_end();
        if (rc != 0 && err == cudaSuccess) {
            return rc;
        }
    }
    AMPC_CUDA_CHECK(err);
    return 0;
}

extern "C" int
ampc_graph_capture_end_cuda(ampc_cuda_graph *g)
{
    cudaGraph_t graph = NULL;
    int rc = graph_end(g, &graph);
    if (rc != 0) {
        if (graph != NULL) {
            (void)cudaGraphDestroy(graph);
        }
        return rc;
    }
    if (graph == NULL) {
        /* EndCapture succeeded without a graph: nothing was captured by
         * this stream (CUDA documents a NULL graph only on failure). */
        AMPC_CUDA_CHECK(cudaErrorStreamCaptureInvalidated);
    }
    cudaError_t err = cudaGraphInstantiate(&g->exec, graph, 0);
    /* The executable graph is a snapshot: the template can go at once. */
    (void)cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
        g->exec = NULL;
        AMPC_CUDA_CHECK(err);
    }
    /* Uploading now makes the first replay as fast as the others. */
    AMPC_CUDA_CHECK(cudaGraphUpload(g->exec, g->stream));
    return 0;
}

extern "C" int
ampc_graph_replay_cuda(ampc_cuda_graph *g)
{
    if (g->exec == NULL) {
        /* The C side refuses this first; kept so a slot never launches a
         * NULL graph. */
        AMPC_CUDA_CHECK(cudaErrorInvalidResourceHandle);
    }
    AMPC_CUDA_CHECK(cudaGraphLaunch(g->exec, g->stream));
    return 0;
}

extern "C" int
ampc_graph_pool_cuda(const ampc_cuda_graph *g, void **pool)
{
    *pool = g->pool;
    return 0;
}

extern "C" int
ampc_graph_destroy_cuda(ampc_cuda_graph *g)
{
    if (g == NULL) {
        return 0;
    }
    int rc = 0;
    if (g->capturing) {
        /* A capture abandoned half-way (an exception inside `with
         * graph(g)`, or an op CUDA refused, which invalidates the capture)
         * is ended here, so that the stream works again; its failure is
         * the abandoned capture's, not an error of this call. */
        g->capturing = false;
        cudaGraph_t graph = NULL;
        if (cudaStreamEndCapture(g->stream, &graph) != cudaSuccess) {
            (void)cudaGetLastError();
        }
        if (graph != NULL) {
            (void)cudaGraphDestroy(graph);
        }
    }
    if (g->pool_open) {
        g->pool_open = false;
        rc = ampc_cuda_pool_end();
    }
    if (g->exec != NULL) {
        cudaError_t err = cudaGraphExecDestroy(g->exec);
        g->exec = NULL;
        if (err != cudaSuccess && rc == 0) {
            (void)cudaGetLastError();
            ampc_cuda_record_error(__FILE__, __LINE__,
                                   "cudaGraphExecDestroy(g->exec)",
                                   (int)err);
            rc = (int)err;
        }
    }
    /* NOTE: a replay may still be running.  Releasing the pool is safe all
     * the same: its blocks go back to the cache, which hands them only to
     * work queued later on the same stream, after the replay. */
    if (g->pool != NULL && pool_drop(g->pool)) {
        int prc = ampc_cuda_pool_release(g->pool);
        if (prc != 0 && rc == 0) {
            rc = prc;
        }
    }
    delete g;
    return rc;
}
